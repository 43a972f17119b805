"""Growing the brokers' claims from spec.storage.size: the pure decisions."""
from __future__ import annotations

import pytest

from rillet_operator import storage_growth as sg
from rillet_operator.builders import cluster as b
from rillet_operator.spec import parse_cluster


def claims(*sizes: tuple[str, str | None]) -> list[sg.ClaimView]:
    return [sg.ClaimView(f"data-events-broker-{i}", i, req, cap)
            for i, (req, cap) in enumerate(sizes)]


@pytest.mark.parametrize("text, n", [("256Mi", 256 * 2**20), ("1Gi", 2**30), ("1G", 10**9),
                                     ("1.5Gi", 3 * 2**29), ("1000", 1000)])
def test_quantities(text, n):
    assert sg.quantity_bytes(text) == n


def test_quantity_refuses_nonsense():
    with pytest.raises(ValueError):
        sg.quantity_bytes("lots")


def test_same_size_does_nothing():
    got = sg.decide("256Mi", claims(("256Mi", "256Mi"), ("256Mi", "256Mi")), "standard", False)
    assert (got.patch, got.step) == (None, None)


def test_growth_goes_one_claim_at_a_time_lowest_broker_first():
    got = sg.decide("512Mi", claims(("256Mi", "256Mi"), ("256Mi", "256Mi")), "fast", True)
    assert got.patch == "data-events-broker-0" and got.resizing
    # Broker 0's claim asked for 512Mi, its volume not grown yet: nothing else is patched.
    got = sg.decide("512Mi", claims(("512Mi", "256Mi"), ("256Mi", "256Mi")), "fast", True)
    assert got.patch is None and got.resizing
    assert "data-events-broker-0 grows to 512Mi (has 256Mi)" in got.step.message
    # Grown: the next one.
    got = sg.decide("512Mi", claims(("512Mi", "512Mi"), ("256Mi", "256Mi")), "fast", True)
    assert got.patch == "data-events-broker-1"
    # A volume that came back larger than asked is grown all the same.
    got = sg.decide("512Mi", claims(("512Mi", "1Gi"), ("512Mi", "512Mi")), "fast", True)
    assert (got.patch, got.step) == (None, None)


def test_an_unbound_claim_waits_for_its_broker():
    got = sg.decide("512Mi", claims(("256Mi", None)), "fast", True)
    assert got.patch is None and got.resizing and "wait to be bound" in got.step.message
    # An unbound claim that already has the size is no resize under way.
    assert sg.decide("512Mi", claims(("512Mi", None)), "fast", True).step is None


def test_a_shrink_is_refused_and_nothing_is_patched():
    got = sg.decide("128Mi", claims(("256Mi", "256Mi"), ("256Mi", "256Mi")), "fast", True)
    assert got.patch is None and got.step.reason == sg.SHRINK_REFUSED
    assert "cannot shrink" in got.step.message and not got.resizing


def test_a_class_without_expansion_says_so_and_nothing_is_patched():
    got = sg.decide("512Mi", claims(("256Mi", "256Mi")), "standard", False)
    assert got.patch is None and got.step.reason == sg.UNSUPPORTED
    assert "StorageClass standard does not allow volume expansion" in got.step.message


def test_the_statefulset_keeps_the_claim_template_it_was_made_with():
    def sts(size):
        spec = parse_cluster("events", "prod", {"replicas": 3, "storage": {
            "type": "persistent-claim", "size": size}})
        return b.statefulset(spec, "MkU3OEVBNTcwNTJENDM2Qg", True)
    current, wanted = sts("256Mi"), sts("512Mi")
    kept = sg.keep_claim_template(wanted, current)
    assert kept["spec"]["volumeClaimTemplates"] == current["spec"]["volumeClaimTemplates"]
    assert kept["spec"]["template"] == wanted["spec"]["template"]
    assert sg.keep_claim_template(wanted, None) is wanted


def test_status_lists_each_claim():
    cs = claims(("512Mi", "256Mi"), ("256Mi", None))
    got = sg.status(sg.decide("512Mi", cs, "fast", True), cs)
    assert got == {"size": "512Mi", "claims": [
        {"name": "data-events-broker-0", "requested": "512Mi", "capacity": "256Mi"},
        {"name": "data-events-broker-1", "requested": "256Mi"}]}
