"""FindCoordinator (key 10), v0-4.

Key type 0 (group): the leader of the group's __consumer_offsets partition,
creating that topic on first use (DESCRIBE on the group). Key type 1
(transaction): the leader of the transactional id's __transaction_state
partition, created on first use likewise (DESCRIBE on the TRANSACTIONAL_ID).
Share groups (key type 2) are answered INVALID_REQUEST, a non-retriable error
that makes such clients fail fast.
v0: one group key. v1: key type, error message. v3: flexible.
v4: batched keys (coordinator_keys -> coordinators).
"""
from __future__ import annotations

from typing import Any

from ..protocol import errors
from .registry import RequestContext, api

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1
# key type -> the resource a client needs DESCRIBE on, the error for an empty key
_KINDS = {GROUP_KEY_TYPE: ("GROUP", errors.InvalidGroupId),
          TRANSACTION_KEY_TYPE: ("TRANSACTIONAL_ID", errors.InvalidRequest)}


async def _lookup(ctx: RequestContext, key_type: int, key: str) -> dict[str, Any]:
    entry: dict[str, Any] = {"key": key, "node_id": -1, "host": "", "port": -1,
                             "error_code": 0, "error_message": None}
    try:
        if key_type not in _KINDS:
            raise errors.InvalidRequest(f"coordinator key type {key_type} is not supported")
        resource, empty = _KINDS[key_type]
        if not key:
            raise empty(f"{resource.lower()} id is empty")
        ctx.require("DESCRIBE", resource, key)
        coordinator = (ctx.broker.txn_coordinator if key_type == TRANSACTION_KEY_TYPE
                       else ctx.broker.coordinator)
        node_id, host, port = await coordinator.find_coordinator(key,
                                                                 ctx.session.listener_name)
        entry.update(node_id=node_id, host=host, port=port)
    except Exception as exc:  # each key gets its own error
        entry.update(error_code=errors.code_of(exc, "find coordinator"),
                     error_message=errors.message_of(exc))
    return entry


@api(key=10, versions=(0, 4))
async def find_coordinator(ctx: RequestContext, req: Any) -> Any:
    key_type = getattr(req, "key_type", GROUP_KEY_TYPE)
    if ctx.version >= 4:
        results = [await _lookup(ctx, key_type, k) for k in req.coordinator_keys]
        return ctx.response({"throttle_time": 0, "coordinators": results})
    entry = await _lookup(ctx, key_type, req.key)
    entry.pop("key")
    return ctx.response({"throttle_time": 0, **entry})
