"""What a coordinator uses of the Broker, backed by real storage (unit tests of the group
and transaction coordinators): a real metadata image in which node 1 leads every partition
alone, a real LogManager and the real replica manager, so what is appended is exactly what
a restart replays."""
from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from rillet.defs.broker_config import BrokerConfig
from rillet.metadata import records as mrec
from rillet.metadata.image import MetadataImage, replay
from rillet.metadata.view import MetadataView
from rillet.replication.manager import ReplicaManager
from rillet.storage.log_config import LogConfig
from rillet.storage.manager import LogManager


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


class StandInBroker:
    """``topics``: name -> partitions; ``logged``: the topics whose logs exist from the start
    (the others get theirs when first written, as a broker creates them from metadata)."""

    def __init__(self, data: Path, topics: dict[str, int], logged: tuple[str, ...],
                 log_config: LogConfig, **config: str) -> None:
        self.node_id = 1
        self.config = BrokerConfig.load(None, {"log.dirs": str(data), "node.id": "1", **config})
        recs: list[dict[str, Any]] = [
            {"type": mrec.REGISTER_BROKER, "node_id": 1, "host": "127.0.0.1", "port": 9092,
             "rack": None}]
        for name, parts in topics.items():
            tid = str(uuid.uuid5(uuid.NAMESPACE_DNS, name))
            recs.append({"type": mrec.TOPIC, "name": name, "topic_id": tid})
            recs += [{"type": mrec.PARTITION, "topic_id": tid, "partition": p, "replicas": [1],
                      "isr": [1], "leader": 1, "leader_epoch": 0} for p in range(parts)]
        self.image: MetadataImage = replay(MetadataImage(cluster_id="c"), recs, 0)
        self.logs = LogManager([data])
        self.logs.load_logs(lambda t, p: log_config)
        for name in logged:
            for p in range(topics[name]):
                if self.logs.get(name, p) is None:
                    self.logs.create(name, p, log_config)
        # The real replica manager: this broker leads every partition, alone in the ISR.
        self.replication = ReplicaManager(self.node_id, lambda: self.config,
                                          MetadataView(lambda: self.image), self.logs, None)
        self.replication.adopt(self.image)
