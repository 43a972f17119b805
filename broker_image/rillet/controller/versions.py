"""Which version of a request a broker sends a controller: the highest that both sides
support, from the controller's ApiVersions answer on that connection (Kafka's
NodeApiVersions). Pure: controller/channel.py asks ApiVersions on every new connection
and keeps the answer with it.

Why per connection and not per controller id: a controller restarted on a newer or older
rillet (a rolling upgrade or a rollback) answers on a new connection, and the new answer is
the one that holds. A failed exchange says nothing about versions: a network fault only
closes the connection, and the next one asks again.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from ..protocol import errors

# The ApiVersions version the channel asks with: v0 is answered by every Kafka and rillet
# controller, and its ranges are all the choice needs (v3 only adds the client's software
# name and feature levels; asking a higher version than the peer serves costs a retry).
API_VERSIONS, API_VERSIONS_VERSION = 18, 0


@dataclass(frozen=True)
class ApiRanges:
    """A peer's ApiVersions answer: api key -> (min, max) version it serves."""
    ranges: Mapping[int, tuple[int, int]]

    @classmethod
    def from_response(cls, resp: Any) -> "ApiRanges":
        """From a decoded ApiVersions response; an error code in it raises (as Kafka's
        client closes such a connection: it cannot know what to send)."""
        code = int(getattr(resp.error_code, "value", resp.error_code))
        if code:
            cls_ = errors.error_for_code(code)
            raise cls_(f"controller refused ApiVersions: error {code} ({cls_.__name__})")
        return cls({int(k.api_key): (int(k.min_version), int(k.max_version))
                    for k in resp.api_keys})


def choose_version(api_key: int, ours: tuple[int, int], theirs: ApiRanges,
                   peer: str) -> int:
    """The highest version of `api_key` in both `ours` (what this broker can build and
    read) and the peer's range. UnsupportedVersion, saying both ranges, when there is none
    (the peer does not serve the API, or the ranges do not meet)."""
    low, high = ours
    if low > high:
        raise ValueError(f"api {api_key}: bad version range {ours}")
    their = theirs.ranges.get(api_key)
    if their is None:
        raise errors.UnsupportedVersion(
            f"{peer} does not serve api {api_key} (this broker sends v{low}-v{high})")
    top = min(high, their[1])
    if top < max(low, their[0]):
        raise errors.UnsupportedVersion(
            f"no version of api {api_key} in common with {peer}: it serves "
            f"v{their[0]}-v{their[1]}, this broker sends v{low}-v{high}")
    return top
