"""`rillet serve [--config server.properties] [--set key=value ...]`, `rillet groups ...`."""
from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from pathlib import Path
from typing import Any, Awaitable, Callable

from .defs.broker_config import BrokerConfig, parse_overrides
from .defs.config_error import ConfigError
from .defs.deprecated_configs import BROKER_NO_EFFECT, check_no_effect
from .defs.listeners import TLS_PROTOCOLS, Listener, ListenerSettings
from .raft.quorum_state import QuorumStateError
from .startup import StartupError

log = logging.getLogger("rillet")

_EPILOG = """\
Kafka's own tools (the Java client, from Maven Central jars) work against rillet:
tools/kafka/kafka-topics, kafka-configs, kafka-console-producer, kafka-console-consumer,
kafka-consumer-groups, kafka-get-offsets, kafka-producer-perf-test, kafka-consumer-perf-test,
kafka-metadata-quorum, kafka-cluster, kafka-reassign-partitions.

Listeners: PLAINTEXT, SSL (mTLS with ssl.client.auth), SASL_PLAINTEXT and SASL_SSL with PLAIN,
SCRAM-SHA-256 and SCRAM-SHA-512; ACLs with authorizer.class.name=StandardAuthorizer.
Not yet: transactions.
"""


async def _on_listener(step: Callable[[], Awaitable[None]], listener: Listener) -> None:
    """Run a bind/listen step; a taken port or bad host becomes one line naming both."""
    try:
        await step()
    except OSError as exc:
        # asyncio words a bind error its own way; the errno's text is the user's.
        reason = os.strerror(exc.errno) if (exc.errno or 0) > 0 else (exc.strerror or exc)
        raise StartupError(f"listener {listener.name} cannot listen on "
                           f"{listener.host}:{listener.port}: {reason}") from None


async def serve(config: BrokerConfig) -> None:
    # Imported here, not for a cycle (tests/unit/test_layering.py allows none) but so that
    # the other subcommands (groups, cluster, format) start without loading the broker.
    from .apis import load_all
    from .broker import Broker
    from .client.connection import set_source_host
    from .on_demand import listener_tls
    from .server import KafkaServer

    load_all()
    set_source_host(config["outbound.source.address"])
    broker = Broker(config)

    def server_for(listener: Listener, role: str) -> KafkaServer:
        tls = None
        protocol = config.security_protocol(listener)
        settings = ListenerSettings(config, listener.name)
        if protocol in TLS_PROTOCOLS:
            try:
                tls = listener_tls(settings)
            except (OSError, ValueError) as exc:   # ssl.SSLError is an OSError
                raise StartupError(f"listener {listener.name}: cannot load its TLS key and "
                                   f"certificates: {exc}") from None
        return KafkaServer(broker, listener.host, listener.port,
                           max_request_bytes=config["socket.request.max.bytes"],
                           max_unauthenticated_bytes=config["sasl.server.max.receive.size"],
                           idle_timeout_s=config["connections.max.idle.ms"] / 1000,
                           listener=role, tls=tls, listener_name=listener.name.upper(),
                           security_protocol=protocol, settings=settings)

    clients = [(server_for(lst, "broker"), lst) for lst in config.broker_listeners]
    servers: list[tuple[Any, Listener]] = list(clients)
    quorum_listener = config.controller_listener if config.quorum_voters else None
    if quorum_listener is not None:
        servers.insert(0, (server_for(quorum_listener, "controller"), quorum_listener))
    admin = _admin_server(config, broker)
    if admin is not None:
        servers.append((admin, Listener("admin.http", admin.host, admin.port)))
    # The ports first: a taken one refuses start-up before anything is loaded or written.
    # The admin endpoint serves at once: /healthz while the quorum forms, /readyz says why
    # the broker is not ready yet.
    try:
        for server, listener in servers:
            await _on_listener(server.bind, listener)
    except BaseException:
        await _stop_all(servers)
        raise
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        # The quorum must answer on the controller listener before this node can catch up
        # and register; clients are served only once the controller has unfenced us.
        await broker.start_quorum()
        if quorum_listener is not None:
            await _on_listener(servers[0][0].start, quorum_listener)
        joined = asyncio.ensure_future(broker.join_cluster())
        stopped = asyncio.ensure_future(stop.wait())
        await asyncio.wait([joined, stopped], return_when=asyncio.FIRST_COMPLETED)
        if not joined.done():
            joined.cancel()
            log.info("shutting down before joining the cluster")
            return
        joined.result()
        for server, listener in clients:
            await _on_listener(server.start, listener)
        log.info("rillet node %d serving cluster %s on %s", config.node_id, broker.cluster_id,
                 ", ".join(f"{lst.name} {lst.host}:{srv.port}" for srv, lst in clients))
        await stopped
        log.info("shutting down")
        await broker.controlled_shutdown()
    finally:
        # Clients first. The controller listener stays open while the broker stops: if this
        # node is the active controller it keeps hearing the other brokers' heartbeats (and so
        # fences nobody) until Raft has handed the leadership over.
        try:
            await _stop_all([s for s in servers if s[1] is not quorum_listener])
            await broker.stop()
        finally:
            if quorum_listener is not None:
                await servers[0][0].stop()
    log.info("stopped")


