"""Apache Kafka's own CLI tools (so: the Java client) for integration tests.

The tools run from the Maven Central jars through the wrappers in tools/kafka/ (kafka-topics,
kafka-console-producer, ...). The session fixture `kafka_jars` calls tools/fetch-jars, so a fresh
CI clone downloads the jars itself, once, into the cache outside git.

`java_target` is the broker the tests talk to: a fresh rillet node (the `broker` fixture) by
default. With RILLET_JAVA_TARGET=kafka the same tests run against a real Apache Kafka KRaft node
instead, which is how the tests themselves are checked against the reference implementation.
"""
from __future__ import annotations

import os
import re
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import pytest

from tests.harness import BrokerProcess, free_port

REPO = Path(__file__).resolve().parents[2]
KAFKA_TOOLS_DIR = REPO / "tools" / "kafka"
# A cold fetch downloads ~45 MB of jars; leave room for a slow mirror.
FETCH_TIMEOUT_S = 1200
TOOL_TIMEOUT_S = 120.0
QUICK_JVM_OPTS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:-UsePerfData -Djava.awt.headless=true"


@dataclass(frozen=True)
class ToolResult:
    """What one run of a Kafka tool returned."""

    tool: str
    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    def describe(self) -> str:
        return (f"{self.tool} {' '.join(self.args)}\n-> exit {self.returncode}\n"
                f"--- stdout ---\n{self.stdout[-4000:]}\n--- stderr ---\n{self.stderr[-4000:]}")

    def ok(self) -> "ToolResult":
        """Assert the tool exited 0; the failure message carries the whole exchange."""
        assert self.returncode == 0, self.describe()
        return self

    @property
    def lines(self) -> list[str]:
        return [line for line in self.stdout.splitlines() if line.strip()]


def fetch_kafka_jars() -> Path:
    """Run tools/fetch-jars kafka (a no-op when cached); return the jar folder."""
    proc = subprocess.run([str(REPO / "tools" / "fetch-jars"), "kafka"], capture_output=True,
                          text=True, timeout=FETCH_TIMEOUT_S)
    assert proc.returncode == 0, f"tools/fetch-jars kafka failed:\n{proc.stderr[-4000:]}"
    return Path(proc.stdout.strip().splitlines()[-1])


