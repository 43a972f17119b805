"""Decompression is bounded: a small batch claiming gigabytes is refused, not allocated."""
from __future__ import annotations

import subprocess
import sys

import cramjam
import pytest

from rillet.compression import Compression, compress, decompress
from rillet.protocol.errors import CorruptMessage
from tests.bombs import zstd_rle_bomb

LIMIT = 64 << 10


@pytest.mark.parametrize("codec", [Compression.GZIP, Compression.SNAPPY, Compression.LZ4,
                                   Compression.ZSTD])
def test_a_batch_that_fits_decompresses_and_one_past_the_limit_is_refused(codec):
    assert decompress(codec, compress(codec, bytes(LIMIT)), LIMIT) == bytes(LIMIT)
    with pytest.raises(CorruptMessage, match=str(LIMIT)):
        decompress(codec, compress(codec, bytes(LIMIT + 1)), LIMIT)


def test_a_raw_snappy_block_is_judged_by_the_length_it_claims():
    """librdkafka writes raw snappy: its header states the size, checked before anything."""
    block = bytes(cramjam.snappy.compress_raw(bytes(LIMIT + 1)))
    with pytest.raises(CorruptMessage, match="claims"):
        decompress(Compression.SNAPPY, block, LIMIT)


def test_the_bomb_is_what_it_claims():
    bomb = zstd_rle_bomb(1 << 20)
    assert len(bomb) < 100 and decompress(Compression.ZSTD, bomb) == bytes(1 << 20)


_UNDER_LIMIT = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
from tests.bombs import zstd_rle_bomb
bomb = zstd_rle_bomb(3 << 30)
if sys.argv[1] == "cramjam":
    import cramjam
    cramjam.zstd.decompress(bomb)
else:
    from rillet.compression import Compression, decompress
    from rillet.protocol.errors import CorruptMessage
    try:
        decompress(Compression.ZSTD, bomb)
    except CorruptMessage as exc:
        print("refused:", exc)
"""


def _under_1gib(mode: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", _UNDER_LIMIT, mode], capture_output=True,
                          timeout=120, cwd=str(__import__("pathlib").Path(__file__).parents[2]))


def test_a_98_kb_batch_of_3_gb_is_refused_where_memory_is_short():
    """In a process limited to 1 GiB (as a pod is), cramjam alone aborts the process on the
    bomb; rillet's decompress refuses it and the process lives on."""
    alone = _under_1gib("cramjam")
    assert alone.returncode == -6, (alone.returncode, alone.stderr[-300:])  # SIGABRT
    bounded = _under_1gib("rillet")
    assert bounded.returncode == 0, bounded.stderr[-2000:]
    assert b"refused:" in bounded.stdout
