"""The broker's Prometheus metrics (served by admin_http.py on GET /metrics).

Two kinds, kept apart so the request path stays cheap:
- counted as things happen: requests per API and version (one counter inc) and their
  latency per API (one histogram observe), produce/fetch bytes (a plain int add), ISR
  shrinks and expands (from committed metadata changes);
- computed when scraped, by walking what the broker already holds (the metadata image,
  the logs, the group coordinator): under-replicated partitions, leader and partition
  counts, log sizes, consumer lag, the broker state. Nothing is kept hot for them.

Names follow Kafka's MBeans with a rillet_ prefix, snake case, Prometheus suffixes:
  rillet_server_requests_total{api,version}          counter, client (broker) listener
  rillet_server_request_duration_seconds{api}        histogram, client listener
  rillet_controller_requests_total{api,version}      counter, CONTROLLER listener
  rillet_controller_request_duration_seconds{api}    histogram, CONTROLLER listener
  rillet_server_bytes_in_total                       produce bytes appended (as leader)
  rillet_server_bytes_out_total                      fetch bytes sent to consumers
  rillet_server_replication_bytes_out_total          fetch bytes sent to follower replicas
  rillet_replica_isr_shrinks_total / _expands_total  committed ISR changes this broker led
  rillet_replica_alter_partition_requests_total      AlterPartition requests this broker sent
  rillet_replica_alter_partition_changes_total       partition ISR changes they carried
  rillet_replica_fetch_requests_total                follower Fetch requests served as leader
  rillet_replica_fetch_request_partitions_total      partitions they named (sessions: changed)
  rillet_replica_fetch_sessions_opened_total         follower fetch sessions opened (full fetch)
  rillet_replica_under_replicated_partitions         led here, |ISR| < |replicas|
  rillet_replica_leader_count                        partitions led here
  rillet_replica_partition_count                     partitions with a replica here
  rillet_log_size_bytes{topic,partition}             bytes of this broker's log
  rillet_log_end_offset{topic,partition}             next offset of this broker's log
  rillet_log_offline_log_dirs                        log dirs taken offline by an I/O error
      (Kafka's LogManager OfflineLogDirectoryCount)
  rillet_group_consumer_lag{group,topic,partition}   high watermark - committed offset,
      for groups this broker coordinates and partitions whose log is on this broker
  rillet_broker_state{state}                         1 for the current state (readiness.py)
  rillet_controller_heartbeat_gap_max_seconds{broker}  active controller only: longest time
      between two heartbeats (or registrations) of a broker since it became active

Owned by the broker; everything runs on its event loop (the scrape too: the walk reads
event-loop state, so it must not run in another thread).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Mapping, Protocol

import prometheus_client
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from .apis.registry import ApiSpec
from .controller.controller import Controller
from .coordinator.records import group_partition
from .lifecycle import BrokerLifecycle
from .metadata.delta import MetadataDelta
from .metadata.image import MetadataImage
from .readiness import BROKER_STATES, NOT_STARTED, broker_state
from .replication.manager import ReplicaManager
from .storage.manager import LogManager

if TYPE_CHECKING:   # a type only: the Broker loads it on first use (on_demand.py)
    from .coordinator.manager import GroupCoordinator

# Seconds; from sub-millisecond produce to Fetch long polls (fetch.max.wait.ms 500) and
# slow acks=all waits.
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
                   2.5, 5.0, 10.0, 30.0)

def api_label(module_name: str) -> str:
    """Kafka's request name from an API module's name: list_offsets -> ListOffsets."""
    return "".join(part.capitalize() for part in module_name.split("_"))


def isr_change(old: Iterable[int], new: Iterable[int]) -> tuple[bool, bool]:
    """(shrunk, expanded): did the ISR lose a member, gain one (both when swapped)?"""
    before, after = set(old), set(new)
    return bool(before - after), bool(after - before)


@dataclass(frozen=True)
class PartitionCounts:
    leaders: int = 0
    partitions: int = 0
    under_replicated: int = 0


def partition_counts(image: MetadataImage, node_id: int) -> PartitionCounts:
    """Kafka's LeaderCount, PartitionCount and UnderReplicatedPartitions for one broker."""
    leaders = partitions = under = 0
    for topic in image.topics.values():
        for part in topic.partitions.values():
            if node_id in part.replicas:
                partitions += 1
            if part.leader == node_id:
                leaders += 1
                if len(part.isr) < len(part.replicas):
                    under += 1
    return PartitionCounts(leaders, partitions, under)


TopicPartition = tuple[str, int]


def consumer_lags(committed: Mapping[str, Mapping[TopicPartition, int]],
                  end_offsets: Mapping[TopicPartition, int]
                  ) -> Iterator[tuple[str, str, int, int]]:
    """(group, topic, partition, lag) per committed offset whose end offset is known.

    The end is the high watermark (what a consumer can read); a commit past it (our
    copy of a follower's high watermark is behind) counts as no lag, never negative."""
    for group, offsets in committed.items():
        for (topic, partition), offset in offsets.items():
            end = end_offsets.get((topic, partition))
            if end is not None and offset >= 0:
                yield group, topic, partition, max(0, end - offset)


