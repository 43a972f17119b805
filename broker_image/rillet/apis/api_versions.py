"""ApiVersions (key 18), v0-3.

The answer is derived from the API registry. An unknown higher version is
answered in dispatch with a v0 body carrying UNSUPPORTED_VERSION and the
ranges, so clients retry with one we support. No feature flags are
advertised: transactions (KIP-890) do not exist here.
v0: ranges. v1: + throttle time. v2: same. v3: flexible, client software name.
"""
from __future__ import annotations

from typing import Any

from ..dispatch import api_versions_table
from .registry import RequestContext, api


@api(key=18, versions=(0, 3))
async def api_versions(ctx: RequestContext, req: Any) -> Any:
    return ctx.response({"error_code": 0, "api_keys": api_versions_table(ctx.listener),
                         "throttle_time": 0})
