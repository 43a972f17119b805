"""Connections from this node's transaction coordinator side to other brokers.

One connection per broker on the inter-broker listener (its address from the metadata image),
one set for the marker writer (WriteTxnMarkers) and one for the partition verifier
(AddPartitionsToTxn v4+ verify-only, KIP-890): each connection is used by one request at a
time (BrokerConnection's lock).
A request that fails drops the broker's connection, so the next one reconnects.

Thread safety: event loop only; owned by the TransactionCoordinator.
"""
from __future__ import annotations

import asyncio
import ssl
from typing import Any

from ..client.connection import BrokerConnection, KafkaClientError
from ..coordinator.host import CoordinatorHost
from ..protocol import errors

REQUEST_TIMEOUT_S = 35.0
# What a failed request to another broker raises (its callers map it to a retriable code).
LINK_ERRORS = (KafkaClientError, OSError, asyncio.TimeoutError)


class BrokerLinks:
    """The connections to other brokers (see the module doc)."""

    def __init__(self, host: CoordinatorHost, ssl_context: ssl.SSLContext | None) -> None:
        self.host = host
        self._ssl = ssl_context   # towards the brokers' inter-broker listener
        self._connections: dict[int, BrokerConnection] = {}

    def reachable(self, node_id: int) -> bool:
        image = self.host.image
        return node_id in image.brokers and node_id in image.live_broker_ids

    async def request(self, node_id: int, api_key: int, version: int,
                      body: dict[str, Any]) -> Any:
        """Send one request to broker ``node_id``; raises BrokerNotAvailable when it is not
        registered and alive, one of LINK_ERRORS when the exchange fails."""
        broker = self.host.image.brokers.get(node_id)
        if broker is None or not self.reachable(node_id):
            raise errors.BrokerNotAvailable(f"broker {node_id} is not alive")
        conn = self._connections.get(node_id)
        if conn is None or (conn.host, conn.port) != (broker.host, broker.port):
            conn = self._connections[node_id] = BrokerConnection(
                broker.host, broker.port, client_id=f"txn-coordinator-{self.host.node_id}",
                timeout=REQUEST_TIMEOUT_S, ssl_context=self._ssl)
        try:
            response = await conn.request(api_key, version, body)
        except LINK_ERRORS:
            if self._connections.get(node_id) is conn:
                del self._connections[node_id]
            await conn.close()
            raise
        if self._connections.get(node_id) is not conn:
            # Dropped by another request's failure while this one waited on its lock, then
            # reconnected by this one: nobody else holds it now, so it is closed here.
            await conn.close()
        return response

    async def close(self) -> None:
        for conn in self._connections.values():
            await conn.close()
        self._connections.clear()
