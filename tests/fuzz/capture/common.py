"""What the capture of every source shares: the Run of one source (the address its clients
use, scratch space, what failed; calls and Kafka CLI tools that note a failure and let the
workload go on), the broker a client source records against (a fresh single node behind a
RecordingProxy it advertises), timeouts and the broker config.
"""
from __future__ import annotations

import subprocess
import time
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, TypeVar

from tests.fuzz.recording import RecordingProxy
from tests.harness import BrokerProcess
from tests.integration.java_tools import KafkaTools

T = TypeVar("T")
# AlterConfigs is deprecated in the clients, and still an API rillet serves: it is sent.
# Every workload module imports this one, so the filter is on before any client runs.
warnings.filterwarnings("ignore", message="alter_configs has been deprecated",
                        category=DeprecationWarning)

TOOL_TIMEOUT = 60.0
CALL_TIMEOUT = 20.0
# PLAINTEXT clients are User:ANONYMOUS: a super user under the StandardAuthorizer, so the ACL
# APIs really store and delete bindings instead of answering SECURITY_DISABLED. No initial
# rebalance delay: short-lived console consumers get their partitions before they time out.
STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
BROKER_CONFIG = {"auto.create.topics.enable": "true", "num.partitions": 3,
                 "group.initial.rebalance.delay.ms": 0,
                 "authorizer.class.name": STANDARD, "super.users": "User:ANONYMOUS"}
QUIET = {"log_level": 3}   # librdkafka: errors only, not every reconnect


@dataclass
class Run:
    """One source's capture: the address its clients use, scratch space, what failed."""
    source: str
    bootstrap: str
    scratch: Path
    # (label, what it said, whether the workload asked for an error on purpose)
    failures: list[tuple[str, str, bool]] = field(default_factory=list)

    def fail(self, label: str, why: str, expected: bool = False) -> None:
        self.failures.append((label, why, expected))
        print(f"  [{self.source}] {label}: {'refused' if expected else 'FAILED'} {why}",
              flush=True)

    def attempt(self, label: str, fn: Callable[..., T], *args: Any,
                expect_error: bool = False, **kw: Any) -> T | None:
        """fn(*args, **kw), or None with the failure noted: one refused call must not end
        the workload, whose later calls still record frames."""
        try:
            return fn(*args, **kw)
        except Exception as exc:  # any client error: the frames were sent, that is the point
            self.fail(label, brief(exc), expect_error)
            return None

    def settle(self, label: str, call: Callable[[], Any]) -> None:
        """Make a confluent-kafka admin call and wait for what it returned: a future or a
        dict of them."""
        result = self.attempt(label, call)
        futures = result.values() if isinstance(result, dict) else [result] if result else []
        for future in futures:
            self.attempt(label, future.result, CALL_TIMEOUT)

    def tools(self) -> KafkaTools:
        return KafkaTools(self.bootstrap)

    def tool(self, label: str, tool: str, *args: str, input: str | None = None,
             timeout: float = TOOL_TIMEOUT, expect_error: bool = False) -> str:
        """Run one Kafka CLI tool; its stdout ('' when it failed to run at all)."""
        try:
            result = self.tools().run(tool, *args, input=input, timeout=timeout)
        except subprocess.TimeoutExpired:
            self.fail(label, f"timed out after {timeout:.0f}s")
            return ""
        if result.returncode != 0:
            self.fail(label, f"exit {result.returncode}: {tool_error(result.stderr)}",
                      expect_error)
        return result.stdout


def brief(exc: BaseException) -> str:
    text = " ".join(f"{type(exc).__name__}: {exc}".split())
    return text[:240]


def gather(poll: Callable[[], Iterable[T]], want: int, seconds: float) -> list[T]:
    """What poll() returns, call after call, until there are `want` or `seconds` passed: a
    consumer's records, however its client polls."""
    got: list[T] = []
    deadline = time.monotonic() + seconds
    while len(got) < want and time.monotonic() < deadline:
        got.extend(poll())
    return got


def tool_error(stderr: str) -> str:
    """The line of a tool's stderr that says what went wrong, shortened."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    telling = [line for line in lines if "Exception" in line or "ERROR" in line
               or "Error" in line]
    return (telling or lines or ["(no output)"])[-1][:240]


@contextmanager
def recorded_broker(root: Path, config: dict[str, Any],
                    protocol: str = "PLAINTEXT") -> Iterator[RecordingProxy]:
    """A fresh single node behind a RecordingProxy that it advertises; the proxy."""
    broker = BrokerProcess(root / "data", config=config)
    proxy = RecordingProxy(broker.host, broker.port)
    try:
        broker.config["listeners"] = f"{protocol}://{broker.host}:{broker.port}"
        broker.config["advertised.listeners"] = f"{protocol}://127.0.0.1:{proxy.port}"
        broker.start()
        yield proxy
    finally:
        try:
            broker.stop(20)
        finally:
            proxy.close()
