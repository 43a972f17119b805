"""AlterClientQuotas decisions, replayed into the image, its delta and its snapshot."""
from __future__ import annotations

from rillet.metadata.delta import apply_batches
from rillet.metadata.image import MetadataImage, replay
from rillet.metadata.snapshot import image_records
from rillet.protocol import errors
from rillet.quotas.alter import QuotaEntry, QuotaOp, quota_changes

ALICE = (("user", "alice"),)
DEFAULT_PAIR = (("client-id", None), ("user", None))


def _apply(image: MetadataImage, entries: list[QuotaEntry]) -> tuple[MetadataImage, list]:
    records, outcome = quota_changes(image, entries)
    return replay(image, records, image.offset + max(len(records), 1)), outcome


def test_set_change_and_remove_a_quota() -> None:
    image, outcome = _apply(MetadataImage("c"), [
        QuotaEntry(ALICE, (QuotaOp("producer_byte_rate", 1024),
                           QuotaOp("request_percentage", 50))),
        QuotaEntry((("user", None), ("client-id", None)), (QuotaOp("consumer_byte_rate", 5),))])
    assert outcome == [None, None]
    assert image.client_quotas[ALICE] == {"producer_byte_rate": 1024.0,
                                          "request_percentage": 50.0}
    assert image.client_quotas[DEFAULT_PAIR] == {"consumer_byte_rate": 5.0}
    image, outcome = _apply(image, [QuotaEntry(ALICE, (
        QuotaOp("producer_byte_rate", 0, remove=True), QuotaOp("request_percentage", 25)))])
    assert outcome == [None] and image.client_quotas[ALICE] == {"request_percentage": 25.0}
    image, _ = _apply(image, [QuotaEntry(ALICE, (QuotaOp("request_percentage", 0, True),))])
    assert ALICE not in image.client_quotas


def test_an_invalid_entry_changes_nothing_of_its_own_and_spares_the_others() -> None:
    image, outcome = _apply(MetadataImage("c"), [
        QuotaEntry(ALICE, (QuotaOp("producer_byte_rate", 10), QuotaOp("bogus", 1))),
        QuotaEntry((("client-id", "app"),), (QuotaOp("producer_byte_rate", 10),)),
        QuotaEntry(ALICE, (QuotaOp("producer_byte_rate", 1), QuotaOp("producer_byte_rate", 2))),
        QuotaEntry((("ip", "1.1.1.1"),), (QuotaOp("connection_creation_rate", 1),))])
    assert [type(e) for e in outcome] == [errors.InvalidRequest, type(None),
                                          errors.InvalidRequest, errors.InvalidRequest]
    assert dict(image.client_quotas) == {(("client-id", "app"),): {"producer_byte_rate": 10.0}}


def test_removing_an_unset_key_is_no_error_and_no_record() -> None:
    records, outcome = quota_changes(MetadataImage("c"), [
        QuotaEntry(ALICE, (QuotaOp("consumer_byte_rate", 0, remove=True),))])
    assert records == [] and outcome == [None]


def test_delta_names_changed_entities_and_snapshot_keeps_quotas() -> None:
    image = MetadataImage("c")
    records, _ = quota_changes(image, [
        QuotaEntry(ALICE, (QuotaOp("producer_byte_rate", 1024),)),
        QuotaEntry((("user", None), ("client-id", None)), (QuotaOp("request_percentage", 5),))])
    delta, new = apply_batches(image, [(1, records)], node_id=1)
    assert delta.client_quotas == {ALICE, DEFAULT_PAIR} and not delta.is_empty
    rebuilt = replay(MetadataImage("c"), image_records(new), new.offset)
    assert rebuilt.client_quotas == new.client_quotas
    # Setting the same value again changes nothing.
    again, _ = quota_changes(new, [QuotaEntry(ALICE, (QuotaOp("producer_byte_rate", 1024),))])
    assert again == []
