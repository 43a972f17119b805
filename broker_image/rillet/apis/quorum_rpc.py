"""The shared path of the quorum RPCs (Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch of
__cluster_metadata): check the cluster id, hand the message to the Raft node, encode
its answer. A request from another cluster is refused with INCONSISTENT_CLUSTER_ID, one about
anything but __cluster_metadata-0 alone with INVALID_REQUEST; both are logged, never acted on.
A request that reaches a node while it stops is answered BROKER_NOT_AVAILABLE (the sender
backs off and retries, as Kafka's Raft client does for that error)."""
from __future__ import annotations

import logging
from typing import Any

from ..metadata.log import METADATA_TOPIC
from ..peer_watch import peer_may_end
from ..protocol import errors
from ..raft import rpc
from .registry import RequestContext

log = logging.getLogger(__name__)


async def answer(ctx: RequestContext, api_key: int, req: Any) -> Any:
    broker = ctx.broker
    try:
        cluster_id, sender, message = rpc.decode_request(api_key, req, METADATA_TOPIC)
    except rpc.InvalidQuorumRequest as exc:
        log.warning("refused a quorum request from %s: %s", ctx.peer, exc)
        return ctx.response(rpc.encode_response(api_key, None, METADATA_TOPIC,
                                                 errors.InvalidRequest.code))
    if cluster_id is not None and cluster_id != broker.cluster_id:
        log.warning("refused %s from node %d at %s: cluster id %s is not ours (%s)",
                    type(message).__name__, sender, ctx.peer, cluster_id, broker.cluster_id)
        return ctx.response(rpc.encode_response(api_key, None, METADATA_TOPIC,
                                                 rpc.INCONSISTENT_CLUSTER_ID))
    max_wait = int(req.max_wait.total_seconds() * 1000) if api_key == rpc.FETCH else 0
    try:
        # A fetcher that hangs up during the long poll frees its connection at once.
        response = await broker.raft.handle(sender, message, max_wait, peer_may_end)
    except errors.NotController as exc:
        # Raised only while this node stops (a parked follower Fetch is woken by it): an
        # answer the sender retries elsewhere, as from a node that is down, not a failure
        # of ours to log as an error.
        log.debug("%s from node %d not answered: %s", type(message).__name__, sender, exc)
        return ctx.response(rpc.encode_response(api_key, None, METADATA_TOPIC,
                                                 errors.BrokerNotAvailable.code))
    return ctx.response(rpc.encode_response(api_key, response, METADATA_TOPIC))
