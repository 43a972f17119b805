"""`rillet groups` (or `python -m rillet.client.groups_cli`): list consumer groups, describe
one with its lag.

Output follows kafka-consumer-groups --describe: one row per partition with
the committed offset, log end offset, lag ("-" when nothing is committed)
and the member owning it ("-" when none). A group the coordinator does not know (described
as Dead, or GROUP_ID_NOT_FOUND) gets Kafka's line "Error: Consumer group 'G' does not
exist." on stderr. Unlike kafka-consumer-groups, which exits 0 whatever happened, the exit
status tells the cases apart: 0 found (or listed), 1 no such group, 2 a usage error or a
failed request.
"""
from __future__ import annotations

import argparse
import asyncio
import sys

from ..protocol import errors
from .admin import AdminClient
from .admin_groups import PartitionLag

EXIT_FOUND, EXIT_NO_SUCH_GROUP, EXIT_FAILED = 0, 1, 2
COLUMNS = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
           "CONSUMER-ID", "HOST", "CLIENT-ID")


def format_lag(group: str, rows: list[PartitionLag]) -> str:
    table = [COLUMNS] + [
        (group, r.topic, str(r.partition),
         str(r.committed_offset) if r.committed_offset >= 0 else "-", str(r.end_offset),
         str(r.lag) if r.lag is not None else "-", r.member_id or "-", r.host or "-",
         r.client_id or "-") for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(COLUMNS))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip()
                     for row in table)


async def _run(args: argparse.Namespace) -> int:
    async with AdminClient(args.bootstrap_server) as admin:
        if args.list:
            for group_id, _, state in await admin.list_groups():
                print(f"{group_id}\t{state}" if args.state else group_id)
            return 0
        try:
            group = await admin.describe_group(args.group)
        except errors.GroupIdNotFound:
            group = None
        if group is None or group.state == "Dead":   # DescribeGroups v0-5 for "unknown"
            print(f"Error: Consumer group '{args.group}' does not exist.", file=sys.stderr)
            return EXIT_NO_SUCH_GROUP
        rows = await admin.describe_group_lag(args.group, group)
        print(f"Consumer group '{args.group}' is {group.state} "
              f"with {len(group.members)} member(s).")
        print(format_lag(args.group, rows))
        return EXIT_FOUND


def main(argv: list[str] | None = None, prog: str = "rillet-groups") -> int:
    parser = argparse.ArgumentParser(prog=prog, description="List consumer groups; describe "
                                     "one with its lag.", epilog="Exit status: 0 found or "
                                     "listed, 1 no such group, 2 usage error or failed "
                                     "request.")
    parser.add_argument("--bootstrap-server", required=True)
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--list", action="store_true", help="list groups")
    what.add_argument("--describe", action="store_true", help="describe --group with lag")
    parser.add_argument("--group", help="group id for --describe")
    parser.add_argument("--state", action="store_true", help="with --list: show states")
    args = parser.parse_args(argv)
    if args.describe and not args.group:
        parser.error("--describe needs --group")
    try:
        return asyncio.run(_run(args))
    except Exception as exc:  # a CLI prints the reason, not a traceback
        print(f"{prog}: {exc}", file=sys.stderr)
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
