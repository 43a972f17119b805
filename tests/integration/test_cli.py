"""The `rillet` command line: config errors, start-up refusals, formatting, help."""
from __future__ import annotations

import errno
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness import BrokerProcess, free_port

from ..wire import Wire


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


def _refused(cmd: list[str]) -> str:
    """Run a `rillet serve` that must refuse to start: exit 2, a one-line reason last on
    stderr, no traceback. Returns that line."""
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.stderr.strip().splitlines()[-1]


def _serve(*settings: str) -> list[str]:
    cmd = [sys.executable, "-m", "rillet", "serve"]
    for setting in settings:
        cmd += ["--set", setting]
    return cmd


def test_a_second_broker_on_the_same_log_dir_is_refused_until_the_first_dies(
        tmp_path: Path) -> None:
    first = BrokerProcess(tmp_path / "data").start()
    second = BrokerProcess(tmp_path / "data")  # another port, the same log.dirs
    line = _refused(second.command())
    assert line.startswith(f"rillet: directory {(tmp_path / 'data').resolve()} is in use")
    assert f"pid {first.proc.pid}" in line
    assert first.alive()

    first.kill()  # SIGKILL: no clean-up runs, the kernel drops the lock
    assert (tmp_path / "data" / ".lock").exists()
    second.start()
    assert second.stop() == 0


def test_a_shared_metadata_dir_is_refused(tmp_path: Path) -> None:
    shared = {"metadata.log.dir": str(tmp_path / "metadata")}
    first = BrokerProcess(tmp_path / "a", config=shared).start()
    try:
        line = _refused(BrokerProcess(tmp_path / "b", config=shared).command())
        assert f"directory {(tmp_path / 'metadata').resolve()} is in use" in line
        assert not (tmp_path / "b" / "meta.properties").exists(), "refused, yet it formatted"
    finally:
        first.stop()


@pytest.mark.parametrize("settings,named", [
    (["listeners=SSL://127.0.0.1:{port}"],
     "SSL://127.0.0.1:{port} (SSL): an SSL listener needs a key and certificate"),
    (["listeners=SASL_PLAINTEXT://127.0.0.1:{port}", "sasl.enabled.mechanisms=GSSAPI"],
     "SASL_PLAINTEXT://127.0.0.1:{port} (SASL_PLAINTEXT): SASL mechanism GSSAPI is not "
     "available"),
    (["listeners=SASL_SSL://127.0.0.1:{port}"],
     "SASL_SSL://127.0.0.1:{port} (SASL_SSL): an SSL listener needs a key and certificate"),
    (["listeners=CLIENT://127.0.0.1:{port}", "listener.security.protocol.map=CLIENT:SASL_SSL"],
     "CLIENT://127.0.0.1:{port} (SASL_SSL): an SSL listener needs a key"),
    (["listeners=CLIENT://127.0.0.1:{port}"], "CLIENT://127.0.0.1:{port} has no security"),
])
def test_listeners_rillet_cannot_secure_are_refused(tmp_path: Path, settings: list[str],
                                                    named: str) -> None:
    port = free_port()
    line = _refused(_serve(f"log.dirs={tmp_path / 'data'}",
                           *(s.format(port=port) for s in settings)))
    assert line.startswith("rillet: config error: listener ")
    assert named.format(port=port) in line
    assert not (tmp_path / "data").exists(), "refused, yet it wrote to the log dir"


def _cluster_style(tmp_path: Path, **extra: str) -> BrokerProcess:
    """PLAINTEXT for clients, CONTROLLER for the quorum, as the cluster configuration has it."""
    controller_port = free_port()
    b = BrokerProcess(tmp_path / "data", config={
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        **extra})
    b.config["listeners"] = (f"PLAINTEXT://127.0.0.1:{b.port},"
                             f"CONTROLLER://127.0.0.1:{controller_port}")
    return b


def test_cluster_style_listeners_serve_clients_on_plaintext(tmp_path: Path) -> None:
    b = _cluster_style(tmp_path).start()
    try:
        with Wire(b.bootstrap) as w:
            resp = w.request(3, 12, {"topics": [], "allow_auto_topic_creation": False,
                                     "include_topic_authorized_operations": False})
            assert [(n.node_id, n.port) for n in resp.brokers] == [(1, b.port)]
    finally:
        assert b.stop() == 0


def test_keys_and_listeners_without_effect_yet_are_logged_at_start(tmp_path: Path) -> None:
    """A CONTROLLER listener without a quorum to serve, and a key without effect."""
    b = _cluster_style(tmp_path, **{"num.network.threads": "8"}).start()
    try:
        log = b.log()
        assert "config num.network.threads=8 is accepted but has no effect " \
               "in rillet yet" in log, log
        controller = b.config["listeners"].split(",")[1]
        assert f"listener {controller} is not served: a node without " \
               "controller.quorum.voters is its own quorum" in log, log
    finally:
        assert b.stop() == 0


def test_a_broker_only_node_needs_a_quorum(tmp_path: Path) -> None:
    line = _refused(_serve(f"log.dirs={tmp_path / 'data'}", "process.roles=broker"))
    assert line == ("rillet: config error: process.roles other than broker,controller needs "
                    "controller.quorum.voters")


def test_a_taken_port_is_one_line_naming_listener_and_address(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        line = _refused(_serve(f"log.dirs={tmp_path / 'data'}",
                               f"listeners=PLAINTEXT://127.0.0.1:{port}"))
    assert line == (f"rillet: listener PLAINTEXT cannot listen on 127.0.0.1:{port}: "
                    f"{os.strerror(errno.EADDRINUSE)}")
    assert not (tmp_path / "data").exists(), "refused, yet it wrote to the log dir"


def test_config_values_are_explained_in_the_users_terms(tmp_path: Path) -> None:
    line = _refused(_serve(f"log.dirs={tmp_path / 'data'}", "log.retention.ms=banana"))
    assert line == ("rillet: config error: log.retention.ms must be a whole number of "
                    "milliseconds, got 'banana'")


def test_help_lists_what_the_package_offers() -> None:
    proc = subprocess.run([sys.executable, "-m", "rillet", "--help"], capture_output=True,
                          text=True, timeout=30)
    assert proc.returncode == 0
    for offered in ("serve", "groups", "kafka-topics", "kafka-configs",
                    "kafka-consumer-groups", "Not yet", "kafka-reassign-partitions"):
        assert offered in proc.stdout, proc.stdout
    groups = subprocess.run([sys.executable, "-m", "rillet", "groups", "--help"],
                            capture_output=True, text=True, timeout=30)
    assert groups.returncode == 0 and "--describe" in groups.stdout
