"""Keeping a few frames of each kind, and the table the capture ends with."""
from __future__ import annotations

from collections import defaultdict

from kio.index import api_key_map

from rillet.apis import load_all
from tests.fuzz import corpus

MAX_PER_VERSION = 12
# Frames a client sends are Kafka requests: a key this high or version this odd is not one
# (e.g. raw SASL bytes of a v0 handshake) and is dropped.
MAX_API_KEY = 100
MAX_API_VERSION = 30


def _masked(frame: bytes) -> bytes:
    """The frame without its correlation id: requests that differ only there are one."""
    return frame[:8] + b"\0\0\0\0" + frame[12:]


def plausible(frame: bytes) -> bool:
    key, version = corpus.api_of(frame)
    return 0 <= key <= MAX_API_KEY and 0 <= version <= MAX_API_VERSION


def select(frames: list[bytes], limit: int = MAX_PER_VERSION) -> list[bytes]:
    """At most `limit` distinct frames per (key, version), spread from the smallest to the
    largest, in the order they were recorded."""
    kinds: dict[tuple[int, int], list[int]] = defaultdict(list)
    seen: set[bytes] = set()
    for index, frame in enumerate(frames):
        if plausible(frame) and (masked := _masked(frame)) not in seen:
            seen.add(masked)
            kinds[corpus.api_of(frame)].append(index)
    keep: set[int] = set()
    for indexes in kinds.values():
        by_size = sorted(indexes, key=lambda i: (len(frames[i]), i))
        if len(by_size) > limit:
            step = (len(by_size) - 1) / (limit - 1)
            by_size = [by_size[round(n * step)] for n in range(limit)]
        keep.update(by_size)
    return [frames[i] for i in sorted(keep)]


def api_name(key: int) -> str:
    name = api_key_map.get(key, f"api_{key}")
    return "".join(part.capitalize() for part in name.split("_"))


def _versions(versions: set[int]) -> str:
    """1,2,3,5 -> '1-3,5'."""
    out: list[str] = []
    for v in sorted(versions):
        if out and out[-1].split("-")[-1] == str(v - 1):
            out[-1] = f"{out[-1].split('-')[0]}-{v}"
        else:
            out.append(str(v))
    return ",".join(out)


def report(failures: dict[str, list[tuple[str, str, bool]]], seconds: float) -> None:
    sources: dict[str, list[bytes]] = {}
    for listener in corpus.LISTENERS:
        for source, frames in corpus.load(listener).items():
            sources[f"{source}-{listener}" if listener == "controller" else source] = frames
    seen: dict[int, dict[str, set[int]]] = defaultdict(lambda: defaultdict(set))
    for source, frames in sources.items():
        for key, version in corpus.coverage(frames):
            seen[key][source].add(version)
    names = list(sources)
    width = max(12, *(len(n) for n in names)) + 2
    print(f"\n{'API':32}" + "".join(f"{n:>{width}}" for n in names))
    for key in sorted(seen):
        cells = "".join(f"{_versions(seen[key].get(n, set())) or '-':>{width}}"
                        for n in names)
        print(f"{f'{key:>2} {api_name(key)}':32}{cells}")
    registry = load_all()
    print("\nServed APIs no source sent:")
    for key, spec in sorted(registry.items()):
        if key not in seen:
            print(f"  {key:>2} {api_name(key)} v{spec.min_version}-{spec.max_version} "
                  f"({spec.scope} listener)")
    print("Served versions no source sent:")
    for key, spec in sorted(registry.items()):
        got = set().union(*seen[key].values()) if key in seen else set()
        missing = set(range(spec.min_version, spec.max_version + 1)) - got
        if key in seen and missing:
            print(f"  {key:>2} {api_name(key)}: v{_versions(missing)}")
    sent_unserved = sorted(k for k in seen if k not in registry)
    if sent_unserved:
        print("Sent but not served: " + ", ".join(f"{k} {api_name(k)}" for k in sent_unserved))
    for heading, wanted in (("Failures", False), ("Refusals the workload asked for", True)):
        print(f"\n{heading} (tool or call, and what it said):")
        for source, items in failures.items():
            for label, why, expected in items:
                if expected == wanted:
                    print(f"  {source}: {label}: {why}")
    total = sum(len(f) for fs in sources.values() for f in fs)
    count = sum(len(fs) for fs in sources.values())
    print(f"\ncorpus: {count} frames, {total} bytes in {corpus.CORPUS_DIR}; "
          f"capture took {seconds:.0f}s")
