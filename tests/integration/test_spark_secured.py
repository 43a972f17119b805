"""The Spark job against a secured broker, with Users' Secrets as the operator writes them, and
the job's lag metric.

The broker runs the properties the operator renders for a Cluster with a SCRAM-SHA-512 listener
and a mutual-TLS listener (the env fixture of test_operator_security.py); a User's Secret is
written to a folder exactly as Kubernetes mounts it. What a data engineer relies on: the job reads
over SASL_SSL and over mutual TLS with a User that holds only Read on the topic and its group;
the password appears nowhere in the driver's output; a User without the ACL gets a clear
authorization error; and the lag gauges rise while the producer is ahead and fall to 0.
"""
from __future__ import annotations

import datetime
import urllib.request
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from rillet_operator import pki
from rillet_operator.handlers.user import jaas_config
from tests.harness import free_port
from tests.integration.spark_support import (  # noqa: F401  (fixtures are used by name)
    JobProcess,
    job_config,
    kafka_jars,  # noqa: F811
    read_aggregates,
    run_until_done,
    spark,  # noqa: F811
)
from tests.integration.test_operator_security import (  # noqa: F401  (env is a fixture)
    HOST,
    Env,
    _apply_user,
    _topic,
    env,  # noqa: F811
)
from tests.polling import poll_until
# spark_support put spark/ on sys.path
from rillet_spark.job import run  # noqa: E402
from rillet_spark.produce import (  # noqa: E402
    expected_aggregates,
    flush_event,
    produce,
    sample_events,
)
from rillet_spark.security import ClientSecurity, librdkafka_options  # noqa: E402

pytestmark = pytest.mark.timeout(420)

SPARK_GROUP_PREFIX = "spark-kafka-source-"   # the Kafka source's own group ids


def _reader_rules(topic: str) -> dict:
    """Only what the job needs: Read on its topic and on its groups (Read implies Describe)."""
    return {"type": "simple", "acls": [
        {"resource": {"type": "topic", "name": topic}, "operations": ["Read"]},
        {"resource": {"type": "group", "name": SPARK_GROUP_PREFIX, "patternType": "prefix"},
         "operations": ["Read"]}]}


def _writer(env: Env, topic: str, tmp_path: Path) -> dict[str, str]:
    """A User with Write on the topic, its Secret written as a pod mounts it, and the settings
    the sample producer derives from that folder (rillet_spark.security.librdkafka_options, as
    its --user-secret-dir does in a producer Job beside the job)."""
    name = f"writer-{topic}"
    _apply_user(env, {"cluster": "events", "authentication": {"type": "scram-sha-512"},
                      "authorization": {"type": "simple", "acls": [
                          {"resource": {"type": "topic", "name": topic},
                           "operations": ["Write", "Describe"]}]}}, name, "writer-pw")
    folder = tmp_path / name
    folder.mkdir(exist_ok=True)
    (folder / "password").write_text("writer-pw")
    (folder / "sasl.jaas.config").write_text(jaas_config(name, "writer-pw"))
    return librdkafka_options(ClientSecurity(user_dir=folder, ca_file=env.files["ca"]))


def _scram_secret(env: Env, topic: str, name: str, password: str, folder: Path,
                  rules: dict | None) -> Path:
    """A scram-sha-512 User applied to the broker and its Secret as mounted in a pod."""
    _apply_user(env, {"cluster": "events", "authentication": {"type": "scram-sha-512"},
                      **({"authorization": rules} if rules else {})}, name, password)
    folder.mkdir(parents=True)
    (folder / "password").write_text(password)
    (folder / "sasl.jaas.config").write_text(jaas_config(name, password))
    return folder


def _tls_secret(env: Env, topic: str, name: str, folder: Path) -> Path:
    """A tls User applied to the broker and its Secret's files (user.pem: PKCS#8 key first)."""
    _apply_user(env, {"cluster": "events", "authentication": {"type": "tls"},
                      "authorization": _reader_rules(topic)}, name, None)
    now = datetime.datetime.now(datetime.timezone.utc)
    kp = pki.issue_cert(env.clients_ca, name, [], now, 5, client=True, server=False)
    folder.mkdir(parents=True)
    for file, text in {"user.crt": kp.cert_pem, "user.key": kp.key_pem,
                       "user.pem": kp.key_pem + kp.cert_pem,
                       "ca.crt": env.files["ca"].read_text()}.items():
        (folder / file).write_text(text)
    return folder


def _produce_events(env: Env, topic: str, tmp_path: Path, events: list) -> None:
    """The sample producer's own path (event i to partition i % 2) as the writer User."""
    produce(f"{HOST}:{env.ports['scram']}", topic, events, partitions=2,
            security=_writer(env, topic, tmp_path))


def test_sasl_ssl_job_reads_exactly_with_a_read_only_user_and_never_shows_the_password(
        env: Env, spark: SparkSession, kafka_jars: Path, tmp_path: Path) -> None:
    topic = _topic(env)
    events = sample_events(400, keys=3, span_seconds=300, seed=29)
    _produce_events(env, topic, tmp_path, [*events, flush_event(events)])
    password = "spark-reader-pw-4f1e"
    user_dir = _scram_secret(env, topic, "spark-reader", password, tmp_path / "user-secret",
                             _reader_rules(topic))
    out, chk = tmp_path / "out", tmp_path / "chk"
    job = JobProcess(kafka_jars, [
        "--bootstrap-servers", f"{HOST}:{env.ports['scram']}", "--topics", topic,
        "--output", str(out), "--checkpoint", str(chk), "--available-now",
        "--user-secret-dir", str(user_dir), "--ca-file", str(env.files["ca"]),
        "--timeout", "240"], tmp_path / "job.log").start()
    assert job.wait(300) == 0, job.log()
    table, rows = read_aggregates(spark, out)
    assert table == expected_aggregates(events, 60) and rows == len(table)
    log = job.log(tail=None)
    assert "progress: batch" in log
    assert password not in log


