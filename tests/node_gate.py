"""Per-node loopback addresses and the gates in front of every node's listeners, so that any
link between two nodes can fail on its own while clients still reach every node.

Node i of a cluster lives on its own address, 127.0.0.(i+1) (`node_address`): its listeners
bind there on private ports, and it opens every connection from there (the broker setting
outbound.source.address). In front of each listener a `NodeGate` listens on the same address
and forwards to it. The gate knows the other nodes by their addresses, so a connection it
accepts from 127.0.0.(j+1) is node j's and goes over the Links of that pair in the
`LinkTable` (j -> i for what j sends, i -> j for the answers); anything else (127.0.0.1, a
client) goes straight through. Nodes advertise their gates, and name their peers' controller
gates as the voters, so quorum, replication, forwarding and registration traffic all pass a
gate, each direction of each pair on its own Link (tests/tcp_proxy.py).
"""
from __future__ import annotations

import socket
from typing import Mapping

from tests.tcp_proxy import Link, LinkedProxy, LinkMode, Tap

# Loopback (127.0.0.0/8 is all local on Linux); node i on FIRST_HOST + i, never 127.0.0.1,
# which clients keep.
FIRST_HOST = 1


def node_address(node_id: int) -> str:
    host = FIRST_HOST + node_id
    if not 2 <= host <= 254:
        raise ValueError(f"node {node_id} has no loopback address of its own (ids 1..253)")
    return f"127.0.0.{host}"


class LinkTable:
    """Every directed link between the nodes, and who is at which address."""

    def __init__(self, node_ids: list[int]) -> None:
        self._by_address = {node_address(i): i for i in node_ids}
        self._links = {(a, b): Link(f"{a}->{b}") for a in node_ids for b in node_ids if a != b}

    def node_at(self, host: str) -> int | None:
        return self._by_address.get(host)

    def link(self, a: int, b: int) -> Link:
        """What a sends toward b."""
        if (a, b) not in self._links:
            raise KeyError(f"no link {a} -> {b}")
        return self._links[(a, b)]

    def links(self) -> Mapping[tuple[int, int], Link]:
        return dict(self._links)

    def cut(self) -> list[tuple[int, int]]:
        """The directed links not open right now (cut either way)."""
        return sorted(k for k, link in self._links.items() if link.mode is not LinkMode.OPEN)


class NodeGate(LinkedProxy):
    """The front of one listener of one node; see the module docstring.

    `tap`, when given, sees the bytes other nodes send through this gate, labelled
    "<from>-><to>#<n>"."""

    def __init__(self, node_id: int, target_port: int, table: LinkTable,
                 tap: Tap | None = None) -> None:
        self.node_id = node_id
        self.table = table
        # Clients (and the node itself) are never cut: their own always-open link.
        self._clients = Link(f"clients->{node_id}")
        host = node_address(node_id)
        super().__init__(host, target_port, host=host, tap=tap)

    def _links(self) -> list[Link]:
        return [self._clients, *self.table.links().values()]

    def _serve(self, client: socket.socket) -> None:
        try:
            peer = self.table.node_at(client.getpeername()[0])
        except OSError:  # gone already
            return
        if peer is None or peer == self.node_id:
            self._carry(client, self._clients, self._clients, self._clients.name, tapped=False)
            return
        forward = self.table.link(peer, self.node_id)
        backward = self.table.link(self.node_id, peer)
        self._carry(client, forward, backward, forward.name, tapped=True)
