"""The broker: wires config, storage, the metadata quorum, the controller, the replica
manager, the group and transaction coordinators and the authorizer, and starts and stops
them in order.

API handlers reach a partition they lead through the replica manager
(replication/manager.py: leadership checks, appends, both waiting queues).
"""
from __future__ import annotations

import asyncio
import logging
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Mapping

from .defs.broker_config import BrokerConfig, Voter
from .dir_assignments import DirAssignmentQueue
from .forwarding import ControllerForwarder
from .quotas.manager import ClientQuotaManager
from .replication.log_creator import LogCreator
from .replication.manager import ReplicaManager
from .lifecycle import BrokerLifecycle
from .no_metrics import MetricsSink, NoMetrics
from .raft.roles import RaftTiming
from .raft.node import RaftNode
from .raft.quorum_state import QuorumStateFile
from .controller.auto_balance import run_leader_rebalance
from .controller.channel import ControllerChannel
from .controller.controller import Controller
from .dynamic_config import dynamic_layers, effective_config
from .metadata.delta import LocalChanges, MetadataDelta, from_empty
from .metadata.directories import UNASSIGNED
from .metadata.image import TOPIC_RESOURCE, MetadataImage
from .metadata.log import METADATA_TOPIC, MetadataLog
from .metadata.snapshot import SnapshotStore
from .metadata.snapshotter import Snapshotter
from .metadata.view import MetadataView
from .on_demand import (broker_metrics, group_coordinator, outbound_tls,
                        transaction_coordinator)
from .protocol import errors
from .security.authorizer import Authorizer
from .security.scram_credential import ScramCredential
from .storage.cleaner import LogCleaner
from .storage.log_config import LogConfig
from .storage.log_dir_failure import halt_when_all_offline
from .storage.manager import LogManager
from .storage_format import DirLocks, ensure_formatted
from .topic_config import log_config
from .txn_marker import TxnMarker

if TYPE_CHECKING:   # types only: on_demand.py imports them when first used
    from .coordinator.manager import GroupCoordinator
    from .txn.coordinator import TransactionCoordinator

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
FENCE_CHECK_S = 0.5


