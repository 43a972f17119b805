"""`rillet serve [--config server.properties] [--set key=value ...]`, `rillet groups ...`."""
from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from pathlib import Path
from typing import Awaitable, Callable

from .config import BrokerConfig, ConfigError, Listener
from .startup import StartupError

log = logging.getLogger("rillet")

_EPILOG = """\
Kafka's own tools (the Java client, from Maven Central jars) work against rillet:
tools/kafka/kafka-topics, kafka-configs, kafka-console-producer, kafka-console-consumer,
kafka-consumer-groups, kafka-get-offsets, kafka-producer-perf-test, kafka-consumer-perf-test.

Not yet: replication across brokers (the Raft quorum: controller.quorum.voters has no
effect), kafka-reassign-partitions, transactions, SSL and SASL listeners (refused at start).
"""


def _parse_sets(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        if "=" not in item:
            raise ConfigError(f"--set expects key=value, got {item!r}")
        key, value = item.split("=", 1)
        out[key.strip()] = value
    return out


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
    from .apis import load_all
    from .broker import Broker
    from .server import KafkaServer

    load_all()
    broker = Broker(config)
    listener = config.served_listener
    server = KafkaServer(broker, listener.host, listener.port,
                         max_request_bytes=config["socket.request.max.bytes"],
                         idle_timeout_s=config["connections.max.idle.ms"] / 1000)
    # The port first: a taken one refuses start-up before anything is loaded or written.
    await _on_listener(server.bind, listener)
    try:
        await broker.start()
    except BaseException:
        await server.stop()
        raise
    try:
        await _on_listener(server.start, listener)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        log.info("rillet node %d serving cluster %s on %s:%d", config.node_id,
                 broker.cluster_id, listener.host, server.port)
        await stop.wait()
        log.info("shutting down")
    finally:
        await server.stop()
        await broker.stop()
    log.info("stopped")


def _log_what_has_no_effect(config: BrokerConfig) -> None:
    for key in config.ignored_keys():
        log.warning("config %s=%s is accepted but has no effect in rillet yet", key,
                    ",".join(config[key]) if isinstance(config[key], list) else config[key])
    served = config.served_listener
    for listener in config.listeners:
        if listener != served:
            log.warning("listener %s://%s:%d is accepted but not served: rillet serves one "
                        "listener, %s, until the cluster work", listener.name, listener.host,
                        listener.port, served.name)


def _serve_command(args: argparse.Namespace) -> int:
    try:
        config = BrokerConfig.load(args.config, _parse_sets(args.set))
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
    except ConfigError as exc:
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
    # The groups command keeps its own parser; everything after its name is passed on.
    args, rest = parser.parse_known_args(argv)
    if args.command == "groups":
        from .client import groups_cli
        return groups_cli.main(rest, prog="rillet groups")
    if rest:
        p_serve.error(f"unrecognized arguments: {' '.join(rest)}")
    logging.basicConfig(level=args.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return _serve_command(args)


if __name__ == "__main__":
    sys.exit(main())
