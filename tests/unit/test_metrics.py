"""Broker metrics: the pure gauges, ISR change counting, and the exposition text (read back
with prometheus-client's own parser)."""
from __future__ import annotations

import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from rillet.apis.registry import ApiSpec
from rillet.coordinator.records import group_partition
from rillet.metadata.delta import between
from rillet.metadata.image import MetadataImage, PartitionInfo, TopicInfo
from rillet.metrics import (BrokerMetrics, api_label, consumer_lags, isr_change,
                            partition_counts)
from rillet.replication.fetch_sessions import FetchSessionCache, PartitionFetch
from rillet.replication.read_replica import ConsumerFetchCounters
from rillet.storage.log_dir_failure import LogDirFailure, LogDirFailureChannel

TOPIC_ID = uuid.uuid4()


def _image(parts: dict[int, tuple[tuple[int, ...], tuple[int, ...], int]],
           name: str = "t") -> MetadataImage:
    """parts: partition -> (replicas, isr, leader)."""
    infos = {p: PartitionInfo(TOPIC_ID, p, r, i, leader, 0, 0) for p, (r, i, leader) in
             parts.items()}
    return MetadataImage("c", topics={name: TopicInfo(name, TOPIC_ID, infos)})


def _samples(metrics: BrokerMetrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(metrics.exposition().decode()):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_api_label_is_kafkas_request_name():
    assert api_label("produce") == "Produce"
    assert api_label("list_offsets") == "ListOffsets"
    assert api_label("offset_for_leader_epoch") == "OffsetForLeaderEpoch"


def test_isr_change():
    assert isr_change((1, 2, 3), (1, 2)) == (True, False)
    assert isr_change((1, 2), (2, 1, 3)) == (False, True)
    assert isr_change((1, 2), (1, 3)) == (True, True)
    assert isr_change((1, 2), (2, 1)) == (False, False)


def test_partition_counts():
    image = _image({0: ((1, 2, 3), (1, 2, 3), 1),   # led, full ISR
                    1: ((1, 2, 3), (1, 3), 1),      # led, under-replicated
                    2: ((2, 1, 3), (2, 3), 2),      # follower here; not ours to count
                    3: ((2, 3), (2, 3), 2)})        # no replica here
    counts = partition_counts(image, 1)
    assert (counts.leaders, counts.partitions, counts.under_replicated) == (2, 3, 1)
    assert partition_counts(image, 2).under_replicated == 1


def test_consumer_lags():
    committed = {"g": {("t", 0): 40, ("t", 1): 10, ("u", 0): 5}, "h": {("t", 0): 100}}
    ends = {("t", 0): 100, ("t", 1): 7}   # ("u", 0): not on this broker
    assert sorted(consumer_lags(committed, ends)) == [
        ("g", "t", 0, 60), ("g", "t", 1, 0), ("h", "t", 0, 0)]


def _broker(**kw: Any) -> Any:
    return SimpleNamespace(**{"node_id": 1, "lifecycle": object(), "controller": None, **kw})


def test_isr_changes_counted_for_partitions_led_here_only():
    broker = _broker()
    metrics = BrokerMetrics(broker)
    full = _image({0: ((1, 2, 3), (1, 2, 3), 1), 1: ((2, 1, 3), (2, 1, 3), 2)})
    shrunk = _image({0: ((1, 2, 3), (1, 2), 1), 1: ((2, 1, 3), (2, 3), 2)})
    metrics.on_metadata_update(between(full, shrunk, 1), shrunk)
    metrics.on_metadata_update(between(shrunk, full, 1), full)
    assert (metrics.isr_shrinks, metrics.isr_expands) == (1, 1)
    metrics.on_metadata_update(between(full, full, 1), full)  # nothing touched
    moved = _image({0: ((1, 2, 3), (2, 3), 2), 1: ((2, 1, 3), (2, 1, 3), 2)})
    metrics.on_metadata_update(between(full, moved, 1), moved)  # leadership left: not our shrink
    assert (metrics.isr_shrinks, metrics.isr_expands) == (1, 1)
    broker.lifecycle = None                          # replaying history before joining
    metrics.on_metadata_update(between(full, shrunk, 1), shrunk)
    assert metrics.isr_shrinks == 1


def test_exposition_before_start_has_requests_bytes_and_state():
    metrics = BrokerMetrics(_broker(lifecycle=None))
    produce = ApiSpec(0, "produce", 0, 11, handler=None, decodable_from=3)  # type: ignore
    for _ in range(3):
        metrics.request_done("broker", produce, 9, 0.002)
    metrics.request_done("controller", produce, 9, 0.002)
    metrics.bytes_in += 1234
    metrics.fetch_sent(100, follower=False)
    metrics.fetch_sent(7, follower=True)
    s = _samples(metrics)
    assert s[("rillet_server_requests_total", (("api", "Produce"), ("version", "9")))] == 3
    assert s[("rillet_controller_requests_total", (("api", "Produce"), ("version", "9")))] == 1
    assert s[("rillet_server_request_duration_seconds_count", (("api", "Produce"),))] == 3
    assert s[("rillet_server_request_duration_seconds_bucket",
              (("api", "Produce"), ("le", "0.0025")))] == 3
    assert s[("rillet_server_bytes_in_total", ())] == 1234
    assert s[("rillet_server_bytes_out_total", ())] == 100
    assert s[("rillet_server_replication_bytes_out_total", ())] == 7
    assert s[("rillet_broker_state", (("state", "starting"),))] == 1
    assert s[("rillet_broker_state", (("state", "unfenced"),))] == 0
    assert not any(name.endswith("_created") for name, _ in s)


def test_exposition_walks_partitions_logs_and_groups():
    image = _image({0: ((1, 2), (1,), 1), 1: ((1, 2), (1, 2), 2)})
    plogs = {("t", 0): SimpleNamespace(size_bytes=500, log_end_offset=10, high_watermark=9),
             ("t", 1): SimpleNamespace(size_bytes=70, log_end_offset=3, high_watermark=3)}
    failures = LogDirFailureChannel()
    failures.report(LogDirFailure(Path("/disk-2"), "EIO", (("u", 0),)))
    logs = SimpleNamespace(logs=lambda: plogs, get=lambda t, p: plogs.get((t, p)),
                           failures=failures)
    offsets = {("t", 0): SimpleNamespace(offset=4), ("t", 1): SimpleNamespace(offset=3),
               ("x", 0): SimpleNamespace(offset=1)}
    group = SimpleNamespace(offsets=offsets)
    coordinator = SimpleNamespace(num_partitions=lambda: 50, groups={"g": group, "other": group},
                                  loaded={group_partition("g", 50)})
    assert group_partition("other", 50) not in coordinator.loaded  # coordinated elsewhere
    served = ConsumerFetchCounters()
    served.count(("t", 0), "follower", 300, "zone-b")
    served.count(("t", 1), "leader", 20, "")
    controller = SimpleNamespace(heartbeat_gaps=lambda: {2: 2.5, 3: 7.25})
    sessions = FetchSessionCache()
    opened, _ = sessions.resolve(2, 0, 0, {("t", 0): PartitionFetch(0),
                                           ("t", 1): PartitionFetch(0)}, [])
    assert opened is not None
    sessions.resolve(2, opened.id, 1, {("t", 1): PartitionFetch(4)}, [])
    broker = _broker(controller=controller, image=image, logs=logs,
                     loaded_coordinator=coordinator,
                     lifecycle=None, replication=SimpleNamespace(
                         consumer_fetches=served, fetch_sessions=sessions,
                         alter_partitions=SimpleNamespace(requests_sent=2, changes_sent=300)))
    s = _samples(BrokerMetrics(broker))
    assert s[("rillet_replica_alter_partition_requests_total", ())] == 2
    assert s[("rillet_replica_alter_partition_changes_total", ())] == 300
    assert s[("rillet_replica_fetch_requests_total", ())] == 2
    assert s[("rillet_replica_fetch_request_partitions_total", ())] == 3
    assert s[("rillet_replica_fetch_sessions_opened_total", ())] == 1
    assert s[("rillet_server_consumer_fetch_bytes_total", (("role", "follower"),))] == 300
    assert s[("rillet_server_consumer_fetches_total", (("role", "leader"),))] == 1
    assert s[("rillet_replica_under_replicated_partitions", ())] == 1
    assert s[("rillet_replica_leader_count", ())] == 1
    assert s[("rillet_replica_partition_count", ())] == 2
    assert s[("rillet_log_size_bytes", (("partition", "0"), ("topic", "t")))] == 500
    assert s[("rillet_controller_heartbeat_gap_max_seconds", (("broker", "3"),))] == 7.25
    assert s[("rillet_log_end_offset", (("partition", "1"), ("topic", "t")))] == 3
    assert s[("rillet_log_offline_log_dirs", ())] == 1
    lag = {k[1]: v for k, v in s.items() if k[0] == "rillet_group_consumer_lag"}
    assert lag == {(("group", "g"), ("partition", "0"), ("topic", "t")): 5,
                   (("group", "g"), ("partition", "1"), ("topic", "t")): 0}
    # A node whose group coordinator nothing needed yet (on_demand.py) has no lag to show,
    # and a scrape does not load it.
    broker.loaded_coordinator = None
    s = _samples(BrokerMetrics(broker))
    assert not any(k[0] == "rillet_group_consumer_lag" for k in s)
    assert s[("rillet_log_end_offset", (("partition", "1"), ("topic", "t")))] == 3
