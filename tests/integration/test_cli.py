"""The `rillet serve` command line: config errors, formatting, signals."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness import BrokerProcess


@pytest.mark.parametrize("args,fragment", [
    (["--set", "no.such.thing=1"], "unknown config 'no.such.thing'"),
    (["--set", "num.partitions=-3"], "num.partitions"),
    (["--set", "log.retention.bytes=lots"], "log.retention.bytes"),
    (["--config", "/nonexistent/server.properties"], "config error"),
])
def test_bad_config_exits_2_naming_the_key(args: list[str], fragment: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "rillet", "serve", *args],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2
    assert fragment in proc.stderr


def test_first_start_formats_storage_and_restart_keeps_cluster_id(tmp_path: Path) -> None:
    b = BrokerProcess(tmp_path / "data").start()
    meta = (tmp_path / "data" / "meta.properties").read_text()
    assert "cluster.id=" in meta and "node.id=1" in meta
    assert b.stop() == 0
    b.start()
    assert (tmp_path / "data" / "meta.properties").read_text() == meta
    assert b.stop() == 0


def test_node_id_mismatch_is_refused(tmp_path: Path) -> None:
    b = BrokerProcess(tmp_path / "data").start()
    b.stop()
    other = BrokerProcess(tmp_path / "data", node_id=2)
    with pytest.raises(RuntimeError, match="formatted for node.id 1"):
        other.start(timeout=15)
