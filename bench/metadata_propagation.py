"""How long a new topic or ACL takes to reach every node of a local three-node cluster.

    .venv/bin/python bench/metadata_propagation.py [--rounds 100] [--poll-ms 1]
                                                   [--set key=value ...]

Each round creates one topic (CreateTopics, RF 3, 4 partitions) and one DENY ACL (CreateAcls)
through a node chosen in turn, and measures from the moment the response arrives until every
node serves it: a Metadata answer naming the topic with a leader for each partition, and a
DescribeAcls answer naming the binding (both read the answering node's own metadata image,
as produce, fetch and every authorization check do). Each node is polled on its own
connection, a request every --poll-ms (default 1) after the previous answer, so a figure is
accurate to about that plus one round trip on loopback. The authorizer is on, with
User:ANONYMOUS a super user, so the PLAINTEXT connections may create and describe ACLs.

Where the time goes (issue 33, measured on 2 shared cores at load average 12-26): a node
serves a new topic once it has applied the commit, and applying it is mostly creating the
node's logs for the topic's partitions, about 7 ms of CPU per node for 4 partitions; the rest
of that apply's wall time, median 54 of 62 ms and up to 275 of 285 ms, was the node's thread
waiting in the kernel's run queue for a CPU (its /proc schedstat), not I/O. A py-spy profile
of a follower during a run: replica fetching of the partitions created so far about a fifth
of its CPU, creating logs a tenth, the Raft quorum a tenth, answering the polls under 1%. On a
loaded machine the tail is the scheduler's; run it on an idle one to see the code's.

Prints p50, p90, p99 and max per kind, in milliseconds; 0 means every node already served the
change when its creator answered (what an acknowledgement after commit everywhere gives).
"""
from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Awaitable, Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rillet.client.admin import AdminClient  # noqa: E402
from tests.cluster import LocalCluster  # noqa: E402

METADATA, CREATE_TOPICS, DESCRIBE_ACLS, CREATE_ACLS = 3, 19, 29, 30
PARTITIONS = 4
BOUND_S = 10.0
STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


async def _topic_served(admin: AdminClient, name: str) -> bool:
    resp = await admin.request(METADATA, 7, {"topics": [{"name": name}],
                                             "allow_auto_topic_creation": False})
    t = resp.topics[0]
    return t.error_code == 0 and len(t.partitions) == PARTITIONS \
        and all(p.leader_id >= 0 for p in t.partitions)


def _acl_filter(topic: str) -> dict[str, Any]:
    return {"resource_type_filter": 2, "resource_name_filter": topic,
            "pattern_type_filter": 3, "principal_filter": "User:bench-denied",
            "host_filter": "*", "operation": 3, "permission_type": 2}


async def _acl_served(admin: AdminClient, topic: str) -> bool:
    resp = await admin.request(DESCRIBE_ACLS, 2, _acl_filter(topic))
    return resp.error_code == 0 and len(resp.resources) == 1


async def _create_topic(admin: AdminClient, name: str) -> None:
    resp = await admin.request(CREATE_TOPICS, 5, {
        "topics": [{"name": name, "num_partitions": PARTITIONS, "replication_factor": 3,
                    "assignments": [], "configs": []}],
        "timeout": 30000, "validate_only": False})
    if resp.topics[0].error_code:
        raise RuntimeError(f"CreateTopics {name}: error {resp.topics[0].error_code}")


async def _create_acl(admin: AdminClient, topic: str) -> None:
    resp = await admin.request(CREATE_ACLS, 2, {"creations": [{
        "resource_type": 2, "resource_name": topic, "resource_pattern_type": 3,
        "principal": "User:bench-denied", "host": "*", "operation": 3,
        "permission_type": 2}]})
    if resp.results[0].error_code:
        raise RuntimeError(f"CreateAcls {topic}: error {resp.results[0].error_code}")


async def _until_everywhere(admins: list[AdminClient],
                            served: Callable[[AdminClient], Awaitable[bool]],
                            poll_gap_s: float) -> float:
    """Seconds until every node answers served(); each node polled back to back."""
    start = time.monotonic()

    async def one(admin: AdminClient) -> float:
        while not await served(admin):
            if time.monotonic() - start > BOUND_S:
                raise TimeoutError(f"not served within {BOUND_S}s")
            # Not back to back: a poll loop flat out on 2 cores takes the CPU the node
            # being measured needs to apply the change.
            await asyncio.sleep(poll_gap_s)
        return time.monotonic() - start
    return max(await asyncio.gather(*(one(a) for a in admins)))


async def _three_brokers(admin: AdminClient) -> bool:
    try:
        return len((await admin.describe_cluster()).brokers) == 3
    except Exception:  # still starting: ask again
        return False


async def _rounds(addresses: list[str], rounds: int,
                  poll_gap_s: float) -> dict[str, list[float]]:
    admins = [AdminClient(a, timeout=10) for a in addresses]
    out: dict[str, list[float]] = {"topic": [], "acl": []}
    try:
        # Placement of RF 3 needs every broker registered and unfenced first.
        deadline = time.monotonic() + 60
        while not all([await _three_brokers(a) for a in admins]):
            if time.monotonic() > deadline:
                raise TimeoutError("three brokers never registered")
            await asyncio.sleep(0.1)
        for r in range(rounds):
            via = admins[r % len(admins)]
            name = f"bench-{uuid.uuid4().hex[:10]}"
            await _create_topic(via, name)
            out["topic"].append(await _until_everywhere(
                admins, lambda a: _topic_served(a, name), poll_gap_s))
            await _create_acl(via, name)
            out["acl"].append(await _until_everywhere(
                admins, lambda a: _acl_served(a, name), poll_gap_s))
    finally:
        for a in admins:
            await a.close()
    return out


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--poll-ms", type=float, default=1.0,
                        help="gap between one node's answer and the next poll of it")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    extra = {"authorizer.class.name": STANDARD, "super.users": "User:ANONYMOUS",
             "num.partitions": str(PARTITIONS), **dict(s.split("=", 1) for s in args.set)}
    with tempfile.TemporaryDirectory() as tmp, \
            LocalCluster(Path(tmp), nodes=3, proxied=False, extra_config=extra) as cluster:
        cluster.start()
        addresses = [s.client_address for s in cluster.specs]
        results = asyncio.run(_rounds(addresses, args.rounds, args.poll_ms / 1000))
    print(f"\nlocal 3-node rillet cluster, {args.rounds} rounds, polled every "
          f"{args.poll_ms:g} ms: from a CreateTopics / CreateAcls response to every node "
          f"serving the change (load average {os.getloadavg()[0]:.1f})\n")
    print(f"{'change':<28}{'p50 ms':>10}{'p90 ms':>10}{'p99 ms':>10}{'max ms':>10}"
          f"{'mean ms':>10}")
    for kind, label in (("topic", "topic (RF 3, 4 partitions)"), ("acl", "DENY ACL")):
        v = [x * 1000 for x in results[kind]]
        print(f"{label:<28}{_pct(v, .5):>10.1f}{_pct(v, .9):>10.1f}{_pct(v, .99):>10.1f}"
              f"{max(v):>10.1f}"
              f"{statistics.mean(v):>10.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
