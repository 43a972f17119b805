"""The steady clock: wall time at the first read, then only the monotonic clock moves it."""
from __future__ import annotations

from rillet.steady_clock import steady_clock


class Clocks:
    def __init__(self) -> None:
        self.wall = 1_800_000_000.0
        self.monotonic = 50.0


def test_a_wall_clock_step_moves_no_deadline() -> None:
    c = Clocks()
    clock = steady_clock(lambda: c.wall, lambda: c.monotonic)
    assert clock() == 1_800_000_000.0
    deadline = clock() + 10.0   # a session timeout of 10 s
    c.wall += 600               # NTP steps the wall clock 10 minutes forward...
    assert clock() < deadline   # ...and the session has not expired
    c.wall -= 1200              # then 10 minutes back
    c.monotonic += 9.5
    assert deadline - 1 < clock() < deadline
    c.monotonic += 1
    assert clock() >= deadline  # it expires when 10 s have really passed
