"""BeginQuorumEpoch (key 53), v0: a new leader announces its epoch to the voters.

Served on the controller listener only (KRaft's quorum RPC). Later versions add
directory ids and voter endpoints (KIP-853 dynamic quorums), which rillet's
static voter set does not need.
"""
from __future__ import annotations

from typing import Any

from . import quorum_rpc
from .registry import RequestContext, api


@api(key=53, versions=(0, 0), scope="controller")
async def begin_quorum_epoch(ctx: RequestContext, req: Any) -> Any:
    return await quorum_rpc.answer(ctx, 53, req)
