"""The compiled bounds check refuses and accepts exactly what the reference walk does."""
from __future__ import annotations

import io
import random

from kio.serial import entity_writer

from rillet.protocol.bounds import compiled_check
from rillet.protocol.build import build
from rillet.protocol.layout import Malformed, layout_of
from tests.fuzz.mutate import framed, mutate
from tests.samples import all_kio_schemas, sample
from tests.wire import uvarint

ALL_SCHEMAS = all_kio_schemas()


def _outcome(check, data: bytes) -> int | str:
    try:
        return check(data, 0, len(data))
    except Malformed:
        return "malformed"


def _encoded(cls: type, items: int) -> bytes:
    buf = io.BytesIO()
    entity_writer(cls)(buf, build(cls, sample(cls, tagged=True, items=items)))
    return buf.getvalue()


def test_valid_messages_end_where_the_reference_ends():
    for cls in ALL_SCHEMAS:
        for items in (0, 1, 3):
            data = _encoded(cls, items)
            assert compiled_check(cls)(data, 0, len(data)) == len(data), cls
            assert layout_of(cls).check(data, 0, len(data)) == len(data), cls


def test_damaged_messages_get_the_same_verdict_from_both():
    """Every schema kio has, 40 mutations each (the fuzz campaign's own mutator)."""
    rng = random.Random(31)
    disagreements = []
    refused = 0
    for cls in ALL_SCHEMAS:
        frame = framed(_encoded(cls, 2))
        for _ in range(40):
            data = mutate(rng, frame, [frame])[4:]
            compiled, reference = (_outcome(compiled_check(cls), data),
                                   _outcome(layout_of(cls).check, data))
            if compiled != reference:
                disagreements.append((cls.__qualname__, data.hex(), compiled, reference))
            refused += compiled == "malformed"
    assert not disagreements, disagreements[:5]
    assert refused > 5000  # the mutations do reach the checks


def test_a_message_cut_anywhere_is_malformed_for_both():
    for cls in ALL_SCHEMAS[::7]:
        data = _encoded(cls, 2)
        for cut in range(len(data)):
            assert _outcome(compiled_check(cls), data[:cut]) == "malformed", (cls, cut)
            assert _outcome(layout_of(cls).check, data[:cut]) == "malformed", (cls, cut)


def _empty_names_metadata(count: int) -> bytes:
    """Metadata v9 naming ``count`` empty topics: two bytes an element on the wire."""
    return uvarint(count + 1) + b"\x01\x00" * count + b"\x00\x00\x00" + b"\x00"


def test_a_request_of_more_elements_than_the_budget_is_malformed_however_few_bytes():
    from kio.schema.metadata.v9.request import MetadataRequest

    from rillet.protocol.bounds import MAX_REQUEST_ELEMENTS
    check = compiled_check(MetadataRequest)
    fits = _empty_names_metadata(MAX_REQUEST_ELEMENTS)
    assert check(fits, 0, len(fits)) == len(fits)
    over = _empty_names_metadata(MAX_REQUEST_ELEMENTS + 1)
    assert _outcome(check, over) == "malformed"


def test_the_budget_counts_elements_at_any_depth_and_responses_get_a_larger_one():
    from kio.schema.metadata.v12.response import MetadataResponse

    from rillet.protocol.bounds import MAX_REQUEST_ELEMENTS, MAX_RESPONSE_ELEMENTS
    # One topic of (budget / 8) partitions of 7 replicas each: elements sit in nested
    # arrays only, a quarter million of them past the request budget.
    partitions = MAX_REQUEST_ELEMENTS // 8 + 1
    body = build(MetadataResponse, {
        "throttle_time": 0, "brokers": [], "cluster_id": None, "controller_id": 1,
        "topics": [{"error_code": 0, "name": "t", "topic_id": None, "is_internal": False,
                    "partitions": [{"error_code": 0, "partition_index": i, "leader_id": 1,
                                    "leader_epoch": 0, "replica_nodes": [1] * 7,
                                    "isr_nodes": [], "offline_replicas": []}
                                   for i in range(partitions)]}]})
    buf = io.BytesIO()
    entity_writer(MetadataResponse)(buf, body)
    data = buf.getvalue()
    assert compiled_check(MetadataResponse)(data, 0, len(data)) == len(data)
    assert partitions * 8 > MAX_REQUEST_ELEMENTS and partitions * 8 < MAX_RESPONSE_ELEMENTS


def test_small_arrays_add_up_to_the_budget():
    from kio.schema.list_offsets.v7.request import ListOffsetsRequest

    from rillet.protocol.bounds import MAX_REQUEST_ELEMENTS
    per_topic = 250
    topics = MAX_REQUEST_ELEMENTS // (per_topic + 1) + 1  # each array well under the budget
    body = build(ListOffsetsRequest, {
        "replica_id": -1, "isolation_level": 0,
        "topics": [{"name": f"t{t}", "partitions": [
            {"partition_index": p, "current_leader_epoch": -1, "timestamp": -1}
            for p in range(per_topic)]} for t in range(topics)]})
    buf = io.BytesIO()
    entity_writer(ListOffsetsRequest)(buf, body)
    data = buf.getvalue()
    assert _outcome(compiled_check(ListOffsetsRequest), data) == "malformed"
