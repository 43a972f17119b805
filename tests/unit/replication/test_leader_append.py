"""ReplicaManager.append_as_leader on real logs: acks=all on a partition whose ISR is the
leader alone is done on the append path (the high watermark passes the batches inside the
append, no waiter parks), one log-moved notification per append, min.insync.replicas
checked per topic under the current image and config, and an ISR with a follower still
holds acks=all until the follower has fetched the batches."""
from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest

from rillet.defs.broker_config import BrokerConfig
from rillet.metadata import records as mrec
from rillet.metadata.image import TOPIC_RESOURCE, MetadataImage, replay
from rillet.metadata.view import MetadataView
from rillet.protocol import errors
from rillet.records import parse_batches
from rillet.replication.manager import ReplicaManager
from rillet.storage.log_config import LogConfig
from rillet.storage.manager import LogManager

from ..storage.helpers import make_batch

TOPIC = "t"
TP = (TOPIC, 0)


def _records(isr: list[int]) -> list[dict[str, Any]]:
    tid = str(uuid.uuid5(uuid.NAMESPACE_DNS, TOPIC))
    return [*({"type": mrec.REGISTER_BROKER, "node_id": n, "host": "127.0.0.1",
               "port": 9092 + n, "rack": None} for n in isr),
            {"type": mrec.TOPIC, "name": TOPIC, "topic_id": tid},
            {"type": mrec.PARTITION, "topic_id": tid, "partition": 0, "replicas": isr,
             "isr": isr, "leader": 1, "leader_epoch": 0}]


def _min_isr(value: str | None) -> dict[str, Any]:
    return {"type": mrec.CONFIG, "resource_type": TOPIC_RESOURCE, "name": TOPIC,
            "key": "min.insync.replicas", "value": value}


class Leader:
    """Node 1 leading `t-0` with the given ISR: a real image, LogManager and ReplicaManager."""

    def __init__(self, data: Path, isr: list[int], **config: str) -> None:
        self.config = BrokerConfig.load(None, {"log.dirs": str(data), "node.id": "1", **config})
        self.image: MetadataImage = replay(MetadataImage(cluster_id="c"), _records(isr), 0)
        self.logs = LogManager([data])
        self.logs.load_logs(lambda t, p: LogConfig())
        self.logs.create(TOPIC, 0, LogConfig())
        self.moved: list[tuple[str, int]] = []
        self.logs.on_moved(self.moved.append)
        self.replication = ReplicaManager(1, lambda: self.config,
                                          MetadataView(lambda: self.image), self.logs, None)
        self.replication.adopt(self.image)
        self.moved.clear()

    def apply(self, *recs: dict[str, Any]) -> None:
        self.image = replay(self.image, list(recs), 0)

    def append(self, records: int = 3, acks: int = -1) -> int:
        """Append one batch; the log end offset after it."""
        data = bytearray(make_batch(records))
        _, plog = self.replication.append_as_leader(TOPIC, 0, data, parse_batches(data), acks)
        return plog.log_end_offset

    @property
    def high_watermark(self) -> int:
        plog = self.logs.get(*TP)
        assert plog is not None
        return plog.high_watermark

    def close(self) -> None:
        asyncio.run(self.logs.close())


def test_acks_all_with_the_leader_alone_in_the_isr_is_done_inside_the_append(
        tmp_path: Path) -> None:
    leader = Leader(tmp_path, [1])
    end = leader.append(acks=-1)
    # produce.py answers acks=all at once when the high watermark passed the batches.
    assert end == 3 and leader.high_watermark == end

    async def wait() -> None:
        # Parking here would need a later high watermark move that never comes: a waiter
        # would time out after 0 s and raise REQUEST_TIMED_OUT.
        await leader.replication.wait_for_high_watermark(TP, end, 0.0)

    asyncio.run(wait())
    leader.close()


def test_one_moved_notification_per_append_for_its_end_and_high_watermark(
        tmp_path: Path) -> None:
    leader = Leader(tmp_path, [1])
    for n in range(3):
        leader.append(acks=1 if n % 2 else -1)
    # Fetch sessions and the HW checkpoint look at the log once per append, after both moved.
    assert leader.moved == [TP, TP, TP]
    assert leader.high_watermark == 9
    leader.close()


