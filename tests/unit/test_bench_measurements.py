"""The benchmark tables' arithmetic (bench/measurements.py): a row's median and spread over
rounds, a failed round keeping its row an error, and the row order rotated per round."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from measurements import Measurements, rotated, run_rounds, summarise, with_spread  # noqa: E402


def test_the_median_and_the_spread_of_each_row_over_the_rounds() -> None:
    runs = [Measurements({"mb_s": 30.0, "rss": 80.0}), Measurements({"mb_s": 36.0, "rss": 90.0}),
            Measurements({"mb_s": 33.0, "rss": 70.0})]
    m = summarise(runs)
    assert m.values == {"mb_s": 33.0, "rss": 80.0}
    assert m.spread == {"mb_s": (30.0, 36.0), "rss": (70.0, 90.0)}
    assert with_spread(m, "mb_s") == "33.00 (30.00-36.00)"
    assert with_spread(summarise([Measurements({"x": 1500.0})]), "x") == "1,500"


def test_a_row_that_failed_in_any_round_is_an_error_not_a_median_of_the_rest() -> None:
    runs = [Measurements({"mb_s": 30.0}), Measurements(errors={"mb_s": "TimeoutError"})]
    m = summarise(runs)
    assert "mb_s" not in m.values and with_spread(m, "mb_s") == "error"
    assert with_spread(m, "other") == "-" and with_spread(None, "mb_s") == "-"


def test_every_row_leads_a_round_in_turn() -> None:
    rows = ["a", "b", "c", "d"]
    orders = [rotated(rows, r) for r in range(4)]
    assert [o[0] for o in orders] == rows
    assert all(sorted(o) == rows for o in orders)
    assert rotated(rows, 5) == ["b", "c", "d", "a"] and rotated([], 3) == []


def test_the_systems_take_turns_going_first_and_every_round_is_kept() -> None:
    order: list[tuple[str, int]] = []

    def measure(system: str, round_no: int) -> Measurements:
        order.append((system, round_no))
        return Measurements({"round": float(round_no)})

    runs = run_rounds(["rillet", "kafka"], 3, measure)
    assert order == [("rillet", 0), ("kafka", 0), ("kafka", 1), ("rillet", 1),
                     ("rillet", 2), ("kafka", 2)]
    assert {s: [m.values["round"] for m in r] for s, r in runs.items()} == {
        "rillet": [0.0, 1.0, 2.0], "kafka": [0.0, 1.0, 2.0]}
