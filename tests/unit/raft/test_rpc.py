"""Quorum RPCs from the wire: only about __cluster_metadata-0 alone, else INVALID_REQUEST."""
from __future__ import annotations

import pytest

from rillet.protocol.build import build
from rillet.protocol.codec import request_schema, response_schema
from rillet.raft import messages as m
from rillet.raft import rpc

TOPIC = "__cluster_metadata"   # the quorum's topic, as the broker names it to raft


def _vote(topics: list) -> object:
    return build(request_schema(rpc.VOTE, 0), {"cluster_id": "c", "topics": topics})


def _partition(**extra: int) -> dict:
    return {"partition_index": 0, "replica_epoch": 4, "replica_id": 2, "last_offset_epoch": 3,
            "last_offset": 17, **extra}


def test_a_vote_for_the_metadata_partition_is_read():
    body = _vote([{"topic_name": "__cluster_metadata", "partitions": [_partition()]}])
    assert rpc.decode_request(rpc.VOTE, body, TOPIC) == ("c", 2, m.VoteRequest(4, 2, 3, 17))


@pytest.mark.parametrize("topics", [
    [],
    [{"topic_name": "__cluster_metadata", "partitions": []}],
    [{"topic_name": "__cluster_metadata", "partitions": [_partition(), _partition()]}],
    [{"topic_name": "events", "partitions": [_partition()]}],
    [{"topic_name": "__cluster_metadata", "partitions": [_partition()]}] * 2,
], ids=["no-topic", "no-partition", "two-partitions", "other-topic", "two-topics"])
def test_anything_else_is_an_invalid_quorum_request(topics):
    """Found by the fuzz campaign: these raised IndexError in the handler (the connection
    closed with a traceback) or were read as the metadata partition."""
    with pytest.raises(rpc.InvalidQuorumRequest):
        rpc.decode_request(rpc.VOTE, _vote(topics), TOPIC)


def test_a_vote_for_another_partition_of_the_metadata_topic_is_invalid():
    body = _vote([{"topic_name": "__cluster_metadata",
                   "partitions": [_partition(partition_index=5)]}])
    with pytest.raises(rpc.InvalidQuorumRequest, match="partition 5"):
        rpc.decode_request(rpc.VOTE, body, TOPIC)


@pytest.mark.parametrize("topics", [[], [{"topic_name": "__cluster_metadata", "partitions": []}]],
                         ids=["no-topic", "no-partition"])
def test_a_response_about_no_partition_is_a_failed_request(topics):
    """It raised IndexError, which ended the sending task without telling the core."""
    body = build(response_schema(rpc.VOTE, 0), {"error_code": 0, "topics": topics})
    assert rpc.decode_response(m.VoteRequest(4, 2, 3, 17), body) == -1
