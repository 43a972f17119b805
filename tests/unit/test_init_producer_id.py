"""apis/init_producer_id.py: an idempotent producer's InitProducerId while no controller
can hand out producer ids (an election under way).

The answer must be COORDINATOR_LOAD_IN_PROGRESS, as Kafka 3.5+ gives: clients retry it as
it is. COORDINATOR_NOT_AVAILABLE sent kafka-python 3.0.12's idempotent producer to
FindCoordinator with a null key, which a broker closes as malformed, and it never got an id
(its flush() timed out in tests/integration/test_fenced_leader_metadata.py)."""
from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from rillet.apis.init_producer_id import init_producer_id
from rillet.apis.registry import RequestContext
from rillet.protocol import errors
from rillet.protocol.build import build
from rillet.protocol.codec import RequestHeader, request_schema

VERSION = 4


class _Controller:
    def __init__(self, fails: bool) -> None:
        self.fails = fails

    async def next_producer_id(self) -> int:
        if self.fails:
            raise errors.NotController("no active controller known yet")
        return 7000


@dataclass
class _Broker:
    controller: Any
    authorizer: Any = None


def _ask(controller: _Controller) -> Any:
    req = build(request_schema(22, VERSION), {
        "transactional_id": None, "transaction_timeout_ms": 60000, "producer_id": -1,
        "producer_epoch": -1})
    ctx = RequestContext(_Broker(controller),  # type: ignore[arg-type]
                         RequestHeader(22, VERSION, 5, "producer"), "127.0.0.1:1", 1, "broker")
    return asyncio.run(init_producer_id(ctx, req))


def test_no_controller_to_give_an_id_is_answered_coordinator_load_in_progress() -> None:
    answer = _ask(_Controller(fails=True))
    assert answer.error_code == errors.CoordinatorLoadInProgress.code
    assert answer.producer_id == -1


def test_an_id_is_handed_out_when_the_controller_gives_one() -> None:
    answer = _ask(_Controller(fails=False))
    assert answer.error_code == 0 and answer.producer_id == 7000 and answer.producer_epoch == 0
