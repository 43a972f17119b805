"""Name resolution a test controls: Kubernetes' DNS for broker names, without Kubernetes.

A pod's DNS name resolves while the pod exists; once it is deleted the name answers
NXDOMAIN, or, while the DNS servers still look, a lookup hangs until the resolver's timeout
(5 s per try by default) and then fails with EAI_AGAIN. A client that resolves names on its
own network thread (kafka-python) sees either. install() wraps socket.getaddrinfo (which
asyncio's resolver calls too) so that names under `.rillet.test` follow a map file:

    {"b1.rillet.test": "127.0.0.1",       # resolves to that address
     "b4.rillet.test": "nxdomain",        # socket.gaierror EAI_NONAME at once
     "b5.rillet.test": "hang:5"}          # blocks 5 s, then gaierror EAI_AGAIN

The file is read at every lookup, so a test changes answers while processes run; a name
under the suffix that is not in it is NXDOMAIN, every other name goes to the real resolver.
A child process gets the same with `env(map_file)` in its environment (its interpreter
loads tests/fake_dns_site/sitecustomize.py, which calls install()).
"""
from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path
from typing import Any

SUFFIX = ".rillet.test"
MAP_ENV = "RILLET_FAKE_DNS"
SITE_DIR = Path(__file__).with_name("fake_dns_site")

_real_getaddrinfo = socket.getaddrinfo


def write_map(path: Path, answers: dict[str, str]) -> None:
    """Replace the answers at once (a reader never sees half a file)."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(answers))
    os.replace(tmp, path)


def env(map_file: Path) -> dict[str, str]:
    """The environment a child process needs to resolve through `map_file`."""
    path = os.environ.get("PYTHONPATH", "")
    return {MAP_ENV: str(map_file),
            "PYTHONPATH": os.pathsep.join(p for p in (str(SITE_DIR), path) if p)}


def _answer(host: str) -> str:
    path = os.environ.get(MAP_ENV)
    try:
        answers = json.loads(Path(path).read_text()) if path else {}
    except (OSError, ValueError):
        answers = {}
    return answers.get(host.rstrip(".").lower(), "nxdomain")


def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
    name = host.decode() if isinstance(host, bytes) else host
    if not isinstance(name, str) or not name.rstrip(".").lower().endswith(SUFFIX):
        return _real_getaddrinfo(host, port, *args, **kwargs)
    answer = _answer(name)
    if answer.startswith("hang:"):
        time.sleep(float(answer.split(":", 1)[1]))
        raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")
    if answer == "nxdomain":
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
    return _real_getaddrinfo(answer, port, *args, **kwargs)


def install() -> None:
    """Resolve through the map file named by $RILLET_FAKE_DNS from now on (idempotent)."""
    socket.getaddrinfo = getaddrinfo   # type: ignore[assignment]
