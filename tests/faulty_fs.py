"""A failing disk for one log dir: a FUSE passthrough file system whose write and fsync
answer EIO while a switch file exists (device-mapper is not in this kernel; FUSE is).

    with FaultyDisk(backing, mountpoint, switch) as disk:   # a child process serves it
        ... broker writes under mountpoint ...
        disk.fail()      # from now on every write(2) and fsync(2) there gets EIO
        disk.fail(reads=True)   # a dead disk: every call below the mount root gets EIO,
                                # reads, lookups and directory listings too (root or not)
        disk.fail(reads=True, top_files=True)   # the same, but the files at the top
                                # (.lock, meta.properties) still work: only listing the
                                # dir and what is in its subdirectories fail
        disk.heal()

The file system runs in its own process (`python -m tests.faulty_fs BACKING MOUNT SWITCH`)
mounted with libfuse3's auto_unmount, so the mount goes away with that process even when the
test dies; `stop` unmounts and waits for it. Needs root (or fusermount3 rights) and
/dev/fuse. Reads, and everything else, pass through to `backing`, which keeps the data:
after `heal` and a broker restart the log dir is whole again, as a repaired disk.
"""
from __future__ import annotations

import errno
import importlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

FUSE_CLI = shutil.which("fusermount3") or shutil.which("fusermount")
DEAD = "all"   # the switch's content when reads fail too
DEAD_BELOW = "below"   # ... all but the top-level files'


def can_make_faulty_disks() -> bool:
    if os.geteuid() != 0 or not os.path.exists("/dev/fuse") or FUSE_CLI is None:
        return False
    try:
        importlib.import_module("mfusepy")   # loads libfuse3 too
    except (ImportError, OSError, EnvironmentError):
        return False
    return True


