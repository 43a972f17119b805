"""Numbers from benchmark rounds: each round's named values, their per-row median and spread,
and the order rows run in, rotated between rounds.

Pure (no processes, no sockets): bench/compare.py and bench/compare_cluster.py fill
Measurements per round and summarise them here.
"""
from __future__ import annotations

import statistics
import sys
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence, TypeVar

T = TypeVar("T")


@dataclass
class Measurements:
    """Named numbers for one system; a failed step stores its error text instead. After
    `summarise`, `spread` holds each row's (min, max) over the rounds."""

    values: dict[str, float] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    spread: dict[str, tuple[float, float]] = field(default_factory=dict)

    def attempt(self, names: list[str], step: Callable[[], dict[str, float]]) -> None:
        """Run one bounded step; on failure mark all the rows it would have filled."""
        try:
            self.values.update(step())
        except Exception as exc:  # noqa: BLE001 - any failure becomes a table cell, run goes on
            message = f"{type(exc).__name__}: {exc}"
            for name in names:
                self.errors[name] = message
            print(f"    FAILED {', '.join(names)}: {message}", file=sys.stderr)


def summarise(runs: Sequence[Measurements]) -> Measurements:
    """Per-row median over rounds, with the rounds' min and max beside it; a row that failed
    in any round stays an error (a median over the rounds that worked would hide it)."""
    merged = Measurements()
    for run in runs:
        merged.errors.update(run.errors)
    keys = {key for run in runs for key in run.values} - set(merged.errors)
    for key in sorted(keys):
        seen = [run.values[key] for run in runs if key in run.values]
        merged.values[key] = statistics.median(seen)
        merged.spread[key] = (min(seen), max(seen))
    return merged


def rotated(items: Sequence[T], round_no: int) -> list[T]:
    """The rows in the order round `round_no` runs them: each round starts one row later, so
    no row always runs first (on a cold JVM or a cold page cache) or last."""
    if not items:
        return []
    k = round_no % len(items)
    return [*items[k:], *items[:k]]


def run_rounds(systems: Sequence[str], rounds: int,
               measure: Callable[[str, int], Measurements]) -> dict[str, list[Measurements]]:
    """`measure(system, round_no)` for every system in every round; which system goes first
    alternates between rounds, so a drift in machine load hits both alike."""
    runs: dict[str, list[Measurements]] = {system: [] for system in systems}
    for round_no in range(rounds):
        for system in systems if round_no % 2 == 0 else list(reversed(systems)):
            runs[system].append(measure(system, round_no))
    return runs


def number(value: float) -> str:
    return f"{value:,.0f}" if value >= 1000 else f"{value:.2f}"


def with_spread(m: Measurements | None, key: str) -> str:
    """`median (min-max)` over the rounds, just the value for one round, "error" or "-"."""
    if m is None:
        return "-"
    if key in m.values:
        low, high = m.spread.get(key, (m.values[key], m.values[key]))
        text = number(m.values[key])
        return text if low == high else f"{text} ({number(low)}-{number(high)})"
    return "error" if key in m.errors else "-"


def ratio(first: Measurements | None, second: Measurements | None, key: str) -> str:
    """first/second of row `key` as "0.47x"; "-" when either is missing or second is 0."""
    a = None if first is None else first.values.get(key)
    b = None if second is None else second.values.get(key)
    return f"{a / b:.2f}x" if a is not None and b else "-"


def error_lines(results: Mapping[str, Measurements]) -> list[str]:
    """One line per failed row, `system row: first line of the error`."""
    return [f"{system} {key}: {error.splitlines()[0][:300]}"
            for system, m in results.items() for key, error in sorted(m.errors.items())]
