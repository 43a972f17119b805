"""BrokerRegistration (key 62), v0-v2: a broker registers with the active controller.

Served on the controller listener only. The broker comes back fenced with its
broker epoch; its heartbeats unfence it once it has caught up. Only the first
listener is the address other brokers use (the broker sends its inter-broker listener
first); all are kept, so each client is told the brokers' addresses on its own listener.
v2 adds the directory ids of its online log dirs (LogDirs, KIP-858), which the registration
record keeps. (v1's ZK-migration flag is for ZooKeeper brokers: always false here.)
"""
from __future__ import annotations

from typing import Any

from ..protocol import errors
from .registry import RequestContext, api


@api(key=62, versions=(0, 2), scope="controller")
async def broker_registration(ctx: RequestContext, req: Any) -> Any:
    broker = ctx.broker
    try:
        if req.cluster_id != broker.cluster_id:
            raise errors.InconsistentClusterId(
                f"broker {req.broker_id} belongs to cluster {req.cluster_id}, "
                f"not {broker.cluster_id}")
        if not req.listeners:
            raise errors.InvalidRequest("a registration needs at least one listener")
        listener = req.listeners[0]
        endpoints = tuple((lst.name.upper(), lst.host, lst.port) for lst in req.listeners)
        epoch = await broker.controller.register_broker(
            req.broker_id, listener.host, listener.port, req.rack, str(req.incarnation_id),
            endpoints, tuple(d for d in getattr(req, "log_dirs", ()) if d is not None))
        return ctx.response({"throttle_time": 0, "error_code": 0, "broker_epoch": epoch})
    except Exception as exc:
        return ctx.response({"throttle_time": 0, "broker_epoch": -1,
                             "error_code": errors.code_of(exc, "broker registration")})
