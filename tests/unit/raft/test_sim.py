"""The Raft core under the seeded simulator: safety after every step, liveness after healing.

Seed counts are the short CI setting; `make sim` runs the long one
(RILLET_SIM_SEEDS scales every case here).
"""
from __future__ import annotations

import os
import random

import pytest

from rillet.raft import messages as m
from rillet.raft.core import RaftCore
from rillet.raft.sim import SafetyViolation, SimConfig, Simulation, run_seeds

SCALE = float(os.environ.get("RILLET_SIM_SCALE", "1"))


def _seeds(n: int, offset: int = 0) -> range:
    return range(offset, offset + max(1, int(n * SCALE)))


@pytest.mark.parametrize("voters,observers,steps,seeds", [
    (3, 0, 400, 1200),
    (5, 1, 500, 60),
    (1, 1, 300, 200),
    (2, 0, 300, 200),
])
def test_quorum_is_safe_and_recovers(voters: int, observers: int, steps: int,
                                     seeds: int) -> None:
    config = SimConfig(voters=voters, observers=observers, steps=steps)
    committed = run_seeds(_seeds(seeds, offset=voters * 100000), config)
    # Every run ends with an entry committed everywhere, so a run that committed
    # nothing at all would be a broken simulation, not a safe one.
    assert committed >= len(_seeds(seeds))


def test_a_seed_replays_identically() -> None:
    a = Simulation(42).run()
    b = Simulation(42).run()
    assert a.trace == b.trace and a.committed == b.committed


class _VotesForAnyone(RaftCore):
    """A core that forgets Raft's up-to-date check on votes (a real bug)."""

    def _on_vote(self, req: m.VoteRequest, now_ms: int) -> m.VoteResponse:
        if req.epoch > self.epoch:
            self._become_unattached(req.epoch, req.candidate_id, now_ms)
            return m.VoteResponse(self.epoch, True, None)
        return super()._on_vote(req, now_ms)


class _CommitsOnOwnFlush(RaftCore):
    """A leader that counts its own log end as a majority (a real bug)."""

    @property
    def majority(self) -> int:
        return 1 if self.is_leader else super().majority


@pytest.mark.parametrize("broken", [_VotesForAnyone, _CommitsOnOwnFlush])
def test_the_checker_catches_a_broken_core(monkeypatch: pytest.MonkeyPatch,
                                           broken: type) -> None:
    monkeypatch.setattr("rillet.raft.sim.RaftCore", broken)
    with pytest.raises(SafetyViolation) as caught:
        run_seeds(range(300))
    assert "seed" in str(caught.value)


def test_a_vote_is_persisted_before_it_is_answered() -> None:
    from rillet.raft.log import MemoryLog
    core = RaftCore(2, frozenset({1, 2, 3}), MemoryLog(), m.QuorumStateData(), 0,
                    random.Random(1))
    response, effects = core.handle_request(1, m.VoteRequest(1, 1, -1, 0), 10)
    assert response.granted
    persisted = [e.state for e in effects if isinstance(e, m.Persist)]
    assert persisted and persisted[-1] == m.QuorumStateData(1, 1, None)
    again, _ = core.handle_request(3, m.VoteRequest(1, 3, -1, 0), 11)
    assert not again.granted, "two votes in one epoch"


def test_a_follower_truncates_a_divergent_tail_to_the_leaders_epoch() -> None:
    from rillet.raft.log import Entry, MemoryLog
    log = MemoryLog([Entry(1, "a"), Entry(1, "b"), Entry(2, "stale"), Entry(2, "stale2")])
    log.flush()
    core = RaftCore(2, frozenset({1, 2, 3}), log, m.QuorumStateData(3, None, 1), 0,
                    random.Random(1))
    effects = core.step(m.Tick(), 1)
    fetch = next(e.message for e in effects if isinstance(e, m.Send))
    assert (fetch.fetch_offset, fetch.last_fetched_epoch) == (4, 2)
    core.step(m.FetchResponse(3, 1, 4, high_watermark=2, diverging_epoch=1,
                              diverging_end_offset=2), 2, sender=1)
    assert [e.payload for e in log.entries] == ["a", "b"]
