from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from tests.cluster import LocalCluster
from tests.fuzz.targets import fuzz_node
from tests.harness import BrokerProcess

# Where a failed test's report finds the logs of the brokers it started: a CI run keeps
# nothing else, and a flake without the brokers' side of the story cannot be found.
_LOGS = pytest.StashKey[list[Callable[[], str]]]()
LOG_TAIL = 12000


def _keep_logs(request: pytest.FixtureRequest, logs: Callable[[], str]) -> None:
    request.node.stash.setdefault(_LOGS, []).append(logs)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    if report.when == "call" and report.failed:
        for i, logs in enumerate(item.stash.get(_LOGS, [])):
            report.sections.append((f"broker logs ({i})", logs()))


@pytest.fixture
def broker(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[BrokerProcess]:
    """A started single-node broker with its own data dir."""
    b = BrokerProcess(tmp_path / "data")
    _keep_logs(request, lambda: b.log()[-LOG_TAIL:])
    b.start()
    yield b
    b.stop()


@pytest.fixture
def broker_factory(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator:
    """Start brokers with custom config; all are stopped at the end."""
    started: list[BrokerProcess] = []
    _keep_logs(request, lambda: "\n".join(b.log()[-LOG_TAIL:] for b in started))

    def make(config: dict | None = None, name: str = "data") -> BrokerProcess:
        b = BrokerProcess(tmp_path / name, config=config)
        started.append(b)
        return b.start()

    yield make
    for b in started:
        b.stop()


@pytest.fixture(scope="module")
def fuzz_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A node with a PLAINTEXT and a SASL_PLAINTEXT client listener (tests/fuzz/campaign.py)."""
    b = fuzz_node(tmp_path_factory.mktemp("fuzz") / "data").start()
    yield b
    assert b.alive(), "broker died during fuzzing:\n" + b.log()
    b.stop()


@pytest.fixture
def cluster_factory(tmp_path: Path,
                    request: pytest.FixtureRequest) -> Iterator[Callable[..., LocalCluster]]:
    """Start LocalClusters (tests/cluster.py); every one is closed at the end, even when
    the test or a start failed midway."""
    made: list[LocalCluster] = []
    _keep_logs(request, lambda: "\n".join(c.logs(LOG_TAIL) for c in made))

    def make(nodes: int = 3, start: bool = True, **kwargs: Any) -> LocalCluster:
        cluster = LocalCluster(tmp_path / f"cluster-{len(made)}", nodes=nodes, **kwargs)
        made.append(cluster)
        return cluster.start() if start else cluster

    try:
        yield make
    finally:
        for cluster in made:
            cluster.close()
