"""Logs for the replicas a metadata step gives this node: some at once, the rest later.

Creating a partition log costs a directory and a few files (1-20 ms each on a busy disk).
The metadata publisher used to create every missing log before it returned: 1,000 new
partitions blocked each node's event loop for ~16 s at once, the followers stopped fetching
from the Raft leader, and the leader resigned (bench/scale.py). Now a step creates logs at
once only until its slice (pacing.PACE_S) is spent, internal topics' always (their
coordinators load a partition when its step arrives and do not look again until the next);
the rest are queued and created by a task, each log's files in a worker thread (file
system calls leave the event loop, and the GIL, to Raft and heartbeats), and each slice
of created logs goes to `on_created`, where the replica manager takes up the roles it could
not take without a log. Until then a new partition answers LEADER_NOT_AVAILABLE here (followers'
fetches NOT_LEADER_OR_FOLLOWER) and clients
retry, as they do while any new partition's metadata travels.

A log is made in the dir its metadata assigns (metadata/directories.py), never elsewhere: a
replica whose dir is not online here stays offline. Where each replica's log is (or that
it is LOST) goes to `placed` whenever the metadata says otherwise, for the controller to
record (dir_assignments.py): a new log's dir, a log found at start in a dir the metadata
does not name (a repaired disk), a replica whose dir failed or is gone.

Owned by the Broker; event loop only.
"""
from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Callable, Iterable, Mapping

from ..metadata.directories import LOST
from ..pacing import Pacer
from ..protocol.errors import KafkaStorageError
from ..storage.log_config import LogConfig
from ..storage.manager import LogManager
from ..tasks import cancel_and_wait

log = logging.getLogger(__name__)
TopicPartition = tuple[str, int]


class LogCreator:
    def __init__(self, logs: LogManager, config_for: Callable[[str], LogConfig],
                 wanted: Callable[[TopicPartition], bool],
                 on_created: Callable[[list[TopicPartition]], None],
                 assigned: Callable[[TopicPartition], uuid.UUID],
                 placed: Callable[[Mapping[TopicPartition, uuid.UUID]], None]) -> None:
        """`wanted(tp)`: the current image still places a replica of `tp` here;
        `on_created(tps)`: logs of `tps` now exist (queued ones only); `assigned(tp)`: the
        directory id the image gives this node's replica; `placed`: where replicas are,
        when the image says otherwise (see the module doc)."""
        self._logs = logs
        self._config_for = config_for
        self._wanted = wanted
        self._on_created = on_created
        self._assigned = assigned
        self._placed = placed
        self._queued: dict[TopicPartition, None] = {}   # insertion-ordered set
        self._wake = asyncio.Event()
        self._drained = asyncio.Event()   # set whenever the queue has been worked off
        self._task: asyncio.Task[None] | None = None

    @property
    def queued(self) -> int:
        return len(self._queued)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        await cancel_and_wait([self._task])

    def create(self, tps: Iterable[TopicPartition]) -> None:
        """Logs of `tps` that are missing: now while this call's slice lasts, later after."""
        pacer = Pacer()
        configs: dict[str, LogConfig] = {}
        for tp in tps:
            if tp in self._queued:
                continue
            if self._logs.get(*tp) is not None:
                self._check_placement(tp)
                continue
            if pacer.spent() and not tp[0].startswith("__"):
                self._queued[tp] = None
                continue
            self._create(tp, configs)
        if self._queued:
            self._wake.set()

    async def create_all(self, tps: Iterable[TopicPartition]) -> None:
        """Logs of `tps` that are missing, in paced slices; returns once none is queued
        (start-up: a restarted node may lack thousands, and its Raft follower must keep
        fetching meanwhile, or it stands for election and unseats a healthy leader)."""
        for tp in tps:
            if self._logs.get(*tp) is None:
                self._queued[tp] = None
            else:
                self._check_placement(tp)
        while self._queued:
            self._drained.clear()
            self._wake.set()
            await self._drained.wait()

    def _create(self, tp: TopicPartition, configs: dict[str, LogConfig]) -> None:
        topic, p = tp
        if topic not in configs:
            configs[topic] = self._config_for(topic)
        try:
            self._logs.create(topic, p, configs[topic], self._assigned(tp))
        except KafkaStorageError as exc:   # its log dir failed: it stays offline here
            log.warning("%s-%d: no log: %s", topic, p, exc)
        self._check_placement(tp)

    def _check_placement(self, tp: TopicPartition) -> None:
        """Tell `placed` where `tp`'s replica is, if the image says otherwise."""
        here = self._logs.directory_id(tp)
        if here is None and self._logs.offline_dir_of(*tp) is not None:
            here = LOST
        if here is not None and here != self._assigned(tp):
            self._placed({tp: here})

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            await self._drain()
            self._drained.set()

    async def _drain(self) -> None:
        pacer = Pacer()
        created: list[TopicPartition] = []
        configs: dict[str, LogConfig] = {}
        if self._queued:
            log.info("creating %d partition log(s) in the background", len(self._queued))
        while self._queued:
            tp = next(iter(self._queued))
            # A topic deleted (or moved away) while queued gets no log.
            if self._logs.get(*tp) is None and self._wanted(tp):
                topic, p = tp
                if topic not in configs:
                    configs[topic] = self._config_for(topic)
                try:
                    # Still queued while its files are made: create() leaves it alone.
                    await self._logs.create_off_loop(topic, p, configs[topic],
                                                     self._assigned(tp))
                except Exception as exc:   # one bad partition must not stop the rest
                    log.warning("%s-%d: cannot create its log: %r", topic, p, exc)
                    if self._wanted(tp):
                        self._check_placement(tp)
                else:
                    if self._wanted(tp):
                        self._check_placement(tp)
                        created.append(tp)
                    else:   # deleted while its files were being made
                        self._logs.delete_partition(topic, p)
            del self._queued[tp]
            if pacer.spent():
                self._hand_over(created)
                created = []
                configs = {}   # a config change may land between slices
                await pacer.pace()
        self._hand_over(created)

    def _hand_over(self, created: list[TopicPartition]) -> None:
        if created:
            self._on_created(created)
