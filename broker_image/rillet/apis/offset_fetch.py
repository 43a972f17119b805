"""OffsetFetch (key 9), v1-8: committed offsets of a group (v8: of several groups).

A partition without a committed offset answers offset -1 and no error.
require_stable (v7+): a partition whose offset commit waits in an open transaction
(TxnOffsetCommit) answers UNSTABLE_OFFSET_COMMIT, which clients retry.
v1: listed partitions only, errors per partition. v2: null topics = all,
top-level error. v3: throttle time. v5: committed leader epoch.
v6: flexible. v7: require_stable. v8: batched groups.
"""
from __future__ import annotations

from typing import Any

from ..protocol import errors
from .registry import RequestContext, api


def _group_offsets(ctx: RequestContext, group_id: str, topics: Any, version: int,
                   require_stable: bool = False) -> tuple[int, list[dict[str, Any]]]:
    requested = None if topics is None else [
        (t.name, list(t.partition_indexes)) for t in topics]
    try:
        ctx.require("DESCRIBE", "GROUP", group_id)
        found = ctx.broker.coordinator.fetch_offsets(group_id, requested)
        # A topic the principal may not DESCRIBE: left out of an all-topics answer, its
        # partitions answered TOPIC_AUTHORIZATION_FAILED when named.
        denied = {t for t, _ in found if not ctx.authorized("DESCRIBE", "TOPIC", t)}
        if requested is None:
            found = {tp: o for tp, o in found.items() if tp[0] not in denied}
        code = 0
        unstable = ctx.broker.coordinator.unstable_offsets(group_id) if require_stable \
            else set()
    except Exception as exc:
        code = errors.code_of(exc, "offset fetch")
        unstable = set()
        found = {(t, p): None for t, parts in (requested or []) for p in parts}
        denied = set()
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), o in found.items():
        if topic in denied or (topic, partition) in unstable:
            o = None
        by_topic.setdefault(topic, []).append({
            "partition_index": partition,
            "committed_offset": o.offset if o else -1,
            "committed_leader_epoch": o.leader_epoch if o else -1,
            "metadata": o.metadata if o else "",
            # v1 has no top-level error: the group's error goes on every partition.
            "error_code": errors.TopicAuthorizationFailed.code if topic in denied
            else errors.UnstableOffsetCommit.code if (topic, partition) in unstable
            else code if version < 2 else 0})
    return code, [{"name": t, "partitions": parts} for t, parts in by_topic.items()]


@api(key=9, versions=(1, 8))
async def offset_fetch(ctx: RequestContext, req: Any) -> Any:
    if ctx.version >= 8:
        groups = []
        for g in req.groups:
            code, topics = _group_offsets(ctx, g.group_id, g.topics, ctx.version,
                                          req.require_stable)
            groups.append({"group_id": g.group_id, "topics": topics, "error_code": code})
        return ctx.response({"throttle_time": 0, "groups": groups})
    code, topics = _group_offsets(ctx, req.group_id, req.topics, ctx.version,
                                  bool(getattr(req, "require_stable", False)))
    return ctx.response({"throttle_time": 0, "topics": topics, "error_code": code})
