"""Pure logic of the Spark job: consumer settings from a mounted User Secret, and the lag
computed from a micro-batch's progress (the job itself runs in tests/integration)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "spark"))
from rillet_spark.lag import LagExporter, offsets_behind  # noqa: E402
from rillet_spark.progress import BatchReporter, ProgressListener, progress_line  # noqa: E402
from rillet_spark.security import (  # noqa: E402
    ClientSecurity,
    SecurityConfigError,
    kafka_options,
    librdkafka_options,
)


def test_plaintext_without_a_secret() -> None:
    assert kafka_options(ClientSecurity()) == {}


def test_scram_secret_gives_sasl_ssl_with_the_password_only_by_reference(tmp_path: Path) -> None:
    (tmp_path / "password").write_text("s3cret")
    (tmp_path / "sasl.jaas.config").write_text('... password="s3cret";')
    ca = tmp_path / "cluster-ca.crt"
    ca.write_text("pem")
    opts = kafka_options(ClientSecurity(user_dir=tmp_path, ca_file=ca))
    assert opts["security.protocol"] == "SASL_SSL"
    assert opts["sasl.mechanism"] == "SCRAM-SHA-512"
    assert opts["sasl.jaas.config"] == f"${{rilletuser:{tmp_path}:sasl.jaas.config}}"
    assert opts["ssl.truststore.location"] == str(ca) and opts["ssl.truststore.type"] == "PEM"
    assert not any("s3cret" in v for v in opts.values())


def test_tls_secret_gives_a_pem_keystore_and_its_own_ca(tmp_path: Path) -> None:
    for name in ("user.crt", "user.key", "user.pem", "ca.crt"):
        (tmp_path / name).write_text("pem")
    opts = kafka_options(ClientSecurity(user_dir=tmp_path))
    assert opts == {"security.protocol": "SSL", "ssl.keystore.type": "PEM",
                    "ssl.keystore.location": str(tmp_path / "user.pem"),
                    "ssl.truststore.type": "PEM",
                    "ssl.truststore.location": str(tmp_path / "ca.crt")}


def test_a_folder_that_is_no_user_secret_or_a_missing_ca_is_named(tmp_path: Path) -> None:
    with pytest.raises(SecurityConfigError, match="neither sasl.jaas.config"):
        kafka_options(ClientSecurity(user_dir=tmp_path))
    (tmp_path / "sasl.jaas.config").write_text("x")
    with pytest.raises(SecurityConfigError, match="cluster-ca-cert"):
        kafka_options(ClientSecurity(user_dir=tmp_path))
    with pytest.raises(SecurityConfigError, match="does not exist"):
        kafka_options(ClientSecurity(user_dir=tmp_path, ca_file=tmp_path / "nope.crt"))


PROGRESS = {"batchId": 7, "sources": [{
    "startOffset": '{"events":{"0":100,"1":50}}',
    "endOffset": '{"events":{"0":150,"1":90}}',
    "latestOffset": '{"events":{"0":400,"1":90}}'}]}


def test_lag_per_partition_from_progress() -> None:
    assert offsets_behind(PROGRESS) == {("events", 0): 250, ("events", 1): 0}
    assert offsets_behind({"batchId": 0, "sources": []}) == {}
    # The first batch of a restarted driver (replayed from the offset log) has no latest
    # offset: PySpark hands Spark's null over as "None"; no lag is known, the job goes on.
    for none in (None, "None", "null", ""):
        replayed = {"batchId": 5, "sources": [{"endOffset": '{"events": {"0": 9}}',
                                                "latestOffset": none}]}
        assert offsets_behind(replayed) == {}


def test_lag_of_a_batch_without_a_known_latest_offset_is_empty() -> None:
    """The first batch after a restart from a checkpoint can carry an empty latestOffset: it
    must read as unknown, not raise (an exception there stopped the job's driver)."""
    for latest in ("", "null", "  ", None, "not json"):
        progress = {"batchId": 4, "sources": [
            {"endOffset": '{"events": {"0": 10}}', "latestOffset": latest}]}
        assert offsets_behind(progress) == {}
    exporter = LagExporter.create()
    assert exporter.observe({"batchId": 4, "sources": [
        {"endOffset": "", "latestOffset": '{"events": {"0": 7}}'}]}) == {("events", 0): 0}


def test_exporter_sets_the_gauges() -> None:
    lag = LagExporter.create()
    lag.observe(PROGRESS)
    get = lag.registry.get_sample_value
    assert get("rillet_spark_offsets_behind_latest", {"topic": "events", "partition": "0"}) == 250
    assert get("rillet_spark_offsets_behind_latest_total") == 250
    assert get("rillet_spark_last_batch_id") == 7


def _batch(batch_id: int, end: int, latest: int) -> dict:
    return {"batchId": batch_id, "sources": [{"endOffset": f'{{"events": {{"0": {end}}}}}',
                                              "latestOffset": f'{{"events": {{"0": {latest}}}}}'}]}


def test_each_batch_is_reported_once_whether_the_listener_or_the_final_drain_sees_it_first(
        capsys: pytest.CaptureFixture) -> None:
    reporter = BatchReporter(LagExporter.create())
    total = lambda: reporter.lag.registry.get_sample_value(  # noqa: E731
        "rillet_spark_offsets_behind_latest_total")
    reporter.report([_batch(0, 100, 400)])        # the listener, as batch 0 ends
    assert total() == 300
    reporter.report([_batch(1, 200, 400)])
    assert total() == 200
    # the drain after the query ended: recentProgress holds every batch, one not yet heard
    reporter.report([_batch(0, 100, 400), _batch(1, 200, 400), _batch(2, 400, 400)])
    assert total() == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(",")[0] for line in lines] == [
        "progress: batch 0", "progress: batch 1", "progress: batch 2"]
    assert lines[0].endswith("behind latest 300")


