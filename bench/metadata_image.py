#!/usr/bin/env python3
"""Cost of one metadata change as the cluster grows: apply it, compute its delta, publish.

Every broker turns each committed controller step into a new immutable image and one
MetadataDelta (metadata/delta.py), handed to every publisher. This measures, against
images of 100, 1,000 and 10,000 topics (--partitions each), the mean CPU time of one step:
- "leader change": one PARTITION_CHANGE moving a partition's leader to this node;
- "topic creation": one new topic of --partitions partitions;
each applied with metadata.delta.apply_batches and published to the pure publishers
(metrics' ISR counters, the replication throttles), and the part of it that is the
delta and its publication (the same steps applied alone, subtracted). Beside it,
"image walk": what each publisher paid per step before the delta, visiting every topic
of the new image (an identity check each), timed on today's images (PersistentMap
lookups are Python calls: about 3x the walk over the dicts images held before; at
10,000 topics that walk took ~1.1 ms). Every step column stays flat as the image
grows (its big maps are PersistentMaps: a change copies what it touches); the walk
grows with the topic count. Bounded: --changes steps per cell, in memory, no I/O.

    .venv/bin/python bench/metadata_image.py [--changes N] [--partitions P]
"""
from __future__ import annotations

import argparse
import time
import uuid
from types import SimpleNamespace
from typing import Any, Callable

from rillet.defs.broker_config import BrokerConfig
from rillet.metadata import records as r
from rillet.metadata.delta import MetadataDelta, apply_batches
from rillet.metadata.image import MetadataImage, build_batches, replay
from rillet.metrics import BrokerMetrics
from rillet.replication.throttle import ReplicationThrottles

NODE = 1
SIZES = (100, 1_000, 10_000)


def create_records(name: str, partitions: int) -> list[dict[str, Any]]:
    tid = str(uuid.uuid4())
    return [{"type": r.TOPIC, "name": name, "topic_id": tid}] + [
        {"type": r.PARTITION, "topic_id": tid, "partition": p, "replicas": [1, 2, 3],
         "isr": [1, 2, 3], "leader": 2, "leader_epoch": 0} for p in range(partitions)]


def build(topics: int, partitions: int) -> MetadataImage:
    records = [{"type": r.REGISTER_BROKER, "node_id": n, "host": "h", "port": 9092}
               for n in (1, 2, 3)]
    for i in range(topics):
        records += create_records(f"t{i}", partitions)
    return replay(MetadataImage(cluster_id="bench"), records, 0)


def publishers() -> list[Callable[[MetadataDelta, MetadataImage], None]]:
    metrics = BrokerMetrics(SimpleNamespace(node_id=NODE, lifecycle=object(), controller=None))
    throttles = ReplicationThrottles(NODE)
    config = BrokerConfig.load(overrides={"node.id": str(NODE)})
    return [metrics.on_metadata_update, lambda delta, image: throttles.update(delta, config)]


def step(image: MetadataImage, records: list[dict[str, Any]],
         listeners: list[Callable[[MetadataDelta, MetadataImage], None]]) -> MetadataImage:
    delta, image = apply_batches(image, [(image.offset + 1, records)], NODE)
    for listener in listeners:
        listener(delta, image)
    return image


def leader_change(image: MetadataImage, i: int, topics: int,
                  partitions: int) -> list[dict[str, Any]]:
    """A leader move of a partition spread over the image (7919: a prime stride)."""
    topic = image.topics[f"t{(i * 7919) % topics}"]
    part = topic.partitions[i % partitions]
    return [{"type": r.PARTITION_CHANGE, "topic_id": str(topic.topic_id),
             "partition": part.partition, "leader": 1 if part.leader != 1 else 2,
             "leader_epoch": part.leader_epoch + 1}]


def mean_ms(run: Callable[[int], None], changes: int) -> float:
    """Mean CPU time of one run: process time, so other work on a shared machine does not
    count (this is all in-memory Python, one thread)."""
    start = time.process_time()
    for i in range(changes):
        run(i)
    return 1000 * (time.process_time() - start) / changes


def measure(topics: int, partitions: int, changes: int) -> dict[str, float]:
    """Mean ms of one leader change and one topic creation: the image apply alone, and
    the apply with its delta computed and published; and one old-style image walk."""
    base = build(topics, partitions)
    listeners = publishers()
    changes_of: dict[str, Callable[[MetadataImage, int], list[dict[str, Any]]]] = {
        "leader": lambda image, i: leader_change(image, i, topics, partitions),
        "create": lambda image, i: create_records(f"new{i}", partitions)}
    out: dict[str, float] = {}
    for kind, records_for in changes_of.items():
        # The same steps twice from the same image: applied only, then applied + published.
        steps = []
        image = base
        for i in range(changes):
            records = records_for(image, i)
            steps.append(records)
            image = replay(image, records, image.offset + 1)
        state = {"image": base}

        def apply_only(i: int) -> None:
            image = state["image"]
            state["image"] = build_batches(image, [(image.offset + 1, steps[i])])[1]

        def apply_and_publish(i: int) -> None:
            state["image"] = step(state["image"], steps[i], listeners)

        out[f"{kind} apply"] = mean_ms(apply_only, changes)
        state["image"] = base
        out[f"{kind} total"] = mean_ms(apply_and_publish, changes)
    changed = step(base, leader_change(base, 0, topics, partitions), [])

    def walk(i: int) -> None:   # one publisher's pass per step before the delta
        sum(1 for name, t in changed.topics.items() if base.topics.get(name) is not t)

    out["walk"] = mean_ms(walk, changes)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--changes", type=int, default=300, help="steps per measurement")
    ap.add_argument("--partitions", type=int, default=3, help="partitions per topic")
    args = ap.parse_args()
    print("CPU ms per step; 'delta+publish' = (apply, delta computed, published) - apply")
    header = (f"{'topics':>7} {'partitions':>10} | {'leader change':>13} {'delta+publish':>13} | "
              f"{'topic creation':>14} {'delta+publish':>13} | {'image walk':>10}")
    print(header)
    print("-" * len(header))
    for topics in SIZES:
        m = measure(topics, args.partitions, args.changes)
        print(f"{topics:>7,} {topics * args.partitions:>10,} | {m['leader total']:>13.3f} "
              f"{m['leader total'] - m['leader apply']:>13.3f} | {m['create total']:>14.3f} "
              f"{m['create total'] - m['create apply']:>13.3f} | {m['walk']:>10.3f}")


if __name__ == "__main__":
    main()
