"""The newcomer path: `make run` installs the runtime only and takes PORT/DATA; the jar fetch
shows its progress without terminal codes."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.integration.java_tools import REPO, kafka_jars  # noqa: F401  (fixture by name)


def _make_dry_run(*args: str) -> str:
    # Not as a sub-make of `make test`: that would print directories and pass its flags on.
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
    proc = subprocess.run(["make", "-n", "--no-print-directory", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_make_run_installs_the_runtime_only_and_takes_port_and_data(tmp_path: Path) -> None:
    fresh = tmp_path / "venv"  # nothing installed yet: make shows every step it would run
    run = _make_dry_run("run", f"VENV={fresh}", "PORT=9093", "DATA=./d")
    assert f"{fresh}/bin/pip install -e .\n" in run
    assert "[test]" not in run and " -q" not in run
    assert run.splitlines()[-1] == (f"{fresh}/bin/rillet serve --set "
                                    "listeners=PLAINTEXT://127.0.0.1:9093 --set log.dirs=./d")
    test = _make_dry_run("test", f"VENV={fresh}")
    assert f"{fresh}/bin/pip install -e '.[test]'" in test


def test_fetch_jars_shows_progress_without_terminal_codes(kafka_jars: Path,  # noqa: F811
                                                          tmp_path: Path) -> None:
    # A cache of its own forces a real fetch (Maven's local repository makes it quick).
    proc = subprocess.run([str(REPO / "tools" / "fetch-jars"), "kafka"], capture_output=True,
                          text=True, timeout=1200,
                          env={**os.environ, "RILLET_CACHE": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert proc.stdout.strip().startswith(str(tmp_path / "jars" / "kafka-"))
    assert "[INFO]" in proc.stderr  # progress, not -q silence
    assert "\x1b" not in proc.stdout + proc.stderr, "terminal escape codes in the output"
