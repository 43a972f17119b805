"""The broker's client quotas (Kafka's ClientQuotaManager): what each group of clients used,
and how long it must wait.

Three quotas are enforced, each looked up on its own (quotas/entity.py gives the order):
producer_byte_rate (the bytes of produce requests), consumer_byte_rate (the bytes of fetch
responses) and request_percentage (the time spent handling a group's requests, as a
percentage of one thread: 100 is one thread's whole time). controller_mutation_rate is
stored and described, not enforced. Each group of clients sharing a quota has one
RateQuota per quota over ``quota.window.num`` samples of ``quota.window.size.seconds``;
a group idle for an hour is forgotten. A request that takes its group over the bound is
answered with the time the group must wait (Kafka's throttle_time_ms); the connection is
muted for that time (server.py), as Kafka mutes the channel (KIP-219).

The values come from the metadata image handed in with each call (the quotas every node
replays from the metadata log), so a change applies from the next request on. Owned by the
Broker; event loop only.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Mapping

from .entity import REQUEST_PERCENTAGE, Entity, resolve
from .rate import RateQuota

IDLE_S = 3600.0   # a group's sensors are dropped after this long without a request
PURGE_EVERY = 1024   # sensors created between two purges of idle ones
_PREFIX = "User:"
UNBOUNDED = 2**31 - 1

SensorKey = tuple[str, str, str]   # (quota key, user tag, client id tag)


def user_of(principal: str) -> str:
    """The user entity name of a principal ("User:alice" -> "alice"), as Kafka's."""
    return principal[len(_PREFIX):] if principal.startswith(_PREFIX) else principal


class ClientQuotaManager:
    def __init__(self, config: Callable[[], Any],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._config = config
        self._clock = clock
        self._window: tuple[int, float] = (11, 1.0)
        self._sensors: dict[SensorKey, tuple[RateQuota, list[float]]] = {}
        self._created = 0

    def record(self, quotas: Mapping[Entity, Mapping[str, float]], key: str, user: str,
               client_id: str, amount: float) -> float:
        """Record ``amount`` for the group holding (user, client_id) under quota ``key``;
        the seconds it must now wait (0: within its quota, or no quota applies)."""
        sensor = self._sensor(quotas, key, user, client_id)
        if sensor is None:
            return 0.0
        now = self._clock()
        sensor.record(amount, now)
        wait = sensor.throttle_s(now)
        if key == REQUEST_PERCENTAGE:
            # As Kafka's request quota: at most one window. Byte rates wait all they need (a
            # request larger than a window's worth would otherwise pass early), but a handler
            # step of 200 ms under request_percentage=1 would mute a client for 10 s.
            return min(wait, self._window[1])
        return wait

    def allowance(self, quotas: Mapping[Entity, Mapping[str, float]], key: str, user: str,
                  client_id: str) -> int:
        """The most one request may record and pass in a fresh window: bound times the
        shortest span a rate is taken over (a fetch larger than this would be throttled
        and retried forever). Without a quota, a number no request reaches."""
        match = resolve(quotas, key, user, client_id) if quotas else None
        if match is None:
            return UNBOUNDED
        self._check_window()
        samples, window_s = self._window
        return max(1, int(match.bound * max(samples - 1, 1) * window_s))

    def unrecord(self, quotas: Mapping[Entity, Mapping[str, float]], key: str, user: str,
                 client_id: str, amount: float) -> None:
        sensor = self._sensor(quotas, key, user, client_id)
        if sensor is not None:
            sensor.unrecord(amount, self._clock())

    def _sensor(self, quotas: Mapping[Entity, Mapping[str, float]], key: str, user: str,
                client_id: str) -> RateQuota | None:
        if not quotas:
            return None
        match = resolve(quotas, key, user, client_id)
        if match is None:
            return None
        self._check_window()
        skey = (key, *match.tags)
        found = self._sensors.get(skey)
        now = self._clock()
        if found is None:
            self._purge_idle(now)
            samples, window_s = self._window
            found = self._sensors[skey] = (RateQuota(match.bound, samples, window_s), [now])
        sensor, last = found
        sensor.bound = match.bound
        last[0] = now
        return sensor

    def _check_window(self) -> None:
        """Sensors of a changed window (quota.window.*, a dynamic config) start afresh."""
        config = self._config()
        window = (int(config["quota.window.num"]),
                  float(config["quota.window.size.seconds"]))
        if window != self._window:
            self._window = window
            self._sensors.clear()

    def _purge_idle(self, now: float) -> None:
        self._created += 1
        if self._created % PURGE_EVERY:
            return
        for skey in [k for k, (_, last) in self._sensors.items() if now - last[0] > IDLE_S]:
            del self._sensors[skey]