def test_the_listener_reports_only_the_query_started_first_after_it_was_added(
        capsys: pytest.CaptureFixture) -> None:
    from types import SimpleNamespace
    import uuid
    ours, other = uuid.uuid4(), uuid.uuid4()
    listener = ProgressListener(BatchReporter(LagExporter.create()))
    listener.onQueryStarted(SimpleNamespace(id=ours))
    listener.onQueryStarted(SimpleNamespace(id=other))   # another query of the same session
    for query_id, batch in ((other, _batch(0, 5, 5)), (ours, _batch(0, 100, 400)),
                            (other, _batch(1, 9, 9))):
        listener.onQueryProgress(SimpleNamespace(progress={**batch, "id": query_id}))
    assert capsys.readouterr().out.splitlines() == [
        'progress: batch 0, 0 input rows, watermark -, offsets {"events": {"0": 100}}, '
        'behind latest 300']


def test_a_progress_line_of_a_batch_without_a_known_end_offset() -> None:
    """PySpark hands a null endOffset over as "None": the line says null, it does not raise."""
    line = progress_line({"batchId": 3, "sources": [{"endOffset": "None",
                                                     "latestOffset": '{"events": {"0": 7}}'}]})
    assert line.endswith("offsets null, behind latest 0")


def test_the_image_pins_what_pyproject_pins() -> None:
    """The driver imports prometheus_client: the image must install the version tested here."""
    import re
    repo = Path(__file__).resolve().parents[2]
    pinned = re.search(r'"prometheus-client==([^"]+)"', (repo / "pyproject.toml").read_text())
    image = re.search(r"^ARG PROMETHEUS_CLIENT_VERSION=(\S+)$",
                      (repo / "spark/Dockerfile").read_text(), re.M)
    assert pinned and image and pinned.group(1) == image.group(1)


def _scram_secret(folder: Path, password: str = "s3cret") -> Path:
    """A scram-sha-512 User's Secret as the operator writes it and a pod mounts it."""
    (folder / "password").write_text(password)
    (folder / "sasl.jaas.config").write_text(
        'org.apache.kafka.common.security.scram.ScramLoginModule required '
        f'username="writer" password="{password}";')
    return folder


def test_librdkafka_gets_the_scram_user_and_password_from_the_mounted_secret(
        tmp_path: Path) -> None:
    ca = tmp_path / "cluster-ca.crt"
    ca.write_text("pem")
    user = _scram_secret(tmp_path)
    assert librdkafka_options(ClientSecurity(user_dir=user, ca_file=ca)) == {
        "security.protocol": "SASL_SSL", "sasl.mechanisms": "SCRAM-SHA-512",
        "sasl.username": "writer", "sasl.password": "s3cret", "ssl.ca.location": str(ca)}


def test_librdkafka_gets_the_tls_users_certificate_key_and_ca(tmp_path: Path) -> None:
    for name in ("user.crt", "user.key", "user.pem", "ca.crt"):
        (tmp_path / name).write_text("pem")
    assert librdkafka_options(ClientSecurity(user_dir=tmp_path)) == {
        "security.protocol": "SSL", "ssl.certificate.location": str(tmp_path / "user.crt"),
        "ssl.key.location": str(tmp_path / "user.key"),
        "ssl.ca.location": str(tmp_path / "ca.crt")}


def test_librdkafka_refuses_a_secret_without_credentials_or_a_scram_secret_without_ca(
        tmp_path: Path) -> None:
    assert librdkafka_options(ClientSecurity()) == {}
    with pytest.raises(SecurityConfigError, match="neither sasl.jaas.config"):
        librdkafka_options(ClientSecurity(user_dir=tmp_path))
    _scram_secret(tmp_path)
    with pytest.raises(SecurityConfigError, match="Cluster's CA"):
        librdkafka_options(ClientSecurity(user_dir=tmp_path))


def test_the_producer_names_a_folder_that_is_no_user_secret_before_connecting(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from rillet_spark.produce import main
    with pytest.raises(SystemExit) as ended:
        main(["--bootstrap-servers", "127.0.0.1:1", "--user-secret-dir", str(tmp_path)])
    assert ended.value.code == 2
    assert f"{tmp_path} holds neither sasl.jaas.config" in capsys.readouterr().err
