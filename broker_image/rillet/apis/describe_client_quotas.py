"""DescribeClientQuotas (key 48), v0-1: rillet has no client quotas, so none match.

Answered so that `kafka-configs --describe --entity-type users` (which asks for quotas and
SCRAM credentials together) works; it needs DESCRIBE_CONFIGS on the cluster, as in Kafka.
"""
from __future__ import annotations

from typing import Any

from ..protocol import errors
from .registry import CLUSTER, RequestContext, api


@api(key=48, versions=(0, 1))
async def describe_client_quotas(ctx: RequestContext, req: Any) -> Any:
    if not ctx.authorized("DESCRIBE_CONFIGS", "CLUSTER", CLUSTER):
        return ctx.response({"throttle_time": 0, "entries": None,
                             "error_code": errors.ClusterAuthorizationFailed.code,
                             "error_message": "DESCRIBE_CONFIGS on the cluster is not allowed"})
    return ctx.response({"throttle_time": 0, "error_code": 0, "error_message": None,
                         "entries": []})
