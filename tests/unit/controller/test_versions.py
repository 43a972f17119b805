"""The version a broker sends a controller: the highest both sides serve (pure)."""
from __future__ import annotations

from types import SimpleNamespace as NS

import pytest

from rillet.controller.versions import ApiRanges, choose_version
from rillet.protocol import errors

PEER = "controller at 127.0.0.1:9093"


def test_the_highest_version_both_serve_is_chosen() -> None:
    theirs = ApiRanges({63: (0, 1), 62: (0, 2), 56: (0, 3)})
    assert choose_version(63, (0, 1), theirs, PEER) == 1
    assert choose_version(62, (0, 2), theirs, PEER) == 2
    # The peer serves more than this broker sends: this broker's top.
    assert choose_version(56, (2, 2), theirs, PEER) == 2


def test_an_older_peer_is_asked_at_its_top() -> None:
    theirs = ApiRanges({63: (0, 0), 62: (0, 1)})
    assert choose_version(63, (0, 1), theirs, PEER) == 0
    assert choose_version(62, (0, 2), theirs, PEER) == 1


def test_ranges_that_do_not_meet_are_unsupported_with_both_ranges_named() -> None:
    with pytest.raises(errors.UnsupportedVersion) as err:
        choose_version(56, (2, 2), ApiRanges({56: (0, 1)}), PEER)
    assert err.value.code == 35
    assert "v0-v1" in str(err.value) and "v2-v2" in str(err.value) and PEER in str(err.value)
    with pytest.raises(errors.UnsupportedVersion):
        choose_version(19, (7, 7), ApiRanges({19: (8, 9)}), PEER)


def test_an_api_the_peer_does_not_serve_is_unsupported() -> None:
    with pytest.raises(errors.UnsupportedVersion) as err:
        choose_version(73, (0, 0), ApiRanges({63: (0, 1)}), PEER)
    assert "does not serve api 73" in str(err.value)


def test_a_bad_range_of_ours_is_a_bug() -> None:
    with pytest.raises(ValueError):
        choose_version(63, (2, 1), ApiRanges({63: (0, 5)}), PEER)


def test_ranges_are_read_from_an_api_versions_answer_and_its_error_raises() -> None:
    key = NS(api_key=63, min_version=0, max_version=1)
    assert ApiRanges.from_response(NS(error_code=0, api_keys=[key])).ranges == {63: (0, 1)}
    with pytest.raises(errors.UnsupportedVersion):
        ApiRanges.from_response(NS(error_code=35, api_keys=[key]))