class MetricsSource(Protocol):
    """What the metrics read of their broker (the Broker, structurally): at scrape time,
    and the lifecycle to tell catch-up from changes made now."""
    node_id: int
    lifecycle: BrokerLifecycle | None    # None while catching up
    controller: Controller | None        # None before the quorum starts
    replication: ReplicaManager
    logs: LogManager
    # None until something needs groups (on_demand.py): then no group has lag to show.
    loaded_coordinator: GroupCoordinator | None

    @property
    def image(self) -> MetadataImage: ...


class BrokerMetrics:
    """The registry of one broker and the counters its request path feeds."""

    def __init__(self, broker: MetricsSource) -> None:
        self.broker = broker
        # The *_created series are noise for a long-running broker (and double the lines).
        prometheus_client.disable_created_metrics()
        self.registry = CollectorRegistry()
        self._families = {
            listener: (
                Counter(f"rillet_{prefix}_requests", f"Requests received on the {listener} "
                        "listener, by API and version", ["api", "version"],
                        registry=self.registry),
                Histogram(f"rillet_{prefix}_request_duration_seconds",
                          f"Time from a request's arrival to its response, {listener} "
                          "listener, by API (long polls included)", ["api"],
                          buckets=LATENCY_BUCKETS, registry=self.registry))
            for listener, prefix in (("broker", "server"), ("controller", "controller"))}
        self._children: dict[tuple[str, int, int], tuple[Any, Any]] = {}
        self._auth_failures = Counter(
            "rillet_failed_authentications", "SASL authentications refused, by listener",
            ["listener"], registry=self.registry)
        self._denials = Counter(
            "rillet_authorization_denials", "Operations refused by the ACL authorizer, "
            "by resource type and operation", ["resource_type", "operation"],
            registry=self.registry)
        self.bytes_in = 0
        self.bytes_out = 0
        self.replication_bytes_out = 0
        self.isr_shrinks = 0
        self.isr_expands = 0
        self.registry.register(_ScrapeCollector(broker, self))

    # -- the request path: keep it to a dict lookup, one inc, one observe -----------------

    def request_done(self, listener: str, spec: "ApiSpec", version: int,
                     seconds: float) -> None:
        children = self._children.get((listener, spec.key, version))
        if children is None:
            children = self._children_for(listener, spec, version)
        children[0].inc()
        children[1].observe(seconds)

    def _children_for(self, listener: str, spec: "ApiSpec", version: int) -> tuple[Any, Any]:
        counter, histogram = self._families.get(listener, self._families["broker"])
        name = api_label(spec.name)
        children = (counter.labels(api=name, version=str(version)), histogram.labels(api=name))
        self._children[(listener, spec.key, version)] = children
        return children

    def authentication_failed(self, listener_name: str) -> None:
        self._auth_failures.labels(listener=listener_name).inc()

    def authorization_denied(self, resource_type: str, operation: str) -> None:
        self._denials.labels(resource_type=resource_type, operation=operation).inc()

    def fetch_sent(self, size: int, follower: bool) -> None:
        if follower:
            self.replication_bytes_out += size
        else:
            self.bytes_out += size

    # -- committed metadata changes ---------------------------------------------------------

    def on_metadata_update(self, delta: MetadataDelta, image: MetadataImage) -> None:
        """Count ISR shrinks/expands of partitions this broker leads (before and after)."""
        if self.broker.lifecycle is None:
            return  # replaying history while catching up: not changes made now
        node = self.broker.node_id
        # The delta holds only changed partitions of live topics; `old` None: a new one.
        for change in delta.partitions.values():
            prev, part = change.old, change.new
            if prev is None or part.leader != node or prev.leader != node:
                continue
            shrunk, expanded = isr_change(prev.isr, part.isr)
            self.isr_shrinks += shrunk
            self.isr_expands += expanded

    def exposition(self) -> bytes:
        """The Prometheus text of everything; call on the event loop."""
        return prometheus_client.generate_latest(self.registry)


