from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from tests.harness import BrokerProcess


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A started single-node broker with its own data dir."""
    b = BrokerProcess(tmp_path / "data").start()
    yield b
    b.stop()


@pytest.fixture
def broker_factory(tmp_path: Path) -> Iterator:
    """Start brokers with custom config; all are stopped at the end."""
    started: list[BrokerProcess] = []

    def make(config: dict | None = None, name: str = "data") -> BrokerProcess:
        b = BrokerProcess(tmp_path / name, config=config)
        started.append(b)
        return b.start()

    yield make
    for b in started:
        b.stop()


@pytest.fixture(scope="module")
def fuzz_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("fuzz") / "data").start()
    yield b
    assert b.alive(), "broker died during fuzzing:\n" + b.log()
    b.stop()
