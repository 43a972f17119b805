"""The broker's side of its lifecycle: registration, heartbeats, controlled shutdown.

A broker registers with the active controller (BrokerRegistration), fenced,
then heartbeats (BrokerHeartbeat) with the metadata offset it has applied;
the controller unfences it once that covers its registration, and fences it
again when heartbeats stop for broker.session.timeout.ms. On SIGTERM the
broker heartbeats with want_shut_down, and the controller moves its
leaderships away before answering should_shut_down. The registration names the directory ids
of the online log dirs and every heartbeat those of the offline ones (KIP-858), as Kafka
3.7+ brokers do; the controller moves leadership off replicas assigned to an offline one.
Which log dir holds each replica goes to
the controller with AssignReplicasToDirs (KIP-858; dir_assignments.py queues them): a new
replica's dir once its log is made, and the LOST directory for every replica of a failed or
unreadable dir (as Kafka's lifecycle manager propagates a directory failure), retried until
the controller took them. Those known at start go before the first heartbeat, so the
controller knows of a lost replica before it unfences this broker.

Both calls go through the controller channel (controller/channel.py): straight to this
node's controller when it leads the quorum, else over Kafka's RPCs to the one that does.
"""
from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Callable

from .client.connection import KafkaClientError
from .controller.channel import ControllerChannel, Registration
from .defs.broker_config import BrokerConfig
from .controller.controller import BrokerState
from .dir_assignments import DirAssignmentQueue
from .metadata.directories import LOST
from .protocol import errors
from .readiness import LifecycleView
from .storage.log_dir_failure import LogDirFailure
from .tasks import cancel_and_wait

log = logging.getLogger(__name__)

RETRY_S = 0.2
DirIds = tuple[tuple[uuid.UUID, ...], tuple[uuid.UUID, ...]]   # (online, offline) dir ids
NO_CONTROLLER_GIVE_UP_S = 3.0