class _ScrapeCollector(Collector):
    """Everything computed at scrape time, from what the broker holds right now."""

    def __init__(self, broker: MetricsSource, metrics: BrokerMetrics) -> None:
        self.broker = broker
        self.metrics = metrics

    def collect(self) -> Iterable[Any]:
        m = self.metrics
        yield _counter("rillet_server_bytes_in", "Produce bytes appended as leader",
                       m.bytes_in)
        yield _counter("rillet_server_bytes_out", "Fetch bytes sent to consumers", m.bytes_out)
        yield _counter("rillet_server_replication_bytes_out",
                       "Fetch bytes sent to follower replicas", m.replication_bytes_out)
        yield _counter("rillet_replica_isr_shrinks",
                       "Committed ISR shrinks of partitions this broker leads", m.isr_shrinks)
        yield _counter("rillet_replica_isr_expands",
                       "Committed ISR expansions of partitions this broker leads",
                       m.isr_expands)
        yield self._state()
        broker = self.broker
        if broker.controller is None:
            return  # storage and quorum not started yet: nothing to walk
        yield _gauge("rillet_log_offline_log_dirs", "Log dirs taken offline by a failed "
                     "write or fsync", len(broker.logs.failures.offline))
        sender = broker.replication.alter_partitions
        yield _counter("rillet_replica_alter_partition_requests",
                       "AlterPartition requests sent (or made locally on the controller)",
                       sender.requests_sent)
        yield _counter("rillet_replica_alter_partition_changes",
                       "Partition ISR changes carried by those requests", sender.changes_sent)
        counts = partition_counts(broker.image, broker.node_id)
        yield _gauge("rillet_replica_under_replicated_partitions",
                     "Partitions led by this broker whose ISR is smaller than the replica set",
                     counts.under_replicated)
        yield _gauge("rillet_replica_leader_count", "Partitions led by this broker",
                     counts.leaders)
        yield _gauge("rillet_replica_partition_count", "Partitions with a replica on this "
                     "broker", counts.partitions)
        sessions = broker.replication.fetch_sessions
        yield _counter("rillet_replica_fetch_requests", "Follower Fetch requests served as "
                       "leader", sessions.requests)
        yield _counter("rillet_replica_fetch_request_partitions", "Partitions those requests "
                       "named (an incremental fetch names only the changed ones)",
                       sessions.partitions_named)
        yield _counter("rillet_replica_fetch_sessions_opened", "Follower fetch sessions "
                       "opened by a full fetch", sessions.opened)
        yield self._heartbeat_gaps(broker.controller)
        yield from self._logs()
        yield self._lags()
        yield from self._consumer_fetches()

    def _consumer_fetches(self) -> Iterator[CounterMetricFamily]:
        """Consumer fetches answered here as leader or as follower (KIP-392 follower fetching)."""
        served = self.broker.replication.consumer_fetches
        fetches = CounterMetricFamily("rillet_server_consumer_fetches", "Consumer fetch "
                                      "answers by this broker's role", labels=["role"])
        sent = CounterMetricFamily("rillet_server_consumer_fetch_bytes", "Record bytes sent "
                                   "to consumers by this broker's role", labels=["role"])
        for role in sorted(served.fetches):
            fetches.add_metric([role], served.fetches[role])
            sent.add_metric([role], served.bytes[role])
        yield fetches
        yield sent
        yield _counter("rillet_server_preferred_read_replica_redirects", "Consumer fetches "
                       "answered with a preferred read replica in the consumer's rack",
                       served.redirected)

    @staticmethod
    def _heartbeat_gaps(controller: Controller) -> GaugeMetricFamily:
        family = GaugeMetricFamily("rillet_controller_heartbeat_gap_max_seconds", "Longest "
                                   "time between two heartbeats of a broker at this active "
                                   "controller", labels=["broker"])
        for node_id, gap in sorted(controller.heartbeat_gaps().items()):
            family.add_metric([str(node_id)], gap)
        return family

    def _state(self) -> GaugeMetricFamily:
        lifecycle = self.broker.lifecycle
        current = broker_state(lifecycle.view() if lifecycle is not None else NOT_STARTED)
        family = GaugeMetricFamily("rillet_broker_state", "1 for this broker's state as the "
                                   "controller last told it", labels=["state"])
        for state in BROKER_STATES:
            family.add_metric([state], 1 if state == current else 0)
        return family

    def _logs(self) -> Iterator[GaugeMetricFamily]:
        size = GaugeMetricFamily("rillet_log_size_bytes", "Bytes of a partition's log on "
                                 "this broker", labels=["topic", "partition"])
        end = GaugeMetricFamily("rillet_log_end_offset", "Next offset of a partition's log "
                                "on this broker", labels=["topic", "partition"])
        for (topic, p), plog in sorted(self.broker.logs.logs().items()):
            labels = [topic, str(p)]
            size.add_metric(labels, plog.size_bytes)
            end.add_metric(labels, plog.log_end_offset)
        yield size
        yield end

    def _lags(self) -> GaugeMetricFamily:
        family = GaugeMetricFamily("rillet_group_consumer_lag", "High watermark minus the "
                                   "committed offset, for groups this broker coordinates",
                                   labels=["group", "topic", "partition"])
        coordinator = self.broker.loaded_coordinator
        if coordinator is None:
            return family
        n = coordinator.num_partitions()
        committed = {gid: {tp: o.offset for tp, o in group.offsets.items()}
                     for gid, group in coordinator.groups.items()
                     if group_partition(gid, n) in coordinator.loaded}
        logs = self.broker.logs
        ends = {tp: plog.high_watermark for offsets in committed.values() for tp in offsets
                if (plog := logs.get(*tp)) is not None}
        for group, topic, p, lag in sorted(consumer_lags(committed, ends)):
            family.add_metric([group, topic, str(p)], lag)
        return family


def _counter(name: str, doc: str, value: int) -> CounterMetricFamily:
    return CounterMetricFamily(name, doc, value=value)


def _gauge(name: str, doc: str, value: int) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, value=value)

