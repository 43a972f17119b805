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
