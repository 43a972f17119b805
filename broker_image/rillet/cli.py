"""`rillet serve [--config server.properties] [--set key=value ...]`."""
from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from pathlib import Path

from .config import BrokerConfig, ConfigError, Listener

log = logging.getLogger("rillet")


def _parse_sets(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        if "=" not in item:
            raise ConfigError(f"--set expects key=value, got {item!r}")
        key, value = item.split("=", 1)
        out[key.strip()] = value
    return out


async def serve(config: BrokerConfig) -> None:
    from .apis import load_all
    from .broker import Broker
    from .server import KafkaServer

    load_all()
    broker = Broker(config)

    def server_for(listener: Listener, role: str) -> KafkaServer:
        return KafkaServer(broker, listener.host, listener.port,
                           max_request_bytes=config["socket.request.max.bytes"],
                           idle_timeout_s=config["connections.max.idle.ms"] / 1000,
                           listener=role)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    # The quorum must answer on the controller listener before this node can catch up
    # and register; clients are served only once the controller has unfenced us.
    await broker.start_quorum()
    servers = []
    controller_listener = config.controller_listener
    if controller_listener is not None and config.quorum_voters:
        servers.append(server_for(controller_listener, "controller"))
        await servers[-1].start()
    joined = asyncio.ensure_future(broker.join_cluster())
    await asyncio.wait([joined, asyncio.ensure_future(stop.wait())],
                       return_when=asyncio.FIRST_COMPLETED)
    if joined.done():
        joined.result()
        listener = config.broker_listeners[0]
        client_server = server_for(listener, "broker")
        await client_server.start()
        servers.append(client_server)
        log.info("rillet node %d serving cluster %s on %s:%d", config.node_id,
                 broker.cluster_id, listener.host, client_server.port)
        await stop.wait()
        log.info("shutting down")
        await broker.controlled_shutdown()
    else:
        joined.cancel()
        log.info("shutting down before joining the cluster")
    for server in reversed(servers):
        await server.stop()
    await broker.stop()
    log.info("stopped")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="rillet")
    sub = parser.add_subparsers(dest="command", required=True)
    p_serve = sub.add_parser("serve", help="run a broker")
    p_serve.add_argument("--config", type=Path, help="server.properties file")
    p_serve.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                         help="override one config (repeatable)")
    p_serve.add_argument("--log-level", default="INFO")
    p_cluster = sub.add_parser("cluster", add_help=False,
                               help="run a local N-node cluster (rillet cluster --help)")
    p_cluster.add_argument("cluster_args", nargs=argparse.REMAINDER)
    args, rest = parser.parse_known_args(argv)
    if args.command == "cluster":
        args.cluster_args = rest + args.cluster_args
        from .local_cluster import main as cluster_main
        return cluster_main(args.cluster_args)
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    logging.basicConfig(level=args.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        config = BrokerConfig.load(args.config, _parse_sets(args.set))
    except (ConfigError, OSError) as exc:
        print(f"rillet: config error: {exc}", file=sys.stderr)
        return 2
    for key in config.ignored_keys():
        log.warning("config %s is accepted for compatibility but has no effect in rillet", key)
    try:
        asyncio.run(serve(config))
    except ConfigError as exc:
        print(f"rillet: config error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
