"""The replication checker: lost, duplicated, reordered and conflicting records."""
from __future__ import annotations

from tests.checker import Copy, Read, Write, check, check_exactly_once


def _writes(partition: int, values: range, producer: str = "") -> list[Write]:
    return [Write(partition, b"k", str(v).encode(), producer) for v in values]


def _log(partition: int, values: list[int], first_offset: int = 0) -> list[Read]:
    return [Read(partition, first_offset + i, b"k", str(v).encode())
            for i, v in enumerate(values)]


def test_everything_read_back_in_order_is_ok() -> None:
    report = check(_writes(0, range(5)) + _writes(1, range(3)),
                   _log(0, [0, 1, 2, 3, 4]) + _log(1, [0, 1, 2]))
    assert report.ok, report.summary()
    assert report.partitions[0].acked == 5 and report.partitions[0].read == 5
    assert report.partitions[1].read == 3


def test_an_acknowledged_write_never_read_is_lost() -> None:
    report = check(_writes(0, range(4)), _log(0, [0, 1, 3]))
    assert not report.ok
    assert report.lost == [Write(0, b"k", b"2")]
    assert "1 lost" in report.summary()


def test_a_write_read_back_in_another_partition_is_lost_from_its_own() -> None:
    report = check([Write(0, b"k", b"x")], [Read(1, 0, b"k", b"x")])
    assert report.partitions[0].lost == (Write(0, b"k", b"x"),)
    assert report.partitions[1].unacked == 1


def test_a_write_stored_twice_is_a_duplicate() -> None:
    report = check(_writes(0, range(3)), _log(0, [0, 1, 1, 2]))
    (dup,) = report.partitions[0].duplicates
    assert (dup.value, dup.offsets) == (b"1", (1, 2))
    assert not report.ok


def test_reading_the_same_offset_again_is_not_a_duplicate() -> None:
    reads = _log(0, [0, 1, 2]) + _log(0, [1, 2], first_offset=1)  # a consumer re-read
    report = check(_writes(0, range(3)), reads)
    assert report.ok, report.summary()
    assert report.partitions[0].read == 3


def test_one_offset_read_with_two_contents_is_a_conflict() -> None:
    reads = _log(0, [0, 1]) + [Read(0, 1, b"k", b"other")]
    report = check(_writes(0, range(2)), reads)
    (conflict,) = report.partitions[0].conflicts
    assert conflict.offset == 1 and conflict.second.value == b"other"
    assert not report.partitions[0].lost  # read once, so not lost, though in conflict
    assert not report.ok


def test_a_write_acknowledged_later_but_stored_earlier_is_out_of_order() -> None:
    report = check(_writes(0, range(4)), _log(0, [0, 2, 1, 3]))
    # "2" was acknowledged after "1" but stored at offset 1, before "1" at offset 2.
    (violation,) = report.partitions[0].order_violations
    assert (violation.earlier.value, violation.earlier_offset) == (b"1", 2)
    assert (violation.later.value, violation.later_offset) == (b"2", 1)
    assert not report.ok


def test_order_is_only_promised_within_one_producer() -> None:
    # a's and b's writes interleave in the log unlike their acknowledgements: allowed.
    acked = _writes(0, range(0, 2), "a") + _writes(0, range(10, 12), "b")
    report = check(acked, _log(0, [10, 0, 11, 1]))
    assert report.ok, report.summary()


def test_lost_writes_do_not_count_as_out_of_order() -> None:
    report = check(_writes(0, range(3)), _log(0, [0, 2]))
    assert report.partitions[0].order_violations == ()
    assert len(report.partitions[0].lost) == 1


def test_records_nobody_saw_acknowledged_are_counted_not_failed() -> None:
    report = check(_writes(0, range(2)), _log(0, [0, 1, 2, 3]))
    assert report.ok
    assert report.partitions[0].unacked == 2


def test_plain_tuples_are_accepted() -> None:
    report = check([(0, None, b"v")], [(0, 0, None, b"v")])
    assert report.ok and report.partitions[0].acked == 1


def test_summary_names_each_partition_and_shows_examples() -> None:
    report = check(_writes(0, range(2)) + _writes(3, range(1)), _log(0, [0]))
    text = report.summary()
    assert "partition 0: 2 acked, 1 read, 1 lost" in text
    assert "partition 3: 1 acked, 0 read, 1 lost" in text
    assert "lost: Write(partition=3" in text


# -- exactly once through transactions -----------------------------------------------------------

INPUTS = [b"a", b"b", b"c"]


def test_every_input_copied_once_by_committed_attempts_is_ok() -> None:
    report = check_exactly_once(INPUTS, [(b"a", 1), (b"b", 1), (b"c", 3)], aborted=[2])
    assert report.ok, report.summary()
    assert (report.inputs, report.outputs) == (3, 3)


def test_a_copy_twice_a_missing_input_an_aborted_attempt_and_a_stray_are_reported() -> None:
    report = check_exactly_once(INPUTS, [(b"a", 1), (b"a", 3), (b"b", 2), (b"x", 3)],
                                aborted=[2])
    assert not report.ok
    assert report.duplicates == {b"a": 2}
    assert report.missing == (b"c",)
    assert report.aborted_visible == (Copy(b"b", 2),)
    assert report.strays == (Copy(b"x", 3),)
    assert "1 duplicated, 1 missing, 1 from aborted transactions visible, 1 not from an input" \
        in report.summary()
