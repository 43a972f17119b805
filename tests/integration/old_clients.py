"""Old client releases, each in its own venv cached outside git, for compatibility tests.

librdkafka 2.0.2 is what Debian 12 ships (its kcat and every distro-built client); the
confluent-kafka 2.0.2 wheel bundles that same librdkafka. kafka-python 2.0.2 is the last
release before 2.1 and still sends SaslHandshake v0. Neither can share the test venv with
the current releases, so each gets a venv of its own under $RILLET_CACHE (default
~/.cache/rillet), built on first use with pinned versions and kept across runs: CI works
in a fresh clone, but the cache survives. A build is atomic (built beside, then renamed),
so an interrupted one is redone, never used half-made.

The clients run `old_client_login.py` (beside this file) as a separate process and report
what they did as JSON.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
LOGIN_SCRIPT = HERE / "old_client_login.py"
# name -> pinned requirements (no dependencies: neither release needs any).
PINS = {"kafka-python": ("kafka-python==2.0.2",),
        "confluent-kafka": ("confluent-kafka==2.0.2",)}
INSTALL_TIMEOUT_S = 600
PY = f"py{sys.version_info.major}{sys.version_info.minor}"


def _cache() -> Path:
    return Path(os.environ.get("RILLET_CACHE", str(Path.home() / ".cache" / "rillet")))


def client_python(name: str) -> Path:
    """The interpreter of the cached venv holding client ``name`` (built if missing)."""
    pins = PINS[name]
    dest = _cache() / "old-clients" / f"{'-'.join(p.replace('==', '-') for p in pins)}-{PY}"
    python = dest / "bin" / "python"
    if (dest / ".complete").exists():
        return python
    building = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(building, ignore_errors=True)
    # The base interpreter, not the test venv's: the old client must not see the new ones.
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", str(building)], check=True, timeout=120)
    subprocess.run([str(building / "bin" / "python"), "-m", "pip", "install", "--quiet",
                    "--disable-pip-version-check", "--no-deps", *pins],
                   check=True, timeout=INSTALL_TIMEOUT_S)
    (building / ".complete").touch()
    shutil.rmtree(dest, ignore_errors=True)
    building.rename(dest)
    return python


def run_login(pythons: dict[str, Path], name: str, **job: Any) -> dict[str, Any]:
    """Run old_client_login.py with client ``name`` (its interpreter from ``pythons``, the
    `old_clients` fixture) on ``job`` (bootstrap, mechanism, user, password, topic, group,
    count); its JSON report. The report says what failed rather than raising, so a test's
    assertion can show it."""
    return run_script(pythons[name], [str(LOGIN_SCRIPT), name, json.dumps(job)])


def run_script(python: Path, args: list[str]) -> dict[str, Any]:
    """Run a script (args[0]) of this directory with an old client's interpreter: the JSON
    report on its last line of output, with its stderr; a report of the failure if none."""
    proc = subprocess.run([str(python), *args], capture_output=True, text=True, timeout=180)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        return {"ok": False, "error": f"exit {proc.returncode}",
                "stderr": proc.stderr[-4000:], "stdout": proc.stdout[-2000:]}
    report: dict[str, Any] = json.loads(lines[-1])
    report["stderr"] = proc.stderr[-4000:]
    return report


@pytest.fixture(scope="session")
def old_clients() -> dict[str, Path]:
    """Every old client's interpreter, its venv built on first use (about 25 s, once per
    cache)."""
    return {name: client_python(name) for name in PINS}