class Broker:
    def __init__(self, config: BrokerConfig) -> None:
        # `config` is replaced whole when dynamic broker configs change (_apply_dynamic_config).
        self.static_config = config
        self.config = config
        self._dynamic_layers: tuple[Mapping[str, str], Mapping[str, str]] = ({}, {})
        self.node_id = config.node_id
        self.cluster_id = ""
        self.logs = LogManager(config.log_dirs)
        self.controller: Controller | None = None
        self.raft: RaftNode | None = None
        self.lifecycle: BrokerLifecycle | None = None
        self.outbound_tls = outbound_tls(config)
        self.metadata = MetadataView(lambda: self.image)
        # Reads the parts below at scrape time only, so it may come first.
        self.metrics = self._metrics(config)
        self.authorizer = Authorizer.from_config(self.metadata, config, self.metrics)
        # The path to the active controller and the relay on it: once the quorum runs.
        self.channel: ControllerChannel | None = None
        self.forwarder: ControllerForwarder | None = None
        self.replication = ReplicaManager(self.node_id, lambda: self.config, self.metadata,
                                          self.logs, self.outbound_tls.brokers)
        # A failed log dir: the roles go first, then the controller hears (lifecycle).
        self.logs.failures.subscribe(self.replication.on_log_dir_failure)
        self.logs.failures.subscribe(halt_when_all_offline(self.logs.log_dirs,
                                                           self.logs.failures))
        # Which log dir holds each replica, for the controller (lifecycle.py sends them).
        self.dir_assignments = DirAssignmentQueue()
        self.log_creator = LogCreator(self.logs, self.log_config_for, self._hosts_replica,
                                      self.replication.take_up, self._assigned_dir,
                                      self.dir_assignments.put)
        self.snapshotter: Snapshotter | None = None
        self.snapshots: SnapshotStore | None = None
        self._dir_locks: DirLocks | None = None
        # Built on first use or once their internal topic exists (on_demand.py says why).
        self._groups = group_coordinator(self)
        self.quotas = ClientQuotaManager(lambda: self.config)
        self._txns = transaction_coordinator(self, self._txn_markers_written,
                                             self.outbound_tls.brokers)
        self.cleaner = LogCleaner(self.logs, config,
                                  lambda name: dict(self.image.topic_config(name)))
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    def _metrics(self, config: BrokerConfig) -> MetricsSink:
        """Prometheus metrics when the admin HTTP endpoint can serve them, else counters
        that count nothing (no_metrics.py says why)."""
        if config.admin_http_address is None:
            return NoMetrics()
        return broker_metrics(self)   # loads prometheus_client

    # -- lifecycle ---------------------------------------------------------------

    async def start(self) -> None:
        """Storage, the quorum, catch-up and registration; the caller opens listeners.

        `start_quorum` first (the controller listener must answer before a quorum can
        form), then `join_cluster` (which waits for it).
        """
        await self.start_quorum()
        await self.join_cluster()

    async def start_quorum(self) -> None:
        metadata_root = self.metadata_dir()
        # Before anything is written: a second broker on these dirs would corrupt them.
        # A log dir that fails here is offline from the start; the metadata dir must work.
        self._dir_locks = DirLocks.acquire([*self.config.log_dirs, metadata_root],
                                           may_fail=self.config.log_dirs)
        formatted = ensure_formatted(self.config.log_dirs, self.node_id,
                                     self.config["cluster.id"],
                                     require_id=len(self.config.quorum_voters) > 1,
                                     failed=self._dir_locks.failed)
        self.cluster_id = formatted.cluster_id
        metadata_log = MetadataLog.open(metadata_root)
        self.controller = Controller(self.cluster_id, self.node_id, self.config)
        self.snapshots = SnapshotStore(metadata_root / "snapshots")
        snapshotter = self.snapshotter = Snapshotter(
            self.snapshots, metadata_log, self.controller, self.cluster_id,
            self.config["metadata.log.max.record.bytes.between.snapshots"])
        snapshotter.restore()
        self.raft = RaftNode(self.node_id, self._voters(), self.cluster_id, metadata_log,
                             METADATA_TOPIC, QuorumStateFile(metadata_root), self._raft_timing(),
                             on_commit=snapshotter.on_commit,
                             load_snapshot=snapshotter.fetch_from,
                             ssl_context=self.outbound_tls.controller)
        snapshotter.raft = self.raft
        self.controller.attach(self.raft)
        self.channel = ControllerChannel(
            self.node_id, self.cluster_id, self.raft, self.controller, self.metadata,
            self.outbound_tls.controller,
            self.config["controller.quorum.request.timeout.ms"] / 1000)
        self.forwarder = ControllerForwarder(self.node_id, self.channel,
                                             envelope=self.authorizer is not None)
        self.replication.attach(self.channel)
        self.logs.load_logs(self.log_config_for, formatted.directory_ids, formatted.failed)
        # In this order: logs and configs first, then the roles and counters that use them.
        self.log_creator.start()
        self.controller.on_change(self._on_metadata_update)
        self.controller.on_change(self.replication.on_metadata_update)
        self.controller.on_change(self.metrics.on_metadata_update)
        # Last: whoever waits for the image to show something finds it applied everywhere.
        self.controller.on_change(self.metadata.on_metadata_update)
        await self.raft.start()

    async def join_cluster(self) -> None:
        """Catch up with the committed metadata, register, and wait to be unfenced."""
        assert self.raft is not None
        await self.raft.wait_for(self._caught_up, float("inf"))
        self._apply_dynamic_config(self.image)   # also when they came from a snapshot
        self._delete_stray_logs(self.image)
        # Every replica the image gives this node has a log (the start is a delta from empty).
        local = from_empty(self.image, self.node_id).local
        await self.log_creator.create_all([*local.leaders, *local.followers])
        self.replication.start()
        assert self.channel is not None
        raft = self.raft
        self.lifecycle = BrokerLifecycle(self.node_id, self.config, self.channel,
                                         lambda: raft.applied_offset, self.dir_assignments,
                                         self.logs.directory_ids)
        self.logs.failures.subscribe(self.lifecycle.on_log_dir_failure)
        await self.lifecycle.start()
        await self.lifecycle.wait_unfenced()
        # Serve once our own image says so too, or our first Metadata answers would
        # leave this broker out.
        await self.raft.wait_for(lambda: self.node_id in self.image.live_broker_ids,
                                 float("inf"))
        for part in (self._groups, self._txns):
            await part.open(self.image)
        if self.config["log.cleaner.enable"]:
            self._tasks.append(asyncio.create_task(self.cleaner.run(self._stop)))
        self._tasks.append(asyncio.create_task(self.logs.run(
            self._stop,
            retention_check_interval_ms=self.config["log.retention.check.interval.ms"],
            hw_checkpoint_interval_ms=self.config[
                "replica.high.watermark.checkpoint.interval.ms"])))
        self._tasks.append(asyncio.create_task(self._fence_loop()))
        if self.config["auto.leader.rebalance.enable"]:
            self._tasks.append(asyncio.create_task(run_leader_rebalance(
                self.controller, self.config["leader.imbalance.check.interval.seconds"],
                self._stop)))

    def _caught_up(self) -> bool:
        """A leader is known and we applied what it had committed when we learned of it."""
        raft = self.raft
        assert raft is not None
        if raft.is_leader:
            return raft.is_active
        return raft.leader_id is not None and raft.applied_offset >= raft.core.high_watermark \
            and raft.core.high_watermark > 0

    def _voters(self) -> dict[int, Voter]:
        voters = self.config.quorum_voters
        if not voters:
            # Single node: its own one-voter quorum, no peers to reach.
            return {self.node_id: Voter(self.node_id, "127.0.0.1", 0)}
        return voters

    def _raft_timing(self) -> RaftTiming:
        c = self.config
        return RaftTiming(election_timeout_ms=c["controller.quorum.election.timeout.ms"],
                          fetch_timeout_ms=c["controller.quorum.fetch.timeout.ms"],
                          request_timeout_ms=c["controller.quorum.request.timeout.ms"],
                          max_fetch=c["replica.fetch.max.bytes"])

    async def _fence_loop(self) -> None:
        assert self.controller is not None
        while not self._stop.is_set():
            try:
                await self.controller.fence_expired_brokers()
            except errors.KafkaError as exc:
                log.debug("fencing check skipped: %s", exc)
            except Exception:
                log.exception("fencing check failed")
            try:
                await asyncio.wait_for(self._stop.wait(), FENCE_CHECK_S)
            except asyncio.TimeoutError:
                pass

    async def controlled_shutdown(self) -> None:
        """Ask the controller to move our leaderships away before we stop serving."""
        if self.lifecycle is not None:
            await self.lifecycle.controlled_shutdown()

    async def stop(self) -> None:
        self._stop.set()
        if self.lifecycle is not None:
            await self.lifecycle.stop()
        await self._groups.stop()
        await self._txns.stop()
        await self.replication.stop()
        await self.log_creator.stop()
        for task in self._tasks:
            try:
                await asyncio.wait_for(task, 10)
            except (asyncio.TimeoutError, asyncio.CancelledError):
                task.cancel()
        if self.channel is not None:
            await self.channel.close()
        if self.snapshotter is not None:
            await self.snapshotter.stop()
        if self.raft is not None:
            await self.raft.stop()
            self.raft.log.close()
        await self.logs.close()
        if self._dir_locks is not None:
            self._dir_locks.release()

    def metadata_dir(self) -> Path:
        meta_dir = self.config["metadata.log.dir"]
        # A folder the LogManager does not scan, so the metadata log is never
        # mistaken for a user partition.
        return Path(meta_dir) if meta_dir else self.config.log_dirs[0] / "__metadata"

    # -- metadata ----------------------------------------------------------------

    def controller_id_for_clients(self) -> int:
        """The active controller when it is a live broker (admin clients send it
        controller requests), else this node, which relays them."""
        active = self.controller.active_controller_id if self.controller else None
        if active is not None and active in self.image.live_broker_ids:
            return active
        return self.node_id

    @property
    def coordinator(self) -> GroupCoordinator:
        return self._groups.get()

    @property
    def txn_coordinator(self) -> TransactionCoordinator:
        return self._txns.get()

    @property
    def loaded_coordinator(self) -> GroupCoordinator | None:
        """The group coordinator if something needed it already (the metrics' view)."""
        return self._groups.built

    @property
    def image(self) -> MetadataImage:
        assert self.controller is not None
        return self.controller.image

    def scram_credential(self, user: str, mechanism: str) -> ScramCredential | None:
        return self.image.scram.get((user, mechanism))

    def log_config_for(self, topic: str, partition: int = 0) -> LogConfig:
        return log_config(self.config, dict(self.image.topic_config(topic)))

    def _apply_dynamic_config(self, image: MetadataImage) -> None:
        """Dynamic broker configs (see dynamic_config.py) take effect: topic defaults in
        every log, the cleaner; replication throttles read self.config themselves."""
        layers = dynamic_layers(image, self.node_id)
        if layers == self._dynamic_layers:
            return
        self._dynamic_layers = layers
        self.config = effective_config(self.static_config, image, self.node_id)
        self.cleaner.broker_config = self.config
        for (topic, p), plog in self.logs.logs().items():
            plog.update_config(self.log_config_for(topic, p))
        log.info("dynamic broker configs applied")

    def _on_metadata_update(self, delta: MetadataDelta, new: MetadataImage) -> None:
        """React to one committed step from its delta: only what it changed is visited."""
        if delta.configs:
            self._apply_dynamic_config(new)
        for name, topic in delta.deleted_topics.items():
            self.logs.delete_topic(name)
            for p in topic.partitions:
                self.replication.wake((name, p))
        self.log_creator.create([*delta.local.leaders, *delta.local.followers])
        self._delete_moved_away(delta.local)
        self._groups.on_metadata_update(delta, new)
        self._txns.on_metadata_update(delta, new)
        for rtype, name in delta.configs:
            topic = new.topics.get(name) if rtype == TOPIC_RESOURCE else None
            if topic is None:
                continue
            cfg = self.log_config_for(name)
            for p in topic.partitions:
                plog = self.logs.get(name, p)
                if plog is not None:
                    plog.update_config(cfg)

    def _txn_markers_written(self, marker: TxnMarker, partitions: list[TopicPartition]) -> None:
        """Markers this node's transaction coordinator wrote here, as leader: the group
        coordinator settles transactional offset commits with them (none pending while it
        is not loaded: they live in __consumer_offsets, whose existence loads it)."""
        if (groups := self._groups.built) is not None:
            groups.on_txn_markers(marker, partitions)

    def _delete_stray_logs(self, image: MetadataImage) -> None:
        """Logs of topics deleted while this node was down (Kafka's stray logs)."""
        for (topic, p) in self.logs.logs():
            part = image.partition(topic, p)
            if part is None or self.node_id not in part.replicas:
                log.info("deleting stray log %s-%d", topic, p)
                self.logs.delete_partition(topic, p)

    def _delete_moved_away(self, local: LocalChanges) -> None:
        """Logs of partitions a reassignment took off this node (Kafka's StopReplica with
        delete): the replica set no longer names us, so nobody will read them again."""
        for topic, p in local.moved_away:
            if self.logs.get(topic, p):
                log.info("%s-%d: replica moved off this node; deleting its log", topic, p)
                self.replication.stop_replica((topic, p))
                self.logs.delete_partition(topic, p)
                self.replication.wake((topic, p))
            elif self.logs.offline_dir_of(topic, p) is not None:
                # Its dir is offline: no longer ours, so a replica later moved back here is
                # a new one, made in an online dir.
                self.logs.delete_partition(topic, p)

    def _assigned_dir(self, tp: tuple[str, int]) -> uuid.UUID:
        part = self.image.partition(*tp)
        return UNASSIGNED if part is None else part.directory_of(self.node_id)

    def _hosts_replica(self, tp: tuple[str, int]) -> bool:
        part = self.image.partition(*tp)
        return part is not None and self.node_id in part.replicas