class FaultyDisk:
    """The mount and its serving process (see the module doc)."""

    def __init__(self, backing: Path, mountpoint: Path, switch: Path) -> None:
        self.backing, self.mountpoint, self.switch = Path(backing), Path(mountpoint), Path(switch)
        self._proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> "FaultyDisk":
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    def start(self, timeout: float = 15.0) -> None:
        self.backing.mkdir(parents=True, exist_ok=True)
        self.mountpoint.mkdir(parents=True, exist_ok=True)
        self.heal()
        # Its output (libfuse's and fusermount3's) beside the mount point, not in the test's.
        with open(self.mountpoint.with_name(self.mountpoint.name + ".fuse.log"), "ab") as out:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "tests.faulty_fs", str(self.backing),
                 str(self.mountpoint), str(self.switch)],
                cwd=Path(__file__).resolve().parent.parent, stdout=out, stderr=out)
        deadline = time.monotonic() + timeout
        while not os.path.ismount(self.mountpoint):
            if self._proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the faulty file system did not mount at {self.mountpoint}")
            time.sleep(0.05)

    def fail(self, reads: bool = False, top_files: bool = False) -> None:
        self.switch.write_text((DEAD_BELOW if top_files else DEAD) if reads else "writes")

    def heal(self) -> None:
        self.switch.unlink(missing_ok=True)

    def stop(self) -> None:
        if os.path.ismount(self.mountpoint) and FUSE_CLI is not None:
            subprocess.run([FUSE_CLI, "-u", "-z", str(self.mountpoint)], check=False,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if self._proc is not None:
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(timeout=10)
            self._proc = None


def _serve(backing: str, mountpoint: str, switch: str) -> None:
    import mfusepy as fuse

    class Passthrough(fuse.Operations):  # type: ignore[misc]
        """Every call on the backing dir; write and fsync fail while `switch` exists."""

        use_ns = True

        def _full(self, path: str) -> str:
            return os.path.join(backing, path.lstrip("/"))

        @staticmethod
        def _mode() -> str | None:
            try:
                with open(switch) as f:
                    return f.read()
            except FileNotFoundError:
                return None

        @staticmethod
        def _below_top(path: str) -> bool:
            """The dir itself (its listing) or anything in a subdirectory."""
            return path == "/" or path.count("/") > 1

        def _failing(self, path: str) -> bool:
            """Whether a write or fsync of `path` fails."""
            mode = self._mode()
            return mode is not None and (mode != DEAD_BELOW or self._below_top(path))

        def _dead(self, path: str) -> None:
            """EIO for every call while the switch says DEAD (the mount root's own
            attributes excepted, so the mount stays a mount `stop` can unmount); with
            DEAD_BELOW, for the dir's listing and what is in its subdirectories only."""
            mode = self._mode()
            if mode == DEAD or (mode == DEAD_BELOW and self._below_top(path)):
                raise fuse.FuseOSError(errno.EIO)

        def getattr(self, path: str, fh: Any = None) -> dict[str, Any]:
            if path != "/":
                self._dead(path)
            st = os.lstat(self._full(path))
            return {k: getattr(st, k) for k in ("st_mode", "st_nlink", "st_size", "st_uid",
                                                "st_gid", "st_atime", "st_mtime", "st_ctime")}

        def readdir(self, path: str, fh: Any) -> list[str]:
            self._dead(path)
            return [".", "..", *os.listdir(self._full(path))]

        def statfs(self, path: str) -> dict[str, Any]:
            st = os.statvfs(self._full(path))
            return {k: getattr(st, k) for k in ("f_bavail", "f_bfree", "f_blocks", "f_bsize",
                                                "f_favail", "f_ffree", "f_files", "f_flag",
                                                "f_frsize", "f_namemax")}

        def access(self, path: str, amode: int) -> int:
            return 0 if os.access(self._full(path), amode) else -errno.EACCES

        def mkdir(self, path: str, mode: int) -> None:
            self._dead(path)
            os.mkdir(self._full(path), mode)

        def rmdir(self, path: str) -> None:
            os.rmdir(self._full(path))

        def unlink(self, path: str) -> None:
            os.unlink(self._full(path))

        def rename(self, old: str, new: str) -> None:
            os.rename(self._full(old), self._full(new))

        def chmod(self, path: str, mode: int) -> None:
            os.chmod(self._full(path), mode)

        def chown(self, path: str, uid: int, gid: int) -> None:
            os.chown(self._full(path), uid, gid)

        def utimens(self, path: str, times: Any = None) -> None:
            os.utime(self._full(path), ns=times)

        def truncate(self, path: str, length: int, fh: Any = None) -> None:
            if self._failing(path):
                raise fuse.FuseOSError(errno.EIO)
            os.truncate(self._full(path), length)

        # Writes come with their offset (pwrite): O_APPEND on the backing file would move
        # them all to its end.
        def open(self, path: str, flags: int) -> int:
            self._dead(path)
            return os.open(self._full(path), flags & ~os.O_APPEND)

        def create(self, path: str, mode: int, fi: Any = None) -> int:
            self._dead(path)
            # Read-write whatever the caller asked: the kernel may read through this handle.
            return os.open(self._full(path), os.O_RDWR | os.O_CREAT, mode)

        def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
            self._dead(path)
            return os.pread(fh, size, offset)

        def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
            if self._failing(path):
                raise fuse.FuseOSError(errno.EIO)
            return os.pwrite(fh, data, offset)

        def flush(self, path: str, fh: int) -> None:
            return None

        def fsync(self, path: str, datasync: int, fh: int) -> None:
            if self._failing(path):
                raise fuse.FuseOSError(errno.EIO)
            (os.fdatasync if datasync else os.fsync)(fh)

        def fsyncdir(self, path: str, datasync: int, fh: Any) -> None:
            if self._failing(path):
                raise fuse.FuseOSError(errno.EIO)

        def release(self, path: str, fh: int) -> None:
            os.close(fh)

    # default_permissions: the kernel checks modes as for a local disk; allow_other: the
    # broker may run as another user than this process (root here, but say it).
    fuse.FUSE(Passthrough(), mountpoint, foreground=True, nothreads=True, auto_unmount=True,
              allow_other=True, default_permissions=True)


if __name__ == "__main__":
    _serve(*sys.argv[1:4])
