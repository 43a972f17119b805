"""The controller: validates requests against the image, emits records, commits them.

Decide, then apply: each operation computes records from the current image
without touching it; `_commit` appends them to the metadata log and only
then replays them into a new image. Operations are serialized by one lock,
so two decisions never race on the same image; decisions about broker liveness
(registration, unfencing, fencing) go first (decision_lock.py), and a heartbeat that
changes nothing is answered from the image without the lock at all.
"""
from __future__ import annotations

import contextlib
import logging
import time
import uuid
from dataclasses import dataclass
from typing import Any, AsyncIterator, Callable, Mapping

from ..defs.config_error import ConfigError
from ..metadata import records as mrec
from ..metadata.directories import LOST
from ..pacing import Pacer
from ..metadata.delta import MetadataDelta, apply_batches, between
from ..metadata.image import TOPIC_RESOURCE, BrokerInfo, MetadataImage, replay
from ..protocol import errors
from ..quotas.alter import QuotaEntry, quota_changes
from ..defs.topic_defs import validate_topic_configs
from ..defs.acl import AclBinding
from ..security.acl import AclFilter
from . import election, isr, leader_balance, reassignment, replica_dirs, security
from .broker_configs import decide_broker_configs
from .brokers import decide_unregister
from .decision_lock import NORMAL, URGENT, DecisionLock
from .liveness import BrokerLiveness
from .topics import (TopicResult, TopicSpec, check_new_partitions, decide_new_partitions,
                     decide_topic)

log = logging.getLogger(__name__)
# Called with each committed step's delta and the image after it.
MetadataListener = Callable[[MetadataDelta, MetadataImage], None]

PRODUCER_ID_BLOCK = 1000
# How long a decision waits for this node to become the active controller (a fresh
# election) before answering NOT_CONTROLLER.
ACTIVE_WAIT_S = 5.0
# A fencing check this long after the previous one means this process itself did not run
# (a stalled event loop): heartbeats may sit unread in socket buffers, so nobody is judged
# before the next check.
STALL_S = 2.0


@dataclass(frozen=True)
class BrokerState:
    """A heartbeat's answer (Kafka's BrokerHeartbeatResponse fields)."""
    caught_up: bool
    fenced: bool
    should_shut_down: bool


