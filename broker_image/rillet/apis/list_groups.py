"""ListGroups (key 16), v0-4: groups this node coordinates.

v1: throttle time. v3: flexible. v4: states filter (case-insensitive) and
each group's state. (v5's type filter is KIP-848's and not served.)
"""
from __future__ import annotations

from typing import Any

from .registry import CLUSTER, RequestContext, api


@api(key=16, versions=(0, 4))
async def list_groups(ctx: RequestContext, req: Any) -> Any:
    states = getattr(req, "states_filter", ())
    # DESCRIBE on the cluster lists every group; otherwise the groups one may DESCRIBE.
    everything = ctx.authorized("DESCRIBE", "CLUSTER", CLUSTER, quiet=True)
    groups = [{"group_id": g.group_id, "protocol_type": g.protocol_type,
               "group_state": g.state}
              for g in ctx.broker.coordinator.list_groups(states)
              if everything or ctx.authorized("DESCRIBE", "GROUP", g.group_id, quiet=True)]
    return ctx.response({"throttle_time": 0, "error_code": 0, "groups": groups})
