#!/usr/bin/env python3
"""How fast kafka-producer-perf-test can produce on this machine when the broker costs
nothing: the ceiling every broker's produce rows in bench/compare.py sit under.

A rillet node serves everything but Produce (Metadata, CreateTopics, InitProducerId, ...)
behind a small responder in front of it (the node advertises the responder's address, so the
client's every connection goes through it). The responder answers each Produce itself the
moment it has decoded the request (rillet's codec: the topics and partitions it names),
with no error and without storing anything; every other request it relays to the node.
compare.py's producer runs (1 KB records, unthrottled, acks=1 a plain producer, acks=all the
Java default's idempotent one) then measure the client alone, on the same 2 cores, competing
only with a responder that reads and answers frames. A plain rillet node and a Kafka 4.3.1
node (compare.py's) run the same cases in the same rounds, so the ceiling and both brokers
are measured under the same conditions: each system runs every case once first, discarded
(Kafka's JIT warms up), then the cases and the systems are rotated between rounds. Prints
the median (min-max) MB/s per case and system, 1.3x Kafka's median and rillet/Kafka.

    .venv/bin/python bench/client_ceiling.py [--rounds 3] [--records 200000]
"""
from __future__ import annotations

import argparse
import asyncio
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare import (KafkaBroker, RilletBroker, compile_source, create_topic,  # noqa: E402
                     free_port, producer_perf, runtime_rillet, wait_ready)
from measurements import rotated  # noqa: E402

PRODUCE = 0
CASES = [("1", 1), ("all", 1), ("1", 8), ("all", 8)]   # (acks, partitions)
SYSTEMS = ["responder", "rillet", "kafka"]


# -- the responder (a child process: `--respond NODE_PORT PORT`) -------------------------------

def _answer(frame: bytes) -> bytes:
    """A Produce request's answer: every partition it names accepted, nothing stored. The
    request is decoded and the answer built and encoded as rillet's produce handler does
    (its fast response path), so the responder pays what any broker must for the framing."""
    from rillet.protocol.codec import decode_request, encode_response, response_schema
    from rillet.protocol.produce_response import build_body
    header, body = decode_request(frame)
    responses = [{"name": topic.name, "partition_responses": [
        {"index": p.index, "error_code": 0, "base_offset": 0, "log_append_time": -1,
         "log_start_offset": 0} for p in topic.partition_data]} for topic in body.topic_data]
    return encode_response(PRODUCE, header.correlation_id,
                           build_body(response_schema(PRODUCE, header.api_version), responses, 0))


async def _relay(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 node_port: int) -> None:
    node_reader, node_writer = await asyncio.open_connection("127.0.0.1", node_port)
    try:
        while True:
            head = await reader.readexactly(4)
            frame = await reader.readexactly(struct.unpack(">i", head)[0])
            if struct.unpack_from(">h", frame)[0] == PRODUCE:
                writer.write(_answer(frame))
            else:
                node_writer.write(head + frame)
                size = await node_reader.readexactly(4)
                writer.write(size + await node_reader.readexactly(struct.unpack(">i", size)[0]))
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()
        node_writer.close()


async def _respond(node_port: int, port: int) -> None:
    server = await asyncio.start_server(lambda r, w: _relay(r, w, node_port), "127.0.0.1", port)
    await server.serve_forever()


# -- the measurement ---------------------------------------------------------------------------

class FrontedRillet(RilletBroker):
    """A rillet node that advertises the responder's port instead of its own."""

    def __init__(self, workdir: Path, advertised_port: int) -> None:
        super().__init__(workdir)
        self.advertised_port = advertised_port

    def command(self) -> list[str]:
        return [*super().command(), "--set",
                f"advertised.listeners=PLAINTEXT://127.0.0.1:{self.advertised_port}"]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--respond", nargs=2, type=int, metavar=("NODE_PORT", "PORT"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.respond:
        asyncio.run(_respond(*args.respond))
        return 0
    # A SIGTERM (e.g. `timeout`) unwinds like Ctrl-C, so every node and the responder stop.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    RilletBroker.executable = runtime_rillet()
    compile_source()
    seen: dict[tuple[str, tuple[str, int]], list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="client-ceiling-") as tmp, ExitStack() as stack:
        targets = _start_targets(Path(tmp), stack)

        def run(system: str, case: tuple[str, int], topic: str) -> float:
            acks, partitions = case
            create_topic(targets[system], topic, partitions)
            return producer_perf(targets[system], topic, args.records, acks, -1, 600)["mb_s"]
        for system in SYSTEMS:   # discarded: the JIT of Kafka's broker warms on every case
            for case in CASES:
                run(system, case, f"warm-{case[0]}-{case[1]}")
        for round_no in range(args.rounds):
            for case in rotated(CASES, round_no):
                for system in rotated(SYSTEMS, round_no):
                    mb_s = run(system, case, f"c-{case[0]}-{case[1]}-{round_no}")
                    seen.setdefault((system, case), []).append(mb_s)
                    print(f"  round {round_no} {system} acks={case[0]} {case[1]} "
                          f"partition(s): {mb_s:.1f} MB/s", file=sys.stderr, flush=True)
    print(render(seen, args))
    return 0


def _start_targets(tmp: Path, stack: ExitStack) -> dict[str, str]:
    """Bootstrap addresses of the responder (over its own rillet node), a rillet node and a
    Kafka node, all started fresh; stopped when ``stack`` closes."""
    port = free_port()
    fronted = FrontedRillet(tmp / "fronted", port)
    plain, kafka = RilletBroker(tmp / "rillet"), KafkaBroker(tmp / "kafka")
    for node in (fronted, plain, kafka):
        node.workdir.mkdir()
        stack.callback(node.stop)
        node.start(180)
    responder = subprocess.Popen([str(RilletBroker.executable.parent / "python"), __file__,
                                  "--respond", str(fronted.port), str(port)])
    stack.callback(responder.wait, 30)
    stack.callback(responder.terminate)
    targets = {"responder": f"127.0.0.1:{port}", "rillet": plain.bootstrap,
               "kafka": kafka.bootstrap}
    wait_ready(targets["responder"], 60)
    return targets


def render(seen: dict[tuple[str, tuple[str, int]], list[float]],
           args: argparse.Namespace) -> str:
    lines = [f"kafka-producer-perf-test, {args.records} x 1 KB records per run, MB/s, median "
             f"(min-max) of {args.rounds} round(s) after a discarded warm-up run per case",
             f"{'case':<24}" + "".join(f"{s:>24}" for s in SYSTEMS)
             + f"{'1.3x kafka':>12}{'rillet/kafka':>14}"]
    for acks, partitions in CASES:
        row = f"{f'acks={acks} {partitions} partition(s)':<24}"
        for system in SYSTEMS:
            values = seen[(system, (acks, partitions))]
            row += f"{statistics.median(values):>10.1f} ({min(values):.1f}-{max(values):.1f})".rjust(24)
        kafka = statistics.median(seen[("kafka", (acks, partitions))])
        rillet = statistics.median(seen[("rillet", (acks, partitions))])
        lines.append(row + f"{1.3 * kafka:>12.1f}{rillet / kafka:>13.2f}x")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