class Controller:
    """Decides on the active controller; on every node, replays what the quorum committed.

    Owns the metadata image (replaced whole on each committed batch) and, on the
    active controller, the broker heartbeat table (liveness.py). Decisions run under
    one lock (decision_lock.py) and only while this node is the active controller (Raft
    leader with its log applied); the records they produce change the image only once
    committed and replayed, on the leader exactly as on every follower.
    """

    def __init__(self, cluster_id: str, node_id: int, config: Any) -> None:
        self._node_id = node_id
        self._config = config
        self._lock = DecisionLock()
        self.image = MetadataImage(cluster_id=cluster_id)
        self._listeners: list[MetadataListener] = []
        self._pid_next = 0
        self._pid_end = 0
        self._pid_epoch = -1   # the Raft epoch the producer-id block above was taken in
        self.raft: Any = None   # the RaftNode, attached once both exist
        self._liveness = BrokerLiveness()
        self._last_check: float | None = None   # when the last fencing check ended
        self._skipped_check = False

    def _defaults(self) -> tuple[int, int]:
        return self._config["num.partitions"], self._config["default.replication.factor"]

    def attach(self, raft: Any) -> None:
        self.raft = raft

    def on_change(self, listener: MetadataListener) -> None:
        """`listener(delta, new image)` after every committed step, in registration order."""
        self._listeners.append(listener)

    def load_image(self, image: MetadataImage) -> None:
        """Start from a snapshot's image (before any committed batch is applied)."""
        self.image = image

    def install_image(self, image: MetadataImage) -> None:
        """Replace the image with a snapshot fetched from the leader (a follower far behind).

        A whole image replaces ours, so its delta is the one full comparison (rare)."""
        delta = between(self.image, image, self._node_id)
        self.image = image
        self._publish(delta)

    def apply_committed(self, batches: list[tuple[int, list[dict[str, Any]]]]) -> None:
        """Replay committed (last offset, records) batches, in log order (every node)."""
        delta, self.image = apply_batches(self.image, batches, self._node_id)
        self._publish(delta)

    def _publish(self, delta: MetadataDelta) -> None:
        # The delta is computed once here, for every publisher.
        for listener in self._listeners:
            listener(delta, self.image)

    @property
    def is_active(self) -> bool:
        return self.raft is not None and self.raft.is_active

    @property
    def active_controller_id(self) -> int | None:
        return None if self.raft is None else self.raft.leader_id

    @contextlib.asynccontextmanager
    async def _exclusive(self, urgent: bool = NORMAL) -> AsyncIterator[None]:
        """The decision lock, held only while this node is the active controller;
        `urgent` (broker liveness) goes before every waiting normal decision."""
        if not await self.raft.wait_for(lambda: self.raft.is_active, ACTIVE_WAIT_S):
            raise errors.NotController(
                f"node {self._node_id} is not the active controller "
                f"(leader: {self.raft.leader_id})")
        async with self._lock.hold(urgent):
            if not self.raft.is_active:
                raise errors.NotController(f"node {self._node_id} lost the quorum leadership")
            if self._pid_epoch != self.raft.epoch:
                # A new term: producer-id blocks handed out by an earlier leader are unknown.
                self._pid_next = self._pid_end = 0
                self._pid_epoch = self.raft.epoch
            yield

    async def _commit(self, records: list[dict[str, Any]]) -> MetadataImage:
        if not records:
            return self.image
        await self.raft.propose(records)
        return self.image

    # -- brokers ---------------------------------------------------------------

    async def register_broker(self, node_id: int, host: str, port: int,
                              rack: str | None, incarnation: str,
                              endpoints: tuple[tuple[str, str, int], ...] = (),
                              log_dirs: tuple[uuid.UUID, ...] = ()) -> int:
        """Registers (or re-registers) a broker, fenced until it has caught up; its epoch.
        ``endpoints``: (LISTENER, host, port) of each broker listener, inter-broker first;
        ``log_dirs``: the directory ids of its online log dirs (KIP-858)."""
        arrived = time.monotonic()
        async with self._exclusive(URGENT):
            known = self.image.brokers.get(node_id)
            if known and (known.host, known.port, known.rack, known.incarnation,
                          known.endpoints, known.log_dirs) == (host, port, rack, incarnation,
                                                               endpoints, log_dirs):
                self._liveness.touch(node_id, arrived)
                return known.epoch
            epoch = (known.epoch + 1) if known else 0
            register = {"type": mrec.REGISTER_BROKER, "node_id": node_id,
                        "host": host, "port": port, "rack": rack, "epoch": epoch,
                        "incarnation": incarnation, "fenced": True,
                        "endpoints": [list(e) for e in endpoints],
                        "log_dirs": [str(d) for d in log_dirs]}
            if known and known.incarnation != incarnation:
                # A new process: its last one may have died without a controlled shutdown
                # (still in ISRs) and its disk may be empty (emptyDir, a replaced volume).
                # It must earn its ISR slots back by fetching (KIP-966 treats an unclean
                # restart the same way), or a leader election could pick an empty log. An
                # ISR of it alone stays (on_broker_leaving never empties one): without
                # KIP-966's eligible leader replicas that partition has no better choice.
                await self._fence_and_leave(register)
            else:
                await self._commit([register])
            self._liveness.touch(node_id, arrived)
            return epoch

    def _registered(self, node_id: int, broker_epoch: int) -> BrokerInfo:
        known = self.image.brokers.get(node_id)
        if known is None:
            raise errors.BrokerIdNotRegistered(f"broker {node_id} is not registered")
        if known.epoch != broker_epoch:
            raise errors.StaleBrokerEpoch(
                f"broker {node_id} epoch {broker_epoch} is not the registered {known.epoch}")
        return known

    async def broker_heartbeat(self, node_id: int, broker_epoch: int, metadata_offset: int,
                               want_shutdown: bool,
                               offline_dirs: frozenset[uuid.UUID] = frozenset()
                               ) -> BrokerState:
        """`offline_dirs`: the directory ids of its offline log dirs (KIP-858); its
        replicas still assigned to one go to LOST (replica_dirs.py)."""
        # Alive as of its arrival, whatever it waits for next.
        arrived = time.monotonic()
        if self.is_active:
            known = self._registered(node_id, broker_epoch)
            self._liveness.touch(node_id, arrived)
            caught_up = metadata_offset >= known.registered_offset
            # A scan of the image only while the broker has an offline dir.
            lost = replica_dirs.offline_replicas(self.image, node_id, offline_dirs) \
                if offline_dirs else {}
            if not want_shutdown and not (known.fenced and caught_up) and not lost:
                # Nothing to decide: the answer is in the image, no lock needed.
                return BrokerState(caught_up, known.fenced, False)
        async with self._exclusive(URGENT):
            known = self._registered(node_id, broker_epoch)
            self._liveness.touch(node_id, arrived)
            caught_up = metadata_offset >= known.registered_offset
            if offline_dirs:
                await self._offline_dirs(node_id, offline_dirs)
            if want_shutdown:
                if not known.fenced:
                    await self._fence(node_id, "controlled shutdown")
                return BrokerState(caught_up, True, True)
            if known.fenced and caught_up:
                await self._commit([{"type": mrec.UNFENCE_BROKER, "node_id": node_id}])
                await self._commit(election.on_broker_returning(self.image, node_id))
                await self._commit(reassignment.completions(self.image))
                log.info("broker %d unfenced", node_id)
            fenced = self.image.brokers[node_id].fenced
            return BrokerState(caught_up, fenced, False)

    def heartbeat_gaps(self) -> dict[int, float]:
        """Active controller: node id -> longest seconds between two of its heartbeats since
        this node became active (liveness.py); elsewhere empty."""
        return self._liveness.longest_gaps() if self.is_active else {}

    async def fence_expired_brokers(self) -> None:
        """Active controller, periodically: fence brokers whose heartbeats stopped."""
        if not self.is_active:
            self._liveness.deactivate()
            self._last_check = None
            return
        now = time.monotonic()
        late = 0.0 if self._last_check is None else now - self._last_check
        self._last_check = now
        if not self._liveness.active:
            # A new active controller has heard nobody yet: everyone gets a full session.
            self._liveness.activate(self.image.brokers, now)
            # A move whose ISR allowed completion when the last controller died finishes now.
            await self.complete_reassignments()
        if late > STALL_S and not self._skipped_check:
            # Once only: a process that stays that slow must still fence a dead broker.
            self._skipped_check = True
            log.warning("fencing check %.1fs after the last one: this process was stalled; "
                        "brokers are judged at the next check", late)
            return
        self._skipped_check = False
        timeout = self._config["broker.session.timeout.ms"] / 1000
        for node_id in self._liveness.expired(self.image.live_broker_ids, now, timeout):
            async with self._exclusive(URGENT):
                # Judged again under the lock: a heartbeat may have arrived meanwhile.
                silent = self._liveness.silence(node_id, time.monotonic())
                broker = self.image.brokers.get(node_id)
                if broker is not None and not broker.fenced and silent > timeout:
                    await self._fence(node_id, f"no heartbeat for {silent:.1f}s")
        self._last_check = time.monotonic()

    async def _fence(self, node_id: int, why: str) -> None:
        """Under the lock: fence `node_id` and move its leaderships to the ISR."""
        await self._fence_and_leave({"type": mrec.FENCE_BROKER, "node_id": node_id})
        log.info("broker %d fenced (%s)", node_id, why)

    async def _fence_and_leave(self, fence: dict[str, Any]) -> None:
        """Under the lock: commit `fence` (a record fencing a broker) with the records moving
        that broker's leaderships and ISR slots to others, in one batch, as Kafka's
        controller does: no image ever names a fenced broker as a partition's leader (a
        client would be told a leader it has no address of)."""
        node_id = fence["node_id"]
        await self._commit([fence, *election.on_broker_leaving(self.image, node_id,
                                                               self._unclean_allowed)])
        await self._commit(reassignment.completions(self.image))

    def _unclean_allowed(self, topic: str) -> bool:
        value = self.image.topic_config(topic).get("unclean.leader.election.enable")
        if value is None:
            return bool(self._config["unclean.leader.election.enable"])
        return value.strip().lower() == "true"

    async def assign_replicas_to_dirs(self, node_id: int, broker_epoch: int,
                                      assignments: Mapping[tuple[str, int], uuid.UUID]
                                      ) -> dict[tuple[str, int], errors.KafkaError | None]:
        """A live broker's replicas are in these log dirs, LOST: a failed one
        (replica_dirs.py)."""
        async with self._exclusive(URGENT):
            self._registered(node_id, broker_epoch)
            answers, records = replica_dirs.decide(self.image, node_id, assignments,
                                                   self._unclean_allowed)
            await self._commit(records)
            if records:
                lost = sum(1 for d in assignments.values() if d == LOST)
                log.info("broker %d: %d replica dir assignment(s) recorded, %d to a failed "
                         "log dir", node_id, len(records), lost)
            return answers

    async def _offline_dirs(self, node_id: int, offline: frozenset[uuid.UUID]) -> None:
        """Under the lock: `node_id`'s replicas still assigned to one of its `offline` dirs
        go to LOST: their leaderships and ISR slots move to others."""
        lost = replica_dirs.offline_replicas(self.image, node_id, offline)
        if not lost:
            return
        _, records = replica_dirs.decide(self.image, node_id, lost, self._unclean_allowed)
        await self._commit(records)
        log.info("broker %d: %d replica(s) on its offline log dir(s) %s assigned to LOST",
                 node_id, len(lost), ", ".join(sorted(map(str, offline))))

    async def unregister_broker(self, node_id: int) -> None:
        """UnregisterBroker: forget a broker that holds no replica (see brokers.py)."""
        async with self._exclusive():
            await self._commit(decide_unregister(self.image, node_id))
            self._liveness.forget(node_id)
            log.info("broker %d unregistered", node_id)

    # -- leaders ---------------------------------------------------------------

    async def elect_leaders(self, election_type: int,
                            wanted: list[tuple[str, int]] | None
                            ) -> list[leader_balance.ElectionOutcome]:
        """ElectLeaders (PREFERRED or UNCLEAN) on `wanted` partitions, None: all."""
        async with self._exclusive():
            outcomes, records = leader_balance.decide_elections(self.image, election_type,
                                                                wanted)
            try:
                await self._commit(records)
            except errors.KafkaError as exc:
                return [o if o.error is not None else
                        leader_balance.ElectionOutcome(o.topic, o.partition, exc)
                        for o in outcomes]
            return outcomes

    async def balance_leaders(self) -> None:
        """Active controller, periodically: preferred leaders back where brokers are
        imbalanced beyond leader.imbalance.per.broker.percentage."""
        if not self.is_active:
            return
        async with self._exclusive():
            moved, records = leader_balance.rebalance(
                self.image, self._config["leader.imbalance.per.broker.percentage"])
            if records:
                await self._commit(records)
                log.info("leader rebalance: preferred leaders elected for %s",
                         ", ".join(f"{t}-{p}" for t, p in moved))

    # -- topics ----------------------------------------------------------------

    async def create_topics(self, specs: list[TopicSpec], validate_only: bool = False
                            ) -> list[TopicResult]:
        async with self._exclusive():
            results: list[TopicResult] = []
            records: list[dict[str, Any]] = []
            taken: set[str] = set()
            added = 0
            pacer = Pacer()
            for spec in specs:
                # Placing thousands of partitions takes seconds on a slow machine: Raft
                # timers and heartbeats are served between topics.
                await pacer.pace()
                try:
                    result, recs = decide_topic(self.image, spec, taken, self._defaults())
                    check_new_partitions(added + result.num_partitions)
                except errors.KafkaError as exc:
                    results.append(TopicResult(spec.name, error=exc))
                    continue
                added += result.num_partitions
                taken.add(spec.name)
                results.append(result)
                records.extend(recs)
            if not validate_only:
                try:
                    await self._commit(records)
                except errors.KafkaError as exc:
                    # Leadership lost mid-commit (or no quorum): every topic of the batch gets
                    # the error; a retry finds out whether it was created after all.
                    return [r if r.error is not None else TopicResult(r.name, error=exc)
                            for r in results]
            return results

    async def delete_topic(self, name: str) -> None:
        async with self._exclusive():
            topic = self.image.topics.get(name)
            if topic is None:
                raise errors.UnknownTopicOrPartition(f"topic {name!r} does not exist")
            await self._commit([{"type": mrec.REMOVE_TOPIC, "topic_id": str(topic.topic_id)}])

    async def create_partitions(self, name: str, count: int,
                                assignments: list[list[int]] | None,
                                validate_only: bool) -> None:
        async with self._exclusive():
            records = decide_new_partitions(self.image, name, count, assignments)
            if not validate_only:
                await self._commit(records)

    # -- ISR ------------------------------------------------------------------

    async def alter_partitions(self, leader_id: int, changes: list[isr.IsrChange]
                               ) -> list[isr.IsrAnswer]:
        """One leader's AlterPartition: every change checked on its own (controller/isr.py),
        the accepted ones committed as one metadata batch; one answer per change, in order."""
        async with self._exclusive():
            answers, records = isr.decide(self.image, leader_id, changes)
            try:
                await self._commit(records)
            except errors.KafkaError as exc:
                # Not committed (or not known to be): nothing of the batch was accepted.
                return [exc if a is None else a for a in answers]
            log.info("ISR changes from broker %d: %s", leader_id, isr.summary(changes, answers))
            return answers

    # -- reassignment (KIP-455) ------------------------------------------------------

    async def alter_partition_reassignments(
            self, moves: list[tuple[str, int, list[int] | None]]
    ) -> list[errors.KafkaError | None]:
        """Start (replicas) or cancel (None) moves; one error or None per move, in order.

        Every accepted move of the request is committed in one batch."""
        async with self._exclusive():
            results: list[errors.KafkaError | None] = []
            records: list[dict[str, Any]] = []
            image = self.image
            for topic, partition, replicas in moves:
                try:
                    record = reassignment.decide(image, topic, partition, replicas,
                                                 self._unclean_allowed(topic))
                except errors.KafkaError as exc:
                    results.append(exc)
                    continue
                if record is not None:
                    records.append(record)
                    # Later moves of the same partition in this request see this one.
                    image = replay(image, [record], image.offset)
                results.append(None)
            try:
                await self._commit(records)
            except errors.KafkaError as exc:
                return [r if r is not None else exc for r in results]
            if records:
                log.info("partition reassignment: %s", records)
            return results

    async def complete_reassignments(self) -> None:
        """Finish every move the current ISRs already allow."""
        async with self._exclusive():
            await self._commit(reassignment.completions(self.image))

    # -- configs ---------------------------------------------------------------

    async def alter_topic_configs(
            self, name: str,
            changes_for: Callable[[Mapping[str, str]], dict[str, str | None]],
            replace_all: bool, validate_only: bool) -> None:
        """Apply ``changes_for(current overrides)``: key -> new value, None deletes.

        The changes are computed under the lock from the overrides they apply to, so
        two APPENDs to one list config never lose each other. replace_all: AlterConfigs.
        """
        async with self._exclusive():
            if name not in self.image.topics:
                raise errors.UnknownTopicOrPartition(f"topic {name!r} does not exist")
            changes = changes_for(self.image.topic_config(name))
            try:
                validate_topic_configs({k: v for k, v in changes.items() if v is not None})
            except ConfigError as exc:
                raise errors.InvalidConfig(str(exc)) from None
            current = dict(self.image.topic_config(name))
            target = dict(current) if not replace_all else {}
            for key, value in changes.items():
                if value is None:
                    target.pop(key, None)
                else:
                    target[key] = value
            records = [{"type": mrec.CONFIG, "resource_type": TOPIC_RESOURCE, "name": name,
                        "key": key, "value": target.get(key)}
                       for key in sorted(set(current) | set(target))
                       if current.get(key) != target.get(key)]
            if not validate_only:
                await self._commit(records)

    async def alter_broker_configs(
            self, name: str,
            changes_for: Callable[[Mapping[str, str]], dict[str, str | None]],
            replace_all: bool, validate_only: bool) -> None:
        """Dynamic broker configs of node `name` ("" = cluster default); see broker_configs."""
        async with self._exclusive():
            records = decide_broker_configs(self.image, name, changes_for, replace_all)
            if not validate_only:
                await self._commit(records)

    # -- producer ids ----------------------------------------------------------

    # -- security: SCRAM credentials and ACLs (decided in controller/security.py) --------

    async def alter_scram_credentials(self, changes: list[security.ScramChange]
                                      ) -> dict[str, errors.KafkaError | None]:
        async with self._exclusive():
            records, outcome = security.scram_changes(self.image, changes)
            await self._commit(records)
            return outcome

    async def create_acls(self, bindings: list[AclBinding]) -> None:
        async with self._exclusive():
            await self._commit(security.acl_creations(self.image, bindings))

    async def delete_acls(self, filters: list[AclFilter]) -> list[list[AclBinding]]:
        async with self._exclusive():
            records, matches = security.acl_deletions(self.image, filters)
            await self._commit(records)
            return matches

    async def alter_client_quotas(self, entries: list[QuotaEntry], validate_only: bool
                                  ) -> list[errors.KafkaError | None]:
        """Each entry's outcome; the valid ones are committed (decided in quotas/alter.py)."""
        async with self._exclusive():
            records, outcome = quota_changes(self.image, entries)
            if not validate_only:
                await self._commit(records)
            return outcome

    async def next_producer_id(self) -> int:
        async with self._exclusive():
            if self._pid_next >= self._pid_end:
                start = self.image.next_producer_id
                await self._commit([{"type": mrec.PRODUCER_IDS,
                                     "next_producer_id": start + PRODUCER_ID_BLOCK}])
                self._pid_next, self._pid_end = start, start + PRODUCER_ID_BLOCK
            pid = self._pid_next
            self._pid_next += 1
            return pid
