"""The sasl source: a SASL_PLAINTEXT broker; PLAIN and SCRAM logins (and refused ones) of
librdkafka, kafka-python, aiokafka and the Java tools."""
from __future__ import annotations

import asyncio
from typing import Any

from tests.fuzz.capture.aiokafka import aio_attempt
from tests.fuzz.capture.common import QUIET, Run, brief
from tests.fuzz.capture.librdkafka import rd_produce

# The client libraries are imported in the functions that use them, as in the single-file
# capture: `--help` and a run of other sources skip their import (a few tenths of a second
# each).

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="admin" password="admin-secret" user_admin="admin-secret" '
              'user_paula="paula-secret";')
SASL_CONFIG = {"auto.create.topics.enable": "true", "num.partitions": 3,
               "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT",
               "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
               "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
               "connection.failed.authentication.delay.ms": "50"}
# (mechanism, user, password) the sasl source logs in with; the SCRAM users are created first.
SASL_LOGINS = [("PLAIN", "paula", "paula-secret"), ("SCRAM-SHA-256", "sam", "sam-secret"),
               ("SCRAM-SHA-512", "sam", "sam-secret")]


def sasl_workload(run: Run) -> None:
    from confluent_kafka.admin import (AdminClient, ScramCredentialInfo, ScramMechanism,
                                       UserScramCredentialUpsertion)
    admin = AdminClient(_rd_sasl(run.bootstrap, "PLAIN", "admin", "admin-secret"))
    run.settle("create SCRAM users", lambda: admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion("sam", ScramCredentialInfo(
            getattr(ScramMechanism, mech.replace("-", "_")), 4096), b"sam-secret")
        for mech in ("SCRAM-SHA-256", "SCRAM-SHA-512")]))
    for mechanism, user, password in SASL_LOGINS:
        _sasl_logins(run, mechanism, user, password)
    # Wrong passwords: the SaslAuthenticate a refused login sends.
    _sasl_logins(run, "SCRAM-SHA-256", "sam", "wrong", expect_failure=True)
    _sasl_logins(run, "PLAIN", "paula", "wrong", expect_failure=True)


def _rd_sasl(bootstrap: str, mechanism: str, user: str, password: str) -> dict[str, Any]:
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password,
            **QUIET}


def _sasl_logins(run: Run, mechanism: str, user: str, password: str,
                 expect_failure: bool = False) -> None:
    """One login per client with these credentials, each doing a little work."""
    from confluent_kafka.admin import AdminClient
    topic = "s-events"
    tag = f"{mechanism} {user}{' (wrong password)' if expect_failure else ''}"
    label = f"librdkafka {tag}"
    conf = _rd_sasl(run.bootstrap, mechanism, user, password)
    if expect_failure:
        admin = AdminClient(conf)
        try:
            admin.list_topics(timeout=5)
            run.fail(label, "a wrong password was accepted")
        except Exception:
            pass  # refused, as it should be
    else:
        rd_produce(run, run.bootstrap, topic, [(label, {
            key: value for key, value in conf.items() if key != "bootstrap.servers"})],
            count=5)
    _kp_sasl(run, topic, mechanism, user, password, expect_failure)
    security = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": mechanism,
                "sasl_plain_username": user, "sasl_plain_password": password}
    if not expect_failure:
        asyncio.run(_aio_sasl(run, topic, security))
        _java_sasl(run, mechanism, user, password)


def _kp_sasl(run: Run, topic: str, mechanism: str, user: str, password: str,
             expect_failure: bool) -> None:
    from kafka import KafkaProducer
    label = f"kafka-python {mechanism} {user}"
    try:
        producer = KafkaProducer(bootstrap_servers=run.bootstrap, acks="all",
                                 security_protocol="SASL_PLAINTEXT", sasl_mechanism=mechanism,
                                 sasl_plain_username=user, sasl_plain_password=password,
                                 request_timeout_ms=10000, max_block_ms=8000,
                                 bootstrap_timeout_ms=5000, reconnect_backoff_max_ms=1000)
    except Exception as exc:
        if not expect_failure:
            run.fail(label, brief(exc))
        return
    try:
        future = producer.send(topic, b"over sasl")
        producer.flush(10)
        future.get(10)
        if expect_failure:
            run.fail(label, "a wrong password was accepted")
    except Exception as exc:
        if not expect_failure:
            run.fail(label, brief(exc))
    finally:
        producer.close(timeout=5)


async def _aio_sasl(run: Run, topic: str, security: dict[str, str]) -> None:
    from aiokafka import AIOKafkaProducer
    label = f"aiokafka {security['sasl_mechanism']}"
    producer = AIOKafkaProducer(bootstrap_servers=run.bootstrap, **security)
    try:
        if await aio_attempt(run, f"{label} start", producer.start()):
            await aio_attempt(run, f"{label} send", producer.send_and_wait(topic, b"aio"))
    finally:
        await aio_attempt(run, f"{label} stop", producer.stop())


def _java_sasl(run: Run, mechanism: str, user: str, password: str) -> None:
    module = ("org.apache.kafka.common.security.plain.PlainLoginModule"
              if mechanism == "PLAIN" else
              "org.apache.kafka.common.security.scram.ScramLoginModule")
    props = run.scratch / f"{mechanism}-{user}.properties"
    props.write_text(f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism={mechanism}\n"
                     f'sasl.jaas.config={module} required username="{user}" '
                     f'password="{password}";\n')
    bs = ("--bootstrap-server", run.bootstrap)
    run.tool(f"java {mechanism} topics --list", "kafka-topics", *bs, "--list",
             "--command-config", str(props))
    run.tool(f"java {mechanism} console-producer", "kafka-console-producer", *bs,
             "--topic", "s-events", "--producer.config", str(props), input="java\nsasl\n")