class KafkaTools:
    """Runs the tools/kafka wrappers against one bootstrap address."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap

    def run(self, tool: str, *args: str, input: str | None = None,
            timeout: float = TOOL_TIMEOUT_S) -> ToolResult:
        env = dict(os.environ)
        if "perf-test" not in tool:
            # Short-lived tools: JVM start-up dominates, so trade peak JIT speed for a ~1/3
            # faster start. The client's protocol behaviour is the same; the perf tools keep
            # Kafka's default JVM options.
            env.setdefault("KAFKA_JVM_PERFORMANCE_OPTS", QUICK_JVM_OPTS)
        proc = subprocess.run([str(KAFKA_TOOLS_DIR / tool), *args], input=input,
                              capture_output=True, text=True, timeout=timeout, env=env,
                              stdin=None if input is not None else subprocess.DEVNULL)
        return ToolResult(tool, tuple(args), proc.returncode, proc.stdout, proc.stderr)

    def topics(self, *args: str, **kw) -> ToolResult:
        return self.run("kafka-topics", "--bootstrap-server", self.bootstrap, *args, **kw)

    def create_topic(self, topic: str, partitions: int, *args: str) -> ToolResult:
        return self.topics("--create", "--topic", topic, "--partitions", str(partitions),
                           "--replication-factor", "1", *args).ok()

    def produce_lines(self, topic: str, lines: list[str], *args: str) -> ToolResult:
        """kafka-console-producer: one record per line, "key:value" parsed into key and value."""
        return self.run("kafka-console-producer", "--bootstrap-server", self.bootstrap,
                        "--topic", topic, "--reader-property", "parse.key=true",
                        "--reader-property", "key.separator=:", *args,
                        input="".join(f"{line}\n" for line in lines))

    def consume(self, topic: str, max_messages: int, *args: str,
                timeout_ms: int = 30000) -> ToolResult:
        """kafka-console-consumer printing "Partition:p<TAB>Offset:o<TAB>key<TAB>value" lines."""
        return self.run("kafka-console-consumer", "--bootstrap-server", self.bootstrap,
                        "--topic", topic, "--max-messages", str(max_messages),
                        "--timeout-ms", str(timeout_ms),
                        "--formatter-property", "print.key=true",
                        "--formatter-property", "print.partition=true",
                        "--formatter-property", "print.offset=true", *args,
                        timeout=timeout_ms / 1000 + TOOL_TIMEOUT_S)

    def consumer_groups(self, *args: str) -> ToolResult:
        return self.run("kafka-consumer-groups", "--bootstrap-server", self.bootstrap, *args)

    def configs(self, *args: str) -> ToolResult:
        return self.run("kafka-configs", "--bootstrap-server", self.bootstrap, *args)

    def topic_configs(self, topic: str, *args: str) -> dict[str, str]:
        """kafka-configs --describe of one topic: name -> "value synonyms={...}"."""
        return parse_configs(self.configs("--describe", "--entity-type", "topics",
                                          "--entity-name", topic, *args).ok())

    def end_offsets(self, topic: str) -> dict[int, int]:
        """kafka-get-offsets (ListOffsets, latest): partition -> log end offset."""
        result = self.run("kafka-get-offsets", "--bootstrap-server", self.bootstrap,
                          "--topic", topic, "--time", "-1").ok()
        offsets: dict[int, int] = {}
        for line in result.lines:
            name, partition, offset = line.rsplit(":", 2)
            assert name == topic, result.describe()
            offsets[int(partition)] = int(offset)
        return offsets


# --- parsing the tools' output ------------------------------------------------------------


@dataclass(frozen=True)
class ConsumedRecord:
    partition: int
    offset: int
    key: str
    value: str


def parse_consumed(result: ToolResult) -> list[ConsumedRecord]:
    records = []
    for line in result.lines:
        partition, offset, key, value = line.split("\t", 3)
        assert partition.startswith("Partition:") and offset.startswith("Offset:"), line
        records.append(ConsumedRecord(int(partition.removeprefix("Partition:")),
                                      int(offset.removeprefix("Offset:")), key, value))
    return records


@dataclass(frozen=True)
class TopicDescription:
    partition_count: int
    replication_factor: int
    configs: dict[str, str]
    # one dict per partition line: Partition, Leader, Replicas, Isr (as printed)
    partitions: list[dict[str, str]]


def parse_topic_description(result: ToolResult, topic: str) -> TopicDescription:
    """Parse `kafka-topics --describe --topic T` (tab-separated "Name: value" fields)."""
    summary: dict[str, str] = {}
    partitions: list[dict[str, str]] = []
    for line in result.lines:
        fields = dict(_field(part) for part in line.strip().split("\t") if ":" in part)
        if fields.get("Topic") != topic:
            continue
        (partitions.append(fields) if "Partition" in fields else summary.update(fields))
    assert "PartitionCount" in summary, result.describe()
    configs = dict(item.split("=", 1) for item in summary.get("Configs", "").split(",") if item)
    return TopicDescription(int(summary["PartitionCount"]), int(summary["ReplicationFactor"]),
                            configs, sorted(partitions, key=lambda p: int(p["Partition"])))


def _field(part: str) -> tuple[str, str]:
    name, _, value = part.partition(":")
    return name.strip(), value.strip()


def parse_configs(result: ToolResult) -> dict[str, str]:
    """kafka-configs --describe lines "  name=value sensitive=false synonyms={...}" ->
    name -> "value synonyms={...}" (the sensitive flag dropped: rillet has no secrets)."""
    configs = {}
    for line in result.lines:
        setting, sep, rest = line.strip().partition(" sensitive=")
        if not sep:
            continue  # the "All configs for topic T are:" heading
        name, _, value = setting.partition("=")
        configs[name] = f"{value} {rest.split(' ', 1)[1]}"
    return configs


def parse_group_offsets(result: ToolResult, group: str) -> dict[tuple[str, int], dict[str, str]]:
    """Parse `kafka-consumer-groups --describe --group G` -> (topic, partition) -> columns."""
    rows: dict[tuple[str, int], dict[str, str]] = {}
    header: list[str] | None = None
    for line in result.lines:
        cells = line.split()
        if cells[:2] == ["GROUP", "TOPIC"]:
            header = cells
        elif header and cells[0] == group and len(cells) == len(header):
            row = dict(zip(header, cells))
            rows[(row["TOPIC"], int(row["PARTITION"]))] = row
    assert header is not None, result.describe()
    return rows


_PRODUCER_SUMMARY = re.compile(r"^(\d+) records sent, ([\d.]+) records/sec .*99th", re.MULTILINE)


def parse_producer_perf_sent(result: ToolResult) -> int:
    """Records the final summary line of kafka-producer-perf-test says were sent."""
    matches = _PRODUCER_SUMMARY.findall(result.stdout)
    assert matches, result.describe()
    return int(matches[-1][0])


def parse_consumer_perf(result: ToolResult) -> dict[str, str]:
    """kafka-consumer-perf-test: CSV header line + one data line -> column -> value."""
    lines = result.lines
    header_at = next(i for i, line in enumerate(lines) if line.startswith("start.time"))
    header = [h.strip() for h in lines[header_at].split(",")]
    values = [v.strip() for v in lines[header_at + 1].split(",")]
    return dict(zip(header, values))


# --- a real Apache Kafka node (reference) ---------------------------------------------------


class KafkaNode:
    """A real Apache Kafka KRaft single node via tools/kafka/kafka-server start/stop."""

    def __init__(self, data_dir: Path, extra: dict[str, str] | None = None) -> None:
        self.data_dir = data_dir
        self.port = free_port()
        self.controller_port = free_port()
        self.extra = extra or {}

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> "KafkaNode":
        if self.extra:
            self.data_dir.mkdir(parents=True, exist_ok=True)
            (self.data_dir / "extra.properties").write_text(
                "".join(f"{key}={value}\n" for key, value in self.extra.items()))
        subprocess.run([str(KAFKA_TOOLS_DIR / "kafka-server"), "start", str(self.data_dir),
                        str(self.port), str(self.controller_port)],
                       check=True, timeout=240, capture_output=True)
        return self

    def stop(self) -> None:
        subprocess.run([str(KAFKA_TOOLS_DIR / "kafka-server"), "stop", str(self.data_dir)],
                       timeout=90, capture_output=True)


# --- fixtures -------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def kafka_jars() -> Path:
    return fetch_kafka_jars()


@pytest.fixture(scope="session")
def reference_kafka(kafka_jars: Path,
                    tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaNode]:
    node = KafkaNode(tmp_path_factory.mktemp("kafka-reference")).start()
    yield node
    node.stop()


@pytest.fixture
def java_target(request: pytest.FixtureRequest, kafka_jars: Path) -> str:
    """Bootstrap address of the broker under test (see the module docstring)."""
    if os.environ.get("RILLET_JAVA_TARGET", "rillet") == "kafka":
        return request.getfixturevalue("reference_kafka").bootstrap
    return request.getfixturevalue("broker").bootstrap


@pytest.fixture
def java_target_with(request: pytest.FixtureRequest, kafka_jars: Path,
                     tmp_path: Path) -> Iterator[Callable[[dict[str, str]], KafkaTools]]:
    """Start a broker under test with static settings (server.properties lines); its tools.

    A fresh node each, rillet or (RILLET_JAVA_TARGET=kafka) Kafka, stopped at the end."""
    stops: list[Callable[[], object]] = []

    def start(settings: dict[str, str]) -> KafkaTools:
        name = f"node{len(stops)}"
        if os.environ.get("RILLET_JAVA_TARGET", "rillet") == "kafka":
            node: KafkaNode | BrokerProcess = KafkaNode(tmp_path / name, settings).start()
        else:
            node = BrokerProcess(tmp_path / name, config=settings).start()
        stops.append(node.stop)
        return KafkaTools(node.bootstrap)

    yield start
    for stop in stops:
        stop()


@pytest.fixture
def kafka_tools(java_target: str) -> KafkaTools:
    return KafkaTools(java_target)


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> str:
    """Unique per test, so tests can share one reference Kafka node."""
    # hyphens only: the tools warn that '.' and '_' collide in metric names
    name = re.sub(r"[^a-zA-Z0-9-]+", "-", request.node.name.removeprefix("test_"))
    return f"{name[:40].strip('-')}-{uuid.uuid4().hex[:6]}"
