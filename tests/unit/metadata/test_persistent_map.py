"""PersistentMap: behaves as a dict changed the same way, and shares what a change leaves."""
from __future__ import annotations

import random

from rillet.metadata.persistent_map import CHUNK, PersistentMap


def test_random_changes_match_a_dict_in_content_and_order() -> None:
    rng = random.Random(7)
    expected: dict[str, int] = {}
    current = PersistentMap()
    for step in range(400):
        removed = rng.sample(sorted(expected), min(len(expected), rng.randrange(4)))
        changes = {f"k{rng.randrange(600)}": step for _ in range(rng.randrange(6))}
        before = list(current.items())
        nxt = current.evolve(changes, removed + ["absent"])
        for key in removed:
            del expected[key]
        expected.update(changes)
        assert list(current.items()) == before     # the old map never moves
        current = nxt
        assert list(current) == list(expected) and len(current) == len(expected)
        assert list(current.values()) == list(expected.values())
        assert list(reversed(current.items())) == list(reversed(expected.items()))
        assert list(reversed(current)) == list(reversed(expected))
    for key in expected:
        assert current[key] == expected[key] and key in current
    assert current.get("nope") is None and "nope" not in current and [] not in current
    assert current == expected


def test_a_change_copies_only_the_chunk_it_touches() -> None:
    base = PersistentMap({i: str(i) for i in range(10 * CHUNK)})
    changed = base.evolve({3: "three"}, [])
    shared = sum(a is b for a, b in zip(base._chunks, changed._chunks))
    assert shared == len(base._chunks) - 1 and changed[3] == "three" and base[3] == "3"


def test_removed_then_added_goes_last_and_many_removals_pack() -> None:
    m = PersistentMap({"a": 1, "b": 2, "c": 3})
    assert list(m.evolve({"a": 9}, ["a"])) == ["b", "c", "a"]
    assert list(m.evolve({"a": 9}, [])) == ["a", "b", "c"]
    big = PersistentMap({i: i for i in range(20 * CHUNK)})
    small = big.evolve({}, range(20 * CHUNK - 5))
    assert list(small) == list(range(20 * CHUNK - 5, 20 * CHUNK))
    assert len(small._chunks) <= 2
