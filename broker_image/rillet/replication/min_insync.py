"""min.insync.replicas per topic, as acks=all appends need it: looked up once per change
of the configs, not on every batch.

A topic's value is its override, else the broker's setting (topic_value). Both come from
immutable objects replaced whole on a change: the image's configs mapping (a new image
carries the old mapping over unless a step changed a config, as creating a topic with
overrides or deleting one with them does) and the BrokerConfig (on a dynamic config change).
So a value found under one (configs, BrokerConfig) pair holds until either is replaced; the
cache then starts again, empty. ISR and leader changes, which replace the image many times a
second under load, keep it. Its size is bounded by the topics produced to with acks=all.

Owned by the ReplicaManager; event loop only.
"""
from __future__ import annotations

from ..defs.broker_config import BrokerConfig
from ..defs.topic_defs import topic_value
from ..metadata.image import MetadataImage, PartitionInfo
from ..protocol import errors


class MinInsyncReplicas:
    def __init__(self) -> None:
        self._configs: object = None   # the image's configs mapping the cache was made under
        self._config: BrokerConfig | None = None
        self._by_topic: dict[str, int] = {}

    def of(self, image: MetadataImage, config: BrokerConfig, topic: str) -> int:
        """The topic's min.insync.replicas under `image` and `config`."""
        if image.configs is not self._configs or config is not self._config:
            self._configs, self._config, self._by_topic = image.configs, config, {}
        value = self._by_topic.get(topic)
        if value is None:
            # The typed value alone (topic_value), not effective()'s config source too,
            # which only DescribeConfigs asks for.
            value = self._by_topic[topic] = topic_value(
                config, image.topic_config(topic), "min.insync.replicas")
        return value

    def require(self, image: MetadataImage, config: BrokerConfig, part: PartitionInfo,
                topic: str, partition: int, after_append: bool = False) -> None:
        """acks=all needs |ISR| >= min.insync.replicas: NOT_ENOUGH_REPLICAS before the append,
        NOT_ENOUGH_REPLICAS_AFTER_APPEND once replicated (the ISR shrank meanwhile)."""
        min_isr = self.of(image, config, topic)
        if len(part.isr) < min_isr:
            cls = errors.NotEnoughReplicasAfterAppend if after_append else errors.NotEnoughReplicas
            raise cls(f"{topic}-{partition} has {len(part.isr)} in-sync replica(s), "
                      f"min.insync.replicas is {min_isr}")