def test_mutual_tls_job_reads_exactly(env: Env, spark: SparkSession, tmp_path: Path) -> None:
    topic = _topic(env)
    events = sample_events(300, keys=2, span_seconds=300, seed=31)
    _produce_events(env, topic, tmp_path, [*events, flush_event(events)])
    user_dir = _tls_secret(env, topic, "spark-mtls", tmp_path / "user-secret")
    cfg = job_config(f"{HOST}:{env.ports['mtls']}", topic, tmp_path, available_now=True,
                     security=ClientSecurity(user_dir=user_dir))   # ca.crt from the Secret
    progress = run_until_done(spark, cfg)
    assert sum(p["numInputRows"] for p in progress) == len(events) + 1
    table, rows = read_aggregates(spark, cfg.output)
    assert table == expected_aggregates(events, 60) and rows == len(table)


def test_a_user_without_read_acl_gets_a_clear_authorization_error(
        env: Env, spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    topic = _topic(env)
    _produce_events(env, topic, tmp_path, sample_events(10, keys=1, seed=3))
    user_dir = _scram_secret(env, topic, "spark-nobody", "nobody-pw", tmp_path / "user-secret",
                             None)
    cfg = job_config(f"{HOST}:{env.ports['scram']}", topic, tmp_path, available_now=True,
                     timeout_seconds=120,
                     security=ClientSecurity(user_dir=user_dir, ca_file=env.files["ca"]))
    assert run(spark, cfg) == 1
    err = capsys.readouterr().err
    assert f"not authorized to read topic(s) {topic!r}" in err, err[-3000:]


def _lag_total(port: int) -> float | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
            text = resp.read().decode()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("rillet_spark_offsets_behind_latest_total "):
            return float(line.split()[1])
    return None


def test_lag_metric_rises_while_the_producer_is_ahead_and_falls_to_zero(
        env: Env, kafka_jars: Path, tmp_path: Path) -> None:
    topic = _topic(env)
    events = sample_events(800, keys=3, span_seconds=600, seed=37)
    _produce_events(env, topic, tmp_path, events[:400])
    user_dir = _scram_secret(env, topic, "spark-lag", "lag-pw", tmp_path / "user-secret",
                             _reader_rules(topic))
    port = free_port()
    job = JobProcess(kafka_jars, [
        "--bootstrap-servers", f"{HOST}:{env.ports['scram']}", "--topics", topic,
        "--output", str(tmp_path / "out"), "--checkpoint", str(tmp_path / "chk"),
        "--trigger-interval", "1 second", "--max-offsets-per-trigger", "50",
        "--user-secret-dir", str(user_dir), "--ca-file", str(env.files["ca"]),
        "--metrics-port", str(port), "--metrics-address", "127.0.0.1",
        "--timeout", "300"], tmp_path / "job.log").start()
    try:
        seen: list[float] = []

        def lag_is(pred) -> bool:
            value = _lag_total(port)
            if value is not None:
                seen.append(value)
            return value is not None and pred(value)

        # 400 records, 50 per batch: five batches in a row end 150 or more records behind, so a
        # driver that stalls for a couple of seconds still leaves a lag of 150+ to be seen.
        assert poll_until(lambda: lag_is(lambda v: v >= 150), 180, interval=0.5), \
            f"lag never rose: {seen[-20:]}\n{job.log()}"
        assert poll_until(lambda: lag_is(lambda v: v == 0), 180, interval=0.5), \
            f"lag never fell to 0: {seen[-20:]}\n{job.log()}"
        _produce_events(env, topic, tmp_path, events[400:])   # the producer gets ahead again
        assert poll_until(lambda: lag_is(lambda v: v >= 150), 180, interval=0.5), \
            f"lag did not rise again: {seen[-20:]}\n{job.log()}"
        assert poll_until(lambda: lag_is(lambda v: v == 0), 180, interval=0.5), \
            f"lag never fell to 0 again: {seen[-20:]}\n{job.log()}"
        assert "behind latest" in job.log(tail=None)
    finally:
        job.kill()


def test_submit_k8s_mounts_the_users_secret_and_the_ca_in_driver_and_executors(
        kafka_jars: Path) -> None:
    """On Kubernetes the Secrets reach driver and executors as mounted files, and the job is
    told the folders; no credential is on the spark-submit command line."""
    import shlex
    import subprocess
    from tests.integration.spark_support import REPO
    out = subprocess.run(
        [str(REPO / "spark/submit-k8s"), "--master", "k8s://https://127.0.0.1:6443",
         "--namespace", "events", "--user", "alice", "--ca-secret", "events-cluster-ca-cert",
         "--dry-run", "--", "--bootstrap-servers", "events-kafka-bootstrap:9093",
         "--topics", "t", "--output", "/data/out", "--checkpoint", "/data/chk"],
        check=True, capture_output=True, text=True, timeout=120).stdout
    argv = shlex.split(out)
    confs = dict(argv[i + 1].split("=", 1) for i, a in enumerate(argv) if a == "--conf")
    for role in ("driver", "executor"):
        assert confs[f"spark.kubernetes.{role}.secrets.alice"] == "/etc/rillet/user"
        assert confs[f"spark.kubernetes.{role}.secrets.events-cluster-ca-cert"] == \
            "/etc/rillet/cluster-ca"
    job = argv[argv.index("local:///opt/rillet/spark/windowed_counts.py") + 1:]
    assert job[-4:] == ["--user-secret-dir", "/etc/rillet/user",
                        "--ca-file", "/etc/rillet/cluster-ca/ca.crt"]
