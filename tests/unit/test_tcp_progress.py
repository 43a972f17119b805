"""tcp_progress.send_progress on real loopback sockets: it follows what the peer's kernel
acknowledged, stops with bytes waiting when the peer's window is shut, shows nothing waiting
once the peer has it all, and is None where nothing says."""
from __future__ import annotations

import socket

from rillet.tcp_progress import send_progress
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


def test_what_a_peer_took_and_where_it_stops() -> None:
    sender, receiver = _pair(receive_buffer=16 * 1024)
    try:
        assert send_progress(sender).acked == 0
        sender.sendall(b"x" * 1000)
        wait_until(lambda: send_progress(sender).acked == 1000, 10, "the 1000 bytes acked")
        assert not send_progress(sender).waiting   # the peer has all of it, unread or not
        # The receiver reads nothing: its window shuts, the count stops short of what the
        # sender's kernel took (its send buffer's worth and more), and bytes wait.
        sender.setblocking(False)
        sent = 1000
        try:
            while True:
                sent += sender.send(b"y" * 65536)
        except BlockingIOError:
            pass
        stuck = send_progress(sender)
        assert stuck.waiting and 1000 <= stuck.acked < sent
        # Reading moves it on.
        receiver.recv(1 << 20)
        wait_until(lambda: send_progress(sender).acked > stuck.acked, 10,
                   "the count to move on")
    finally:
        sender.close()
        receiver.close()


def test_none_where_the_kernel_does_not_say() -> None:
    sender, receiver = _pair()
    sender.close()
    receiver.close()
    assert send_progress(sender) is None   # closed
    assert send_progress(None) is None     # a transport without a socket
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        assert send_progress(udp) is None
    finally:
        udp.close()
