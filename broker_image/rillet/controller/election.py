"""Leader election when brokers come and go: pure functions from an image to records.

A fenced (or shutting down) broker leaves the ISR of every partition where
others remain, and hands leadership to the next in-sync replica that is
alive, with a new leader epoch so clients and followers notice. A partition
whose every in-sync replica is gone keeps its ISR and gets no leader (-1)
until one of them returns, unless unclean election is allowed, which takes
any live replica (and may lose acknowledged writes, as in Kafka). A replica on a failed
log dir (its directory LOST, replica_dirs.py) is never chosen.
"""
from __future__ import annotations

from typing import Any, Callable

from ..metadata import records as mrec
from ..metadata.image import MetadataImage, PartitionInfo

NO_LEADER = -1


def partition_change(part: PartitionInfo, **fields: Any) -> dict[str, Any]:
    rec: dict[str, Any] = {"type": mrec.PARTITION_CHANGE, "topic_id": str(part.topic_id),
                           "partition": part.partition}
    for key, value in fields.items():
        rec[key] = list(value) if isinstance(value, tuple) else value
    return rec


def _first_live(part: PartitionInfo, candidates: tuple[int, ...], live: frozenset[int]) -> int:
    """The first of `candidates` that is live and whose replica of `part` is not on a
    failed log dir."""
    return next((b for b in candidates if b in live and not part.on_lost_dir(b)), NO_LEADER)


def on_broker_leaving(image: MetadataImage, node_id: int,
                      unclean: Callable[[str], bool]) -> list[dict[str, Any]]:
    """Records that move every leadership and ISR slot off `node_id`."""
    live = image.live_broker_ids - {node_id}
    out = []
    for topic in image.topics.values():
        for part in topic.partitions.values():
            rec = leave_partition(part, node_id, live, lambda: unclean(topic.name))
            if rec is not None:
                out.append(rec)
    return out


def leave_partition(part: PartitionInfo, node_id: int, live: frozenset[int],
                    unclean: Callable[[], bool]) -> dict[str, Any] | None:
    """The record that moves `part`'s leadership and ISR slot off `node_id` (None: nothing
    to move); `live`: who may lead instead."""
    if node_id not in part.isr and part.leader != node_id:
        return None
    isr = tuple(b for b in part.isr if b != node_id) or part.isr
    leader = part.leader
    if leader == node_id or leader == NO_LEADER:
        leader = _first_live(part, isr, live)
        if leader == NO_LEADER and unclean():
            leader = _first_live(part, part.replicas, live)
            if leader != NO_LEADER:
                isr = (leader,)
    if (leader, isr) == (part.leader, part.isr):
        return None
    epoch = part.leader_epoch + 1 if leader != part.leader else part.leader_epoch
    return partition_change(part, leader=leader, isr=isr, leader_epoch=epoch)


def on_broker_returning(image: MetadataImage, node_id: int) -> list[dict[str, Any]]:
    """Records that give leaderless partitions back to `node_id` if it is in their ISR."""
    out = []
    for topic in image.topics.values():
        for part in topic.partitions.values():
            if part.leader == NO_LEADER and node_id in part.isr \
                    and not part.on_lost_dir(node_id):
                out.append(partition_change(part, leader=node_id, leader_epoch=part.leader_epoch + 1))
    return out
