"""Log dir locks and formatting, in one process (the two-process cases are in test_cli.py)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from rillet.startup import StartupError
from rillet.storage_format import LOCK_FILE, DirLocks


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
