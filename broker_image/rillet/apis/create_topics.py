"""CreateTopics (key 19), v2-7.

Explicit assignments, configs and validate_only are honoured; placement is
rack-aware. The topic exists once the metadata record is committed, so the
answer never races the creation; a node that relayed the request answers only once
its own image has the topic too (bounded: dispatch.SETTLE_S).
v2: error messages. v4: defaults (-1) for partitions / replication factor.
v5: flexible, returns partitions, replication factor and configs. v7: ids.
"""
from __future__ import annotations

from typing import Any

from ..controller.topics import TopicSpec
from ..metadata.image import MetadataImage
from ..protocol import errors
from .describe_configs import topic_config_entries
from .registry import CLUSTER, RequestContext, api


def _spec(t: Any) -> TopicSpec:
    return TopicSpec(
        name=t.name,
        num_partitions=t.num_partitions,
        replication_factor=t.replication_factor,
        assignments={a.partition_index: list(a.broker_ids) for a in t.assignments},
        configs={c.name: c.value for c in t.configs},
    )


def _created_here(image: MetadataImage, req: Any, resp: Any) -> bool:
    """Every topic the controller created is in this node's image (a relayed answer waits
    for it: dispatch._settle)."""
    if req.validate_only:
        return True
    topics = image.topics
    return all(t.name in topics for t in resp.topics if t.error_code == 0)


@api(key=19, versions=(2, 7), forward=True, settled=_created_here)
async def create_topics(ctx: RequestContext, req: Any) -> Any:
    may_create_any = ctx.authorized("CREATE", "CLUSTER", CLUSTER, quiet=True)
    permitted = [t for t in req.topics
                 if may_create_any or ctx.authorized("CREATE", "TOPIC", t.name)]
    allowed = {id(t) for t in permitted}
    results = iter(await ctx.broker.channel.create_topics(
        [_spec(t) for t in permitted], validate_only=req.validate_only) if permitted else [])
    out = []
    for spec in req.topics:
        if id(spec) not in allowed:
            out.append({"name": spec.name, "topic_id": None, "num_partitions": -1,
                        "replication_factor": -1, "configs": None,
                        "error_code": errors.TopicAuthorizationFailed.code,
                        "error_message": f"{ctx.principal} may not CREATE topic {spec.name}"})
            continue
        r = next(results)
        entry: dict[str, Any] = {"name": r.name, "topic_id": r.topic_id,
                                 "error_code": 0, "error_message": None,
                                 "num_partitions": r.num_partitions,
                                 "replication_factor": r.replication_factor, "configs": None}
        if r.error is not None:
            entry.update(error_code=r.error.code, error_message=r.error.message,
                         num_partitions=-1, replication_factor=-1)
        else:
            overrides = {c.name: c.value for c in spec.configs if c.value is not None}
            entry["configs"] = [
                {"name": c["name"], "value": c["value"], "read_only": False,
                 "config_source": c["config_source"], "is_sensitive": False}
                for c in topic_config_entries(ctx.broker.config, overrides, None)]
        out.append(entry)
    return ctx.response({"throttle_time": 0, "topics": out})
