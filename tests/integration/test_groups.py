"""Consumer groups against a real broker process with confluent-kafka (librdkafka).

Partitions are shared within a group, every group gets every message,
rebalances happen on join / leave / death, committed offsets survive a
broker restart, and a restarted static member keeps its partitions
without a rebalance. Session timeouts are the broker minimum (6 s) so the
expiry tests stay short; every wait is bounded.
"""
from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.harness import BrokerProcess
from tests.polling import wait_until

from .clients import create_topic

pytestmark = pytest.mark.timeout(180)

SESSION_MS = 6000
LEAVER_SESSION_MS = 30000
GROUP_CONFIG = {"group.initial.rebalance.delay.ms": 300}


def produce(bootstrap: str, topic: str, values: list[str], partitions: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i, v in enumerate(values):
        p.produce(topic, value=v.encode(), partition=i % partitions)
    assert p.flush(30) == 0


class GroupConsumer:
    """A confluent-kafka consumer polled in its own thread; records messages and assignments."""

    def __init__(self, bootstrap: str, group: str, topic: str, **extra: Any) -> None:
        self.conf = {"bootstrap.servers": bootstrap, "group.id": group,
                     "auto.offset.reset": "earliest", "session.timeout.ms": SESSION_MS,
                     "heartbeat.interval.ms": 500, "enable.auto.commit": True,
                     "auto.commit.interval.ms": 200, **extra}
        self.topic = topic
        self.messages: list[tuple[int, int, bytes]] = []
        self.assignment: set[int] = set()
        self.assign_events = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> "GroupConsumer":
        self.thread.start()
        return self

    def _on_assign(self, consumer: Consumer, parts: list[TopicPartition]) -> None:
        with self._lock:
            self.assign_events += 1

    def _run(self) -> None:
        try:
            c = Consumer(self.conf)
            c.subscribe([self.topic], on_assign=self._on_assign)
            while not self._stop.is_set():
                m = c.poll(0.1)
                current = {tp.partition for tp in c.assignment()}
                with self._lock:
                    self.assignment = current
                if m is None or m.error():
                    continue
                with self._lock:
                    self.messages.append((m.partition(), m.offset(), m.value()))
            c.close()  # commits and sends LeaveGroup (dynamic members)
        except BaseException as exc:  # surfaced by stop()
            self.error = exc

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(30)
        assert not self.thread.is_alive(), "consumer did not close"
        if self.error is not None:
            raise self.error

    def values(self) -> list[bytes]:
        with self._lock:
            return [v for _, _, v in self.messages]

    def parts(self) -> set[int]:
        with self._lock:
            return set(self.assignment)


def stable(consumers: list[GroupConsumer], owned: int, per_member: int) -> Callable[[], bool]:
    """Each consumer holds per_member partitions, together `owned` distinct ones."""
    def check() -> bool:
        parts = [c.parts() for c in consumers]
        union = set().union(*parts)
        return all(len(p) == per_member for p in parts) and len(union) == owned
    return check


@pytest.fixture
def gbroker(broker_factory: Callable[..., BrokerProcess]) -> BrokerProcess:
    return broker_factory(config=GROUP_CONFIG)


def test_three_consumers_share_six_partitions_and_read_everything_once(
        gbroker: BrokerProcess) -> None:
    bs = gbroker.bootstrap
    create_topic(bs, "shared", 6)
    consumers = [GroupConsumer(bs, "g-shared", "shared").start() for _ in range(3)]
    try:
        wait_until(stable(consumers, 6, 2), 30, "3 members with 2 partitions each")
        values = [f"m{i}" for i in range(600)]
        produce(bs, "shared", values, 6)
        wait_until(lambda: sum(len(c.values()) for c in consumers) >= 600, 30, "600 messages")
        time.sleep(0.5)  # nothing more may arrive
        got = [v.decode() for c in consumers for v in c.values()]
        assert sorted(got) == sorted(values)  # exactly once across the group
        for c in consumers:
            assert {p for p, _, _ in c.messages} <= c.parts()
    finally:
        for c in consumers:
            c.stop()


def test_leave_and_death_reassign_partitions(gbroker: BrokerProcess, tmp_path: Path) -> None:
    bs = gbroker.bootstrap
    create_topic(bs, "moving", 6)
    a = GroupConsumer(bs, "g-moving", "moving").start()
    # b leaves: with a long session, only its LeaveGroup can end its membership in time.
    b = GroupConsumer(bs, "g-moving", "moving", **{"session.timeout.ms": LEAVER_SESSION_MS}).start()
    # The third member is a separate process so it can be killed without a LeaveGroup.
    script = tmp_path / "victim.py"
    script.write_text(VICTIM.format(bs=bs, session=SESSION_MS))
    victim = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        assert victim.stdout is not None
        wait_until(stable([a, b], 4, 2), 30, "a and b with 2 partitions each (victim has 2)")
        # Death: SIGKILL, no LeaveGroup. Expiry after the session timeout reassigns.
        killed_at = time.monotonic()
        victim.send_signal(signal.SIGKILL)
        victim.wait(10)
        wait_until(stable([a, b], 6, 3), SESSION_MS / 1000 + 15, "reassignment after expiry")
        assert time.monotonic() - killed_at >= SESSION_MS / 1000 - 1.5  # it was an expiry
        # Leave: b closes (LeaveGroup); a gets everything well within b's session timeout.
        left_at = time.monotonic()
        b.stop()
        wait_until(stable([a], 6, 6), LEAVER_SESSION_MS / 1000 - 10, "a owning all 6 partitions")
        assert time.monotonic() - left_at < LEAVER_SESSION_MS / 1000   # not an expiry
        values = [f"x{i}" for i in range(60)]
        produce(bs, "moving", values, 6)
        wait_until(lambda: set(values) <= {v.decode() for v in a.values()}, 20,
                   "a reads new messages of all partitions")
    finally:
        if victim.poll() is None:
            victim.kill()
        a.stop()
        if b.thread.is_alive():
            b.stop()


VICTIM = """
from confluent_kafka import Consumer
c = Consumer({{"bootstrap.servers": "{bs}", "group.id": "g-moving",
              "session.timeout.ms": {session}, "heartbeat.interval.ms": 500}})
c.subscribe(["moving"])
while True:
    c.poll(0.2)
"""


def test_cooperative_sticky_members_share_partitions(gbroker: BrokerProcess) -> None:
    bs = gbroker.bootstrap
    create_topic(bs, "coop", 4)
    strategy = {"partition.assignment.strategy": "cooperative-sticky"}
    a = GroupConsumer(bs, "g-coop", "coop", **strategy).start()
    try:
        wait_until(stable([a], 4, 4), 30, "a alone owns all 4 partitions")
        b = GroupConsumer(bs, "g-coop", "coop", **strategy).start()
        try:
            # Incremental rebalance: a gives up 2 partitions, keeps the other 2.
            wait_until(stable([a, b], 4, 2), 30, "2 partitions each")
            values = [f"c{i}" for i in range(80)]
            produce(bs, "coop", values, 4)
            wait_until(lambda: len(a.values()) + len(b.values()) >= 80, 30, "80 messages")
            assert sorted(v.decode() for v in a.values() + b.values()) == sorted(values)
        finally:
            b.stop()
    finally:
        a.stop()


def test_two_groups_each_receive_everything(gbroker: BrokerProcess) -> None:
    bs = gbroker.bootstrap
    create_topic(bs, "fanout", 3)
    values = [f"f{i}" for i in range(90)]
    produce(bs, "fanout", values, 3)
    g1 = GroupConsumer(bs, "g-one", "fanout").start()
    g2 = GroupConsumer(bs, "g-two", "fanout").start()
    try:
        for c in (g1, g2):
            wait_until(lambda c=c: len(c.values()) >= 90, 30, "all messages in each group")
        assert sorted(v.decode() for v in g1.values()) == sorted(values)
        assert sorted(v.decode() for v in g2.values()) == sorted(values)
    finally:
        g1.stop()
        g2.stop()


def committed(bs: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": bs, "group.id": group})
    try:
        tps = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
        return {tp.partition: tp.offset for tp in tps}
    finally:
        c.close()


def test_restart_resumes_from_committed_offsets(broker_factory: Callable[..., BrokerProcess]
                                               ) -> None:
    broker = broker_factory(config=GROUP_CONFIG)
    bs = broker.bootstrap
    create_topic(bs, "durable", 2)
    produce(bs, "durable", [f"a{i}" for i in range(40)], 2)
    c = Consumer({"bootstrap.servers": bs, "group.id": "g-durable", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "session.timeout.ms": SESSION_MS})
    c.subscribe(["durable"])
    seen: list[Any] = []

    def read_one() -> bool:
        m = c.poll(0.5)
        if m is not None and not m.error():
            seen.append(m)
        return len(seen) >= 40
    wait_until(read_one, 30, "the first 40 messages", interval=0)
    c.commit(asynchronous=False)  # manual commit
    c.close()
    assert committed(bs, "g-durable", "durable", 2) == {0: 20, 1: 20}
    broker.restart()
    assert committed(bs, "g-durable", "durable", 2) == {0: 20, 1: 20}
    produce(bs, "durable", [f"b{i}" for i in range(10)], 2)
    again = GroupConsumer(bs, "g-durable", "durable").start()
    try:
        wait_until(lambda: len(again.values()) >= 10, 30, "the 10 new messages")
        time.sleep(1)
        assert sorted(v.decode() for v in again.values()) == sorted(f"b{i}" for i in range(10))
    finally:
        again.stop()


def test_static_member_restart_keeps_assignment_without_rebalance(
        gbroker: BrokerProcess) -> None:
    bs = gbroker.bootstrap
    create_topic(bs, "static", 4)
    a = GroupConsumer(bs, "g-static", "static", **{"group.instance.id": "inst-a"}).start()
    b = GroupConsumer(bs, "g-static", "static", **{"group.instance.id": "inst-b"}).start()
    try:
        wait_until(stable([a, b], 4, 2), 30, "2 static members with 2 partitions each")
        time.sleep(1)
        before_b, a_events = b.parts(), a.assign_events
        b.stop()  # a static member's close sends no LeaveGroup
        b2 = GroupConsumer(bs, "g-static", "static", **{"group.instance.id": "inst-b"}).start()
        try:
            wait_until(lambda: b2.parts() == before_b, 15, "restarted member gets its partitions")
            time.sleep(SESSION_MS / 1000 + 1)  # past the old session: still no rebalance
            assert a.assign_events == a_events, "the other member saw a rebalance"
            assert b2.parts() == before_b and a.parts() | b2.parts() == {0, 1, 2, 3}
        finally:
            b2.stop()
    finally:
        a.stop()


def test_running_group_survives_broker_restart_without_rebalance(
        broker_factory: Callable[..., BrokerProcess]) -> None:
    """The group's generation and assignment are reloaded; members just keep heartbeating."""
    broker = broker_factory(config=GROUP_CONFIG)
    bs = broker.bootstrap
    create_topic(bs, "through", 4)
    # A session longer than the restart: librdkafka itself rejoins when it has not
    # reached its coordinator for a whole session timeout.
    members = [GroupConsumer(bs, "g-through", "through", **{"session.timeout.ms": 30000})
               .start() for _ in range(2)]
    try:
        wait_until(stable(members, 4, 2), 30, "2 partitions each")
        time.sleep(1)
        events = [m.assign_events for m in members]
        parts = [m.parts() for m in members]
        broker.restart()
        values = [f"r{i}" for i in range(40)]
        produce(bs, "through", values, 4)
        wait_until(lambda: set(values) <= {v.decode() for m in members for v in m.values()},
                   30, "messages produced after the restart")
        assert [m.assign_events for m in members] == events, "members were rebalanced"
        assert [m.parts() for m in members] == parts
    finally:
        for m in members:
            m.stop()
