"""Log dir locks and formatting, in one process (the two-process cases are in test_cli.py)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from rillet.startup import StartupError
from rillet.storage_format import LOCK_FILE, META_FILE, DirLocks, ensure_formatted


def test_a_locked_dir_is_refused_naming_it_and_free_again_after_release(tmp_path: Path):
    held = DirLocks.acquire([tmp_path / "a", tmp_path / "meta"])
    assert (tmp_path / "a" / LOCK_FILE).exists() and (tmp_path / "meta" / LOCK_FILE).exists()
    with pytest.raises(StartupError, match=re.escape(f"directory {tmp_path / 'meta'} is in use")):
        DirLocks.acquire([tmp_path / "b", tmp_path / "meta"])
    # the refused attempt let go of what it had taken
    DirLocks.acquire([tmp_path / "b"]).release()
    held.release()
    DirLocks.acquire([tmp_path / "a", tmp_path / "meta"]).release()


def test_one_dir_named_twice_is_locked_once(tmp_path: Path):
    locks = DirLocks.acquire([tmp_path / "d", tmp_path / "d" / ".." / "d"])
    locks.release()


def test_an_unusable_dir_is_a_startup_error(tmp_path: Path):
    (tmp_path / "file").write_text("not a directory")
    with pytest.raises(StartupError, match="cannot use directory"):
        DirLocks.acquire([tmp_path / "file" / "sub"])


def test_each_log_dir_gets_a_directory_id_that_lasts(tmp_path: Path):
    a, b = tmp_path / "a", tmp_path / "b"
    first = ensure_formatted([a, b], 1, None)
    ids = first.directory_ids
    assert set(ids) == {a, b} and ids[a] != ids[b] and not first.failed
    assert f"directory.id={ids[a]}" in (a / META_FILE).read_text()
    assert ensure_formatted([a, b], 1, None).directory_ids == ids
    # A dir formatted before rillet had directory ids gets one, once.
    (b / META_FILE).write_text(f"version=1\ncluster.id={first.cluster_id}\nnode.id=1\n")
    added = ensure_formatted([a, b], 1, None).directory_ids[b]
    assert added != ids[b] and ensure_formatted([a, b], 1, None).directory_ids[b] == added


def test_a_log_dir_that_cannot_be_used_is_offline_not_fatal(tmp_path: Path):
    (tmp_path / "file").write_text("not a directory")
    good, bad = tmp_path / "good", tmp_path / "file" / "sub"
    locks = DirLocks.acquire([good, bad, tmp_path / "meta"], may_fail=[good, bad])
    try:
        assert list(locks.failed) == [bad] and "cannot use directory" in locks.failed[bad]
        formatted = ensure_formatted([good, bad], 1, None, failed=locks.failed)
        assert list(formatted.directory_ids) == [good] and bad in formatted.failed
    finally:
        locks.release()
    # Unusable meta.properties: the dir is offline, the others are formatted.
    broken = tmp_path / "broken"
    (broken / META_FILE).mkdir(parents=True)   # reading it fails (EISDIR)
    formatted = ensure_formatted([good, broken], 1, None)
    assert list(formatted.failed) == [broken] and list(formatted.directory_ids) == [good]
