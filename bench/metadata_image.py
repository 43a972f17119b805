#!/usr/bin/env python3
"""Cost of one metadata change as the cluster grows: replay() of one CreateTopics' records.

A broker replays every committed controller batch into a new immutable image, so
this cost is paid on each topic creation, config change and leader change. The
table shows the mean time of one change (a topic of --partitions partitions)
against the number of topics already in the image. Bounded: --topics creations
in total, in memory, no I/O.

    .venv/bin/python bench/metadata_image.py [--topics N] [--partitions P]
"""
from __future__ import annotations

import argparse
import time
import uuid

from rillet.metadata import records as r
from rillet.metadata.image import MetadataImage, replay


def create_records(name: str, partitions: int) -> list[dict]:
    tid = str(uuid.uuid4())
    return [{"type": r.TOPIC, "name": name, "topic_id": tid}] + [
        {"type": r.PARTITION, "topic_id": tid, "partition": p, "replicas": [1], "isr": [1],
         "leader": 1, "leader_epoch": 0} for p in range(partitions)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topics", type=int, default=2000)
    ap.add_argument("--partitions", type=int, default=10)
    args = ap.parse_args()
    image = MetadataImage(cluster_id="bench")
    marks = {args.topics // 8, args.topics // 4, args.topics // 2, args.topics}
    window: list[float] = []
    print(f"{'topics in image':>16} {'partitions':>11} {'ms per change':>14}")
    for i in range(1, args.topics + 1):
        records = create_records(f"t{i}", args.partitions)
        start = time.perf_counter()
        image = replay(image, records, i)
        window.append(time.perf_counter() - start)
        if i in marks:
            recent = window[-100:]
            print(f"{i:>16} {i * args.partitions:>11} "
                  f"{1000 * sum(recent) / len(recent):>14.3f}")


if __name__ == "__main__":
    main()
