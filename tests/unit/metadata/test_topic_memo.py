"""TopicMemo: a value derived once per topic object and variant, handed on when it changes."""
from __future__ import annotations

import uuid
from types import MappingProxyType
from typing import Any

from rillet.metadata.image import TopicInfo
from rillet.metadata.topic_memo import MAX_VARIANTS, TopicMemo


def _topic(name: str = "t") -> TopicInfo:
    return TopicInfo(name, uuid.uuid4(), MappingProxyType({}))


class Deriver:
    def __init__(self) -> None:
        self.calls: list[tuple[TopicInfo, Any]] = []

    def __call__(self, topic: TopicInfo, previous: Any) -> Any:
        self.calls.append((topic, previous))
        return topic, len(self.calls)


def test_a_topic_object_is_derived_once_per_variant() -> None:
    memo, derive, topic = TopicMemo(), Deriver(), _topic()
    first = memo.get(topic, "v1", derive)
    assert memo.get(topic, "v1", derive) is first
    other = memo.get(topic, "v2", derive)
    assert other != first and memo.get(topic, "v2", derive) is other
    assert [previous for _, previous in derive.calls] == [None, None]


def test_a_changed_topic_is_derived_again_from_what_its_previous_object_gave() -> None:
    memo, derive = TopicMemo(), Deriver()
    old, new = _topic(), _topic()
    kept = memo.get(old, "v1", derive)
    memo.get(old, "v2", derive)
    fresh = memo.get(new, "v1", derive)
    assert fresh != kept and derive.calls[-1] == (new, kept)
    memo.get(new, "v3", derive)
    assert derive.calls[-1] == (new, None)   # nothing derived for v3 before
    assert memo.get(new, "v1", derive) is fresh


def test_an_older_image_s_object_is_answered_for_itself() -> None:
    """A request still on the image before the change gets its own topic's value."""
    memo, derive = TopicMemo(), Deriver()
    old, new = _topic(), _topic()
    assert memo.get(new, "v", derive)[0] is new
    assert memo.get(old, "v", derive)[0] is old
    assert memo.get(new, "v", derive)[0] is new


def test_forgotten_topics_are_dropped() -> None:
    memo, derive = TopicMemo(), Deriver()
    a, b = _topic("a"), _topic("b")
    memo.get(a, "v", derive)
    memo.get(b, "v", derive)
    memo.forget(["a", "zzz"])
    assert len(memo) == 1
    memo.get(a, "v", derive)
    assert derive.calls[-1] == (a, None)


def test_variants_of_one_object_are_bounded() -> None:
    """Live broker sets come and go (fencing): an unchanged topic does not keep them all."""
    memo, derive, topic = TopicMemo(), Deriver(), _topic()
    for n in range(3 * MAX_VARIANTS):
        memo.get(topic, n, derive)
    entry = memo._entries["t"]
    assert len(entry.values) <= MAX_VARIANTS
