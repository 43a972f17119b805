"""EndQuorumEpoch (key 54), v0: a leader that is stopping asks the voters to elect a successor.

Served on the controller listener only (KRaft's quorum RPC). Later versions add
directory ids and voter endpoints (KIP-853 dynamic quorums), which rillet's
static voter set does not need.
"""
from __future__ import annotations

from typing import Any

from . import quorum_rpc
from .registry import RequestContext, api


@api(key=54, versions=(0, 0), scope="controller")
async def end_quorum_epoch(ctx: RequestContext, req: Any) -> Any:
    return await quorum_rpc.answer(ctx, 54, req)
