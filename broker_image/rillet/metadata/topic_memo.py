"""Values derived from one topic of the metadata image, kept while the topic is unchanged.

An image step keeps the TopicInfo object of every topic it does not touch (image.py's
ImageBuilder), and the PartitionInfo of every partition it does not touch: identity says
what changed, at no cost. A value derived from a topic (the Metadata API keeps a topic's
encoded answer entry here) is computed once per topic object and variant (what else it
depends on: a version, the set of live brokers) and reused by every later request on any
image that still holds that object. When the topic changed, the value derived from its
previous object is handed to ``derive``, which may reuse what it derived from the partitions
that did not change: a step that moves one ISR re-derives one partition, not the topic.

Owned by the node's MetadataView (one per node), which forgets deleted topics as their
deltas are published. Event loop only; values must be immutable, as any number of requests
share them.
"""
from __future__ import annotations

from typing import Any, Callable, Hashable, Iterable, TypeVar

from .image import TopicInfo

V = TypeVar("V")
# A topic's value for one variant: derive(topic, what was derived for the variant from the
# topic's previous object, or None).
Derive = Callable[[TopicInfo, "V | None"], V]
# The variants one topic object keeps (versions asked x live broker sets seen); past it they
# are dropped and derived again when asked, so fencing churn cannot grow an entry forever.
MAX_VARIANTS = 16


class _Entry:
    __slots__ = ("topic", "values", "previous")

    def __init__(self, topic: TopicInfo, previous: dict[Hashable, Any]) -> None:
        self.topic = topic
        self.values: dict[Hashable, Any] = {}
        self.previous = previous   # the values of the topic's previous object


class TopicMemo:
    def __init__(self) -> None:
        self._entries: dict[str, _Entry] = {}

    def get(self, topic: TopicInfo, variant: Hashable, derive: Derive[V]) -> V:
        """The value of ``topic`` (an image's TopicInfo) for ``variant``: kept, or derived."""
        entry = self._entries.get(topic.name)
        if entry is None or entry.topic is not topic:
            # A new object for the name: changed (or created again, or an older image's:
            # a request still on the image before this one).
            previous = {} if entry is None else entry.values or entry.previous
            entry = self._entries[topic.name] = _Entry(topic, previous)
        value = entry.values.get(variant)
        if value is None:
            value = derive(topic, entry.previous.get(variant))
            if len(entry.values) >= MAX_VARIANTS:
                entry.values.clear()
            entry.values[variant] = value
        return value

    def forget(self, names: Iterable[str]) -> None:
        """Drop what was derived of topics that are gone."""
        for name in names:
            self._entries.pop(name, None)

    def __len__(self) -> int:
        return len(self._entries)
