"""Writing one transaction's COMMIT or ABORT markers to every partition it touched.

Kafka's TransactionMarkerChannelManager, reduced to what rillet needs: the partitions are
grouped by their current leader; those this node leads go through
replication/txn_markers.write_markers (the path the WriteTxnMarkers API uses too), the others
get one WriteTxnMarkers request per leader on the inter-broker listener (links.py). A partition that
answers a retriable error (its leader moved, too few in-sync replicas, a broker down) is
tried again after a pause with fresh metadata, until every partition has its marker or the
coordinator is no longer this transaction's coordinator (then the new one finishes it). A
partition whose topic was deleted needs no marker. A partition that refuses the marker
because a newer producer epoch or coordinator epoch already ended the transaction there
has nothing left to end either; it is logged and counted as done, so one such partition
cannot wedge the transaction forever.

Thread safety: event loop only. The connections to other brokers are the coordinator's
BrokerLinks, shared with the partition verifier.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Callable

from ..coordinator.host import CoordinatorHost
from ..protocol import errors
from ..replication.txn_markers import write_markers
from ..txn_marker import TxnMarker
from .links import LINK_ERRORS, BrokerLinks

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
WRITE_TXN_MARKERS = 27
RETRY_BACKOFF_S = 0.1
MAX_BACKOFF_S = 2.0
# Refusals meaning the transaction is already over on that partition.
_SETTLED = {errors.InvalidProducerEpoch.code, errors.TransactionCoordinatorFenced.code}


class MarkerWriter:
    """Sends markers for the transaction coordinator (see the module doc).

    ``on_written(marker, partitions)``: called for the partitions of this node that took a
    marker (the group coordinator settles transactional offset commits with it)."""

    def __init__(self, host: CoordinatorHost,
                 on_written: Callable[[TxnMarker, list[TopicPartition]], None],
                 links: BrokerLinks) -> None:
        self.host = host
        self._on_written = on_written
        self._links = links

    async def write(self, marker: TxnMarker, partitions: frozenset[TopicPartition],
                    still_coordinator: Callable[[], bool]) -> bool:
        """True once every partition has the marker; False when this node stopped being the
        coordinator first."""
        remaining = set(partitions)
        backoff = RETRY_BACKOFF_S
        while True:
            remaining = {tp for tp in remaining if self._exists(tp)}
            if not remaining:
                return True
            if not still_coordinator():
                return False
            by_leader: dict[int, list[TopicPartition]] = {}
            for tp in sorted(remaining):
                part = self.host.image.partition(*tp)
                leader = part.leader if part is not None else -1
                by_leader.setdefault(leader, []).append(tp)
            results = await asyncio.gather(*(self._send(leader, marker, tps)
                                             for leader, tps in by_leader.items()))
            for codes in results:
                for tp, code in codes.items():
                    if code == 0 or code in _SETTLED:
                        if code:
                            log.warning("%s-%d refused the marker of producer %d epoch %d "
                                        "(error %d): already ended there", tp[0], tp[1],
                                        marker.producer_id, marker.producer_epoch, code)
                        remaining.discard(tp)
            if not remaining:
                return True
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF_S)

    def _exists(self, tp: TopicPartition) -> bool:
        return self.host.image.partition(*tp) is not None

    async def _send(self, leader: int, marker: TxnMarker,
                    tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        if leader == self.host.node_id:
            codes = await write_markers(self.host.replication, marker, tps)
            written = [tp for tp in tps if codes.get(tp) == 0]
            if written:
                self._on_written(marker, written)
            return codes
        if not self._links.reachable(leader):
            return {tp: errors.LeaderNotAvailable.code for tp in tps}
        try:
            return await self._remote(leader, marker, tps)
        except LINK_ERRORS as exc:
            log.info("WriteTxnMarkers to broker %d failed: %s", leader, exc)
            return {tp: errors.BrokerNotAvailable.code for tp in tps}

    async def _remote(self, leader: int, marker: TxnMarker,
                      tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        by_topic: dict[str, list[int]] = {}
        for topic, p in tps:
            by_topic.setdefault(topic, []).append(p)
        response = await self._links.request(leader, WRITE_TXN_MARKERS, 1, {"markers": [{
            "producer_id": marker.producer_id, "producer_epoch": marker.producer_epoch,
            "transaction_result": marker.commit, "coordinator_epoch": marker.coordinator_epoch,
            "topics": [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()]}]})
        codes = {tp: errors.UnknownServerError.code for tp in tps}
        for answer in response.markers:
            for t in answer.topics:
                for p in t.partitions:
                    codes[(t.name, p.partition_index)] = int(p.error_code)
        return codes
