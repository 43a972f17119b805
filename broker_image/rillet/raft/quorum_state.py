"""The `quorum-state` file: epoch, voted-for and leader, fsynced before they are acted on."""
from __future__ import annotations

import json
from pathlib import Path

from ..storage.durable_file import write_durably
from .messages import QuorumStateData

QUORUM_STATE_FILE = "quorum-state"


class QuorumStateError(ValueError):
    """The quorum-state file cannot be read; its text names the file and why. Raft's own, so
    that raft needs nothing of the broker's config: the CLI reports it as a config error."""


class QuorumStateFile:
    def __init__(self, directory: Path) -> None:
        self.path = directory / QUORUM_STATE_FILE

    def read(self) -> QuorumStateData:
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return QuorumStateData()
        except (OSError, ValueError) as exc:
            raise QuorumStateError(f"cannot read {self.path}: {exc}") from None
        return QuorumStateData(int(data["epoch"]), data.get("voted_for"), data.get("leader_id"))

    def write(self, state: QuorumStateData) -> None:
        """Blocking (fsync): run it in a worker thread."""
        write_durably(self.path, json.dumps({"epoch": state.epoch, "voted_for": state.voted_for,
                                             "leader_id": state.leader_id}).encode())