def test_acks_all_with_a_follower_in_the_isr_waits_for_its_fetch(tmp_path: Path) -> None:
    leader = Leader(tmp_path, [1, 2])

    async def produce_and_replicate() -> None:
        end = leader.append(acks=-1)
        assert leader.high_watermark == 0   # the follower has nothing yet
        waiting = asyncio.ensure_future(
            leader.replication.wait_for_high_watermark(TP, end, 30.0))
        await asyncio.sleep(0)
        assert not waiting.done()
        leader.replication.on_follower_fetch(TP, 2, end - 1)
        await asyncio.sleep(0)
        assert not waiting.done() and leader.high_watermark == end - 1
        leader.replication.on_follower_fetch(TP, 2, end)
        await asyncio.wait_for(waiting, 5)
        assert leader.high_watermark == end

    asyncio.run(produce_and_replicate())
    leader.close()


def test_min_insync_replicas_follows_the_topic_config_of_the_current_image(
        tmp_path: Path) -> None:
    leader = Leader(tmp_path, [1])
    leader.append(acks=-1)
    leader.apply(_min_isr("2"))
    with pytest.raises(errors.NotEnoughReplicas):
        leader.append(acks=-1)
    assert leader.append(acks=1) == 6   # acks=1 does not ask for the ISR
    with pytest.raises(errors.NotEnoughReplicasAfterAppend):
        leader.replication.check_min_insync(TOPIC, 0, after_append=True)
    leader.apply(_min_isr(None))   # back to the broker's default, 1
    assert leader.append(acks=-1) == 9
    leader.close()


def test_min_insync_replicas_follows_a_new_broker_config(tmp_path: Path) -> None:
    leader = Leader(tmp_path, [1])
    leader.append(acks=-1)
    # A dynamic broker config replaces the BrokerConfig whole (broker.py).
    leader.config = BrokerConfig.load(None, {"log.dirs": str(tmp_path), "node.id": "1",
                                             "min.insync.replicas": "2"})
    with pytest.raises(errors.NotEnoughReplicas):
        leader.append(acks=-1)
    assert leader.logs.get(*TP).log_end_offset == 3   # nothing appended
    leader.close()


def test_min_insync_replicas_of_a_topic_recreated_under_its_name_is_the_new_ones(
        tmp_path: Path) -> None:
    """The cached value lives as long as the image's configs mapping: deleting a topic with an
    override and creating it again without one (or the reverse) replaces the mapping."""
    leader = Leader(tmp_path, [1])
    leader.apply(_min_isr("2"))
    with pytest.raises(errors.NotEnoughReplicas):
        leader.append(acks=-1)
    old_id = str(uuid.uuid5(uuid.NAMESPACE_DNS, TOPIC))
    new_id = str(uuid.uuid4())
    leader.apply({"type": mrec.REMOVE_TOPIC, "topic_id": old_id},
                 {"type": mrec.TOPIC, "name": TOPIC, "topic_id": new_id},
                 {"type": mrec.PARTITION, "topic_id": new_id, "partition": 0, "replicas": [1],
                  "isr": [1], "leader": 1, "leader_epoch": 0})
    assert leader.append(acks=-1) == 3   # the broker's default again: 1
    leader.apply(_min_isr("2"))
    with pytest.raises(errors.NotEnoughReplicas):
        leader.append(acks=-1)
    leader.close()


def test_a_leader_or_isr_change_keeps_the_configs_mapping(tmp_path: Path) -> None:
    """What lets the min.insync.replicas cache outlive ISR churn: a step that changes no
    config carries the configs mapping over as it is."""
    leader = Leader(tmp_path, [1, 2])
    leader.apply(_min_isr("2"))
    configs = leader.image.configs
    tid = str(uuid.uuid5(uuid.NAMESPACE_DNS, TOPIC))
    leader.apply({"type": mrec.PARTITION_CHANGE, "topic_id": tid, "partition": 0, "isr": [1]})
    assert leader.image.configs is configs
    with pytest.raises(errors.NotEnoughReplicas):   # and the new ISR is what is checked
        leader.append(acks=-1)
    leader.close()
