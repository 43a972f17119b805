"""Clock faults for one broker process, with libfaketime (Debian package libfaketime,
tested with 0.9.10-2.1): its wall clock stepped forward or back, or running fast, at run time.

    clock = FakeClock(tmp_path / "clock-1")       # offset +0 until told otherwise
    broker.env.update(clock.env())                # before the broker starts
    clock.step(600)                               # an NTP step: +10 minutes, from now on

The process reads the control file at every clock read (FAKETIME_NO_CACHE), so a step
takes effect at once. Only the wall clock (CLOCK_REALTIME, Python's time.time) is faked:
the monotonic clock never steps on a real machine either (FAKETIME_DONT_FAKE_MONOTONIC).
Known limit of libfaketime 0.9.10 so configured: time.sleep fails with EINVAL in the faked
process (its clock_nanosleep wrapper); asyncio's waits and threading's are unaffected, and
the broker never calls time.sleep.
"""
from __future__ import annotations

import glob
from pathlib import Path

PACKAGE = "libfaketime=0.9.10-2.1"   # what tests/integration/test_clock_faults.py was run with
_CANDIDATES = ("/usr/lib/*/faketime/libfaketime.so.1", "/usr/lib/faketime/libfaketime.so.1",
               "/usr/local/lib/faketime/libfaketime.so.1")


def libfaketime() -> Path | None:
    """The preload library, or None when the package is not installed."""
    for pattern in _CANDIDATES:
        found = sorted(glob.glob(pattern))
        if found:
            return Path(found[0])
    return None


class FakeClock:
    """One process's wall clock: an offset (and a rate) in a control file."""

    def __init__(self, control: Path) -> None:
        self.control = Path(control)
        self.offset = 0.0
        self.rate = 1.0
        self._write()

    def env(self) -> dict[str, str]:
        library = libfaketime()
        if library is None:
            raise RuntimeError(f"libfaketime is not installed (apt-get install {PACKAGE})")
        return {"LD_PRELOAD": str(library), "FAKETIME_TIMESTAMP_FILE": str(self.control),
                "FAKETIME_NO_CACHE": "1", "FAKETIME_DONT_FAKE_MONOTONIC": "1"}

    def step(self, seconds: float) -> None:
        """Move the wall clock by `seconds` (negative: back) from where it is now."""
        self.offset += seconds
        self._write()

    def run_fast(self, rate: float) -> None:
        """Let the wall clock run `rate` times as fast as real time. libfaketime counts the
        rate from the process's start, so the clock also leaps forward by the time the
        process has run times (rate - 1) when this is set."""
        self.rate = rate
        self._write()

    def _write(self) -> None:
        spec = f"{self.offset:+.0f}" + (f" x{self.rate:g}" if self.rate != 1.0 else "")
        self.control.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.control.with_suffix(".tmp")
        tmp.write_text(spec + "\n")
        tmp.replace(self.control)   # a reader never sees half a line