class BrokerLifecycle:
    def __init__(self, node_id: int, config: BrokerConfig, channel: ControllerChannel,
                 applied_offset: Callable[[], int], dirs: DirAssignmentQueue,
                 log_dirs: Callable[[], DirIds] = lambda: ((), ())) -> None:
        """`log_dirs()`: the directory ids of this broker's (online, offline) log dirs."""
        self.node_id = node_id
        self.config = config
        self._channel = channel
        self._applied_offset = applied_offset   # of the metadata log, as heartbeats report it
        self.incarnation = uuid.uuid4()
        self.broker_epoch = -1
        self.fenced = True
        self.caught_up = False
        self.last_heartbeat_answer: float | None = None  # loop time; for /readyz
        self._unfenced = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._shutting_down = False
        self._dirs = dirs
        self._dirs_task: asyncio.Task[None] | None = None
        self._log_dirs = log_dirs

    async def start(self) -> None:
        await self._register()
        if self._dirs.pending:
            await self._assign_dirs()
        self._dirs_task = asyncio.create_task(self._assign_dirs_loop())
        self._task = asyncio.create_task(self._heartbeat_loop())

    async def wait_unfenced(self) -> None:
        await self._unfenced.wait()

    async def stop(self) -> None:
        await cancel_and_wait([self._task, self._dirs_task])

    def on_log_dir_failure(self, failure: LogDirFailure) -> None:
        """Tell the controller the replicas of a failed log dir are LOST (in the background,
        retried until it took them)."""
        self._dirs.put({tp: LOST for tp in failure.partitions})

    async def _assign_dirs_loop(self) -> None:
        while True:
            await self._dirs.ready.wait()
            if not await self._assign_dirs():
                await asyncio.sleep(RETRY_S)

    async def _assign_dirs(self) -> bool:
        """One AssignReplicasToDirs of what is pending; False: retry later."""
        sent = dict(self._dirs.pending)
        try:
            answers = await self._channel.assign_replicas_to_dirs(self.node_id,
                                                                  self.broker_epoch, sent)
        except (errors.KafkaError, KafkaClientError, OSError) as exc:
            log.info("assigning replicas to log dirs: %s; retrying", exc)
            return False
        # Done: taken, or refused for good (the topic or the replica is gone).
        self._dirs.taken({tp: d for tp, d in sent.items()
                          if answers.get(tp) is None or not answers[tp].retriable})
        log.info("%d replica dir assignment(s) sent to the controller, %d left", len(sent),
                 len(self._dirs.pending))
        return not any(tp in self._dirs.pending for tp in sent)

    def view(self) -> LifecycleView:
        """What /readyz and the broker-state gauge decide from (see readiness.py)."""
        age = None if self.last_heartbeat_answer is None else \
            asyncio.get_running_loop().time() - self.last_heartbeat_answer
        return LifecycleView(started=True, registered=self.broker_epoch >= 0,
                             fenced=self.fenced, caught_up=self.caught_up,
                             heartbeat_age_s=age, shutting_down=self._shutting_down)

    async def controlled_shutdown(self, timeout: float = 30.0) -> None:
        """Heartbeat with want_shut_down until the controller lets us go (bounded)."""
        self._shutting_down = True
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while loop.time() < deadline:
            # With no quorum (the whole cluster stopping) nobody can take our leaderships.
            if not await self._channel.wait_for_leader(NO_CONTROLLER_GIVE_UP_S):
                log.warning("controlled shutdown skipped: no active controller")
                return
            try:
                state = await self._heartbeat(want_shutdown=True)
                if state.should_shut_down:
                    log.info("controlled shutdown: leaderships moved")
                    return
            except (errors.KafkaError, KafkaClientError, OSError) as exc:
                log.info("controlled shutdown: %s; retrying", exc)
            await asyncio.sleep(RETRY_S)
        log.warning("controlled shutdown did not complete within %.0fs; stopping anyway",
                    timeout)

    # -- the two calls ---------------------------------------------------------------------

    async def _register(self) -> None:
        while True:
            try:
                self.broker_epoch = await self._call_register()
                self.fenced = True  # a (re-)registered broker starts fenced
                log.info("registered with the controller (broker epoch %d)", self.broker_epoch)
                return
            except (errors.KafkaError, KafkaClientError, OSError) as exc:
                log.debug("registration not accepted yet: %s", exc)
            await asyncio.sleep(RETRY_S)

    async def _heartbeat_loop(self) -> None:
        interval = self.config["broker.heartbeat.interval.ms"] / 1000
        while True:
            try:
                # Once a controlled shutdown began, every heartbeat keeps asking for it: a
                # plain one would get this broker unfenced again on its way out.
                state = await self._heartbeat(want_shutdown=self._shutting_down)
                if self.fenced and not state.fenced:
                    log.info("unfenced: serving as broker %d", self.node_id)
                self.fenced = state.fenced
                self.caught_up = state.caught_up
                self.last_heartbeat_answer = asyncio.get_running_loop().time()
                if not state.fenced:
                    self._unfenced.set()
            except (errors.StaleBrokerEpoch, errors.BrokerIdNotRegistered) as exc:
                log.info("re-registering: %s", exc)
                await self._register()
                continue
            except (errors.KafkaError, KafkaClientError, OSError) as exc:
                log.debug("heartbeat failed: %s", exc)
            # Fast until unfenced (start-up waits on it), then at the configured pace.
            await asyncio.sleep(interval if self._unfenced.is_set() else RETRY_S)

    async def _call_register(self) -> int:
        listeners = self.config.advertised_broker_listeners
        return await self._channel.register_broker(Registration(
            self.node_id, self.incarnation,
            tuple((lst.name.upper(), lst.host, lst.port, self.config.security_protocol(lst))
                  for lst in listeners),
            self.config["broker.rack"], self._log_dirs()[0]))

    async def _heartbeat(self, want_shutdown: bool) -> BrokerState:
        return await self._channel.broker_heartbeat(self.node_id, self.broker_epoch,
                                                    self._applied_offset(), want_shutdown,
                                                    frozenset(self._log_dirs()[1]))
