#!/usr/bin/env python3
"""Authorizer cost of one all-topics Metadata request: DESCRIBE checked on every topic.

Each of T topics has one literal binding (alternating principals), beside 50 prefixed
bindings and one wildcard DENY. The table compares a linear scan of every binding per check
(`acl.allowed`, what the authorizer did before the image indexed its ACLs) with the image's
AclIndex, checks both give the same answers, and shows what building the index costs (paid
once per ACL change, not per request). In memory, no I/O, bounded by --topics.

    .venv/bin/python bench/acl_checks.py [--topics 200 2000 5000]
"""
from __future__ import annotations

import argparse
import time

from rillet.defs.acl import AclBinding
from rillet.security.acl import AclIndex, allowed


def bindings(topics: list[str]) -> frozenset[AclBinding]:
    out = [AclBinding("TOPIC", t, "LITERAL", "User:alice" if i % 2 else "User:bob", "*",
                      "READ", "ALLOW") for i, t in enumerate(topics)]
    out += [AclBinding("TOPIC", f"team{j}-", "PREFIXED", "User:carol", "*", "WRITE", "ALLOW")
            for j in range(50)]
    out.append(AclBinding("TOPIC", "*", "LITERAL", "User:*", "*", "DESCRIBE", "DENY"))
    return frozenset(out)


def ms(f) -> tuple[float, object]:
    t0 = time.perf_counter()
    result = f()
    return (time.perf_counter() - t0) * 1e3, result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topics", type=int, nargs="+", default=[200, 2000, 5000])
    args = ap.parse_args()
    print(f"{'topics':>7} {'ACLs':>6} {'scan ms':>9} {'index ms':>9} {'speed-up':>9} "
          f"{'build ms':>9}")
    for n in args.topics:
        topics = [f"topic-{i:05d}" for i in range(n)]
        acls = bindings(topics)
        build, index = ms(lambda: AclIndex(acls))
        scan, old = ms(lambda: [allowed(acls, "User:alice", "10.0.0.1", "DESCRIBE", "TOPIC", t)
                                for t in topics])
        fast, new = ms(lambda: [index.allowed("User:alice", "10.0.0.1", "DESCRIBE", "TOPIC", t)
                                for t in topics])
        assert old == new, "the index and the scan disagree"
        print(f"{n:>7} {len(acls):>6} {scan:>9.1f} {fast:>9.2f} {scan / fast:>8.0f}x "
              f"{build:>9.1f}")


if __name__ == "__main__":
    main()
