"""tcp_progress.bytes_acked on real loopback sockets: it follows what the peer's kernel
acknowledged, stops when the peer's window is shut, and is None where nothing says."""
from __future__ import annotations

import socket

from rillet.tcp_progress import bytes_acked
from tests.polling import wait_until


def _pair(receive_buffer: int | None = None) -> tuple[socket.socket, socket.socket]:
    server = socket.create_server(("127.0.0.1", 0))
    client = socket.socket()
    if receive_buffer is not None:
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    client.connect(server.getsockname())
    sender, _ = server.accept()
    server.close()
    return sender, client


def test_the_bytes_a_peer_acknowledged_and_where_they_stop() -> None:
    sender, receiver = _pair(receive_buffer=16 * 1024)
    try:
        assert bytes_acked(sender) == 0
        sender.sendall(b"x" * 1000)
        wait_until(lambda: bytes_acked(sender) == 1000, 10, "the 1000 bytes acknowledged")
        # The receiver reads nothing: its window shuts, and the count stops short of what
        # the sender's kernel took (its send buffer's worth and more).
        sender.setblocking(False)
        sent = 1000
        try:
            while True:
                sent += sender.send(b"y" * 65536)
        except BlockingIOError:
            pass
        stuck = bytes_acked(sender)
        assert stuck is not None and 1000 <= stuck < sent
        # Reading moves it on.
        receiver.recv(1 << 20)
        wait_until(lambda: (bytes_acked(sender) or 0) > stuck, 10, "the count to move on")
    finally:
        sender.close()
        receiver.close()


def test_none_where_the_kernel_does_not_say() -> None:
    sender, receiver = _pair()
    sender.close()
    receiver.close()
    assert bytes_acked(sender) is None   # closed
    assert bytes_acked(None) is None     # a transport without a socket
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        assert bytes_acked(udp) is None
    finally:
        udp.close()
