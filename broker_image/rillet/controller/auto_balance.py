"""The periodic leader rebalance (auto.leader.rebalance.enable): a loop on every node that
acts only while the node is the active controller (Controller.balance_leaders)."""
from __future__ import annotations

import asyncio
import logging
from typing import Any

from ..protocol import errors

log = logging.getLogger(__name__)


async def run_leader_rebalance(controller: Any, interval_s: float, stop: asyncio.Event) -> None:
    while not stop.is_set():
        try:
            await asyncio.wait_for(stop.wait(), interval_s)
            return
        except asyncio.TimeoutError:
            pass
        try:
            await controller.balance_leaders()
        except errors.KafkaError as exc:
            log.debug("leader rebalance skipped: %s", exc)
        except Exception:
            log.exception("leader rebalance failed")
