"""Whether a Cluster may shrink: pure checks before any replica moves.

Broker ids are pod ordinals, and a scale-down removes the highest ones. It is refused when the
brokers that stay could not hold some topic's replication factor, could not meet a topic's
min.insync.replicas (acks=all producers would be refused for good), or when a controller voter
would go (the quorum's voters are fixed).
"""
from __future__ import annotations

from typing import Mapping


def removed_brokers(current: int, new: int) -> list[int]:
    return list(range(new, current))


def check_scale_down(current: int, new: int, topic_rf: Mapping[str, int],
                     topic_min_isr: Mapping[str, int], voters: int | None = None) -> str | None:
    """None when `current` -> `new` brokers is safe; otherwise the reason, naming what
    blocks it."""
    if new >= current:
        return None
    if new < 1:
        return f"a cluster needs at least one broker, not {new}"
    voters = min(3, current) if voters is None else voters
    reasons = []
    gone_voters = [b for b in removed_brokers(current, new) if b < voters]
    if gone_voters:
        reasons.append(f"would remove controller voter{'s' if len(gone_voters) > 1 else ''} "
                       f"{', '.join(map(str, gone_voters))} (voters are "
                       f"{', '.join(map(str, range(voters)))})")
    too_wide = sorted((rf, t) for t, rf in topic_rf.items() if rf > new)
    if too_wide:
        rf, topic = too_wide[-1]
        more = f" and {len(too_wide) - 1} more" if len(too_wide) > 1 else ""
        reasons.append(f"topic {topic}{more} has replication factor {rf}; {new} brokers "
                       f"cannot hold it")
    strict = sorted((m, t) for t, m in topic_min_isr.items() if m > new)
    if strict:
        m, topic = strict[-1]
        reasons.append(f"topic {topic} has min.insync.replicas {m}; with {new} brokers "
                       f"acks=all writes to it would fail")
    return "; ".join(reasons) or None