def _admin_server(config: BrokerConfig, broker: Any) -> Any:
    """The HTTP admin endpoint (admin.http.listener), or None when it is off."""
    address = config.admin_http_address
    if address is None:
        return None
    from .on_demand import admin_http_server
    return admin_http_server(broker, *address)


async def _stop_all(servers: list[tuple[Any, Listener]]) -> None:
    for server, _ in reversed(servers):
        await server.stop()


def _log_what_has_no_effect(config: BrokerConfig) -> None:
    for key in config.ignored_keys():
        log.warning("config %s=%s is accepted but has no effect in rillet yet", key,
                    ",".join(config[key]) if isinstance(config[key], list) else config[key])
    for key, value in sorted(config.no_effect.items()):
        check_no_effect(BROKER_NO_EFFECT, "broker", key, value)   # logs why
    if not config.quorum_voters and config.controller_listener is not None:
        listener = config.controller_listener
        log.warning("listener %s://%s:%d is not served: a node without "
                    "controller.quorum.voters is its own quorum and needs no controller "
                    "listener", listener.name, listener.host, listener.port)


def _serve_command(args: argparse.Namespace) -> int:
    try:
        config = BrokerConfig.load(args.config, parse_overrides(args.set))
    except ConfigError as exc:
        print(f"rillet: config error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"rillet: config error: cannot read {exc.filename}: {exc.strerror}",
              file=sys.stderr)
        return 2
    _log_what_has_no_effect(config)
    try:
        asyncio.run(serve(config))
    except (ConfigError, QuorumStateError) as exc:   # an unreadable quorum-state file too
        print(f"rillet: config error: {exc}", file=sys.stderr)
        return 2
    except StartupError as exc:
        print(f"rillet: {exc}", file=sys.stderr)
        return 2
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="rillet", description="A Kafka-API-compatible event streaming broker.",
        epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    p_serve = sub.add_parser("serve", help="run a broker (Kafka's server.properties names)")
    p_serve.add_argument("--config", type=Path, help="server.properties file")
    p_serve.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                         help="override one config (repeatable)")
    p_serve.add_argument("--log-level", default="INFO")
    sub.add_parser(
        "groups", add_help=False,
        help="consumer groups: --list, --describe --group G with lag (rillet groups --help)")
    sub.add_parser("cluster", add_help=False,
                   help="run a local N-node cluster in one command (rillet cluster --help)")
    # These commands keep their own parsers; everything after their name is passed on.
    args, rest = parser.parse_known_args(argv)
    if args.command == "groups":
        from .client import groups_cli
        return groups_cli.main(rest, prog="rillet groups")
    if args.command == "cluster":
        from .local_cluster import main as cluster_main
        return cluster_main(rest)
    if rest:
        p_serve.error(f"unrecognized arguments: {' '.join(rest)}")
    logging.basicConfig(level=args.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    _refuse_test_tooling()
    return _serve_command(args)


def _refuse_test_tooling() -> None:
    """Keep Hypothesis out of a broker process. kio registers a Hypothesis strategy for each
    of its types at import whenever hypothesis is importable (the dev venv the integration
    tests start brokers from has it, the broker image does not): about half the CPU of such
    a broker's start (issue 30, bench/startup.py --rillet-env dev). A broker never generates
    test data; None in sys.modules makes the import fail as if it were not installed."""
    sys.modules.setdefault("hypothesis", None)   # type: ignore[arg-type]


if __name__ == "__main__":
    sys.exit(main())
