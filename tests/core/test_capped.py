"""The one capped reader (issue 33 item 5): a body is refused the moment it passes the
limit, read no further than the chunk that passed it, inflated gzip counted too."""

from __future__ import annotations

import gzip
from collections.abc import AsyncIterator

import pytest

from kernel.core.capped import BadEncoding, TooLarge, read_capped

CHUNK = 64 * 1024


class Source:
    """``count`` chunks of ``chunk`` bytes, counting how many were taken."""

    def __init__(self, count: int, chunk: bytes = b"x" * CHUNK) -> None:
        self.count = count
        self.chunk = chunk
        self.taken = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for _ in range(self.count):
            self.taken += 1
            yield self.chunk


async def test_a_body_within_the_limit_is_read_whole() -> None:
    source = Source(16)
    assert await read_capped(source, 16 * CHUNK) == b"x" * 16 * CHUNK


async def test_reading_stops_at_the_chunk_that_passes_the_limit() -> None:
    source = Source(3200)  # 200 MB, never made
    with pytest.raises(TooLarge) as refused:
        await read_capped(source, 20 * 1024 * 1024)
    assert source.taken == 321  # 320 chunks are the limit; the next one is refused
    assert refused.value.limit == 20 * 1024 * 1024 and refused.value.size is None


async def test_a_declared_length_over_the_limit_is_refused_before_reading() -> None:
    source = Source(10)
    with pytest.raises(TooLarge) as refused:
        await read_capped(source, CHUNK, declared=str(200 * 1024 * 1024))
    assert source.taken == 0 and refused.value.size == 200 * 1024 * 1024


async def test_a_gzip_bomb_is_refused_by_what_it_inflates_to() -> None:
    bomb = gzip.compress(bytes(50 * 1024 * 1024))  # ~50 KB that inflate to 50 MB
    source = Source(1, bomb)
    with pytest.raises(TooLarge):
        await read_capped(source, 1024 * 1024, encoding="gzip")
    small = gzip.compress(b"hello " * 1000)
    assert await read_capped(Source(1, small), CHUNK, encoding="gzip") == b"hello " * 1000


async def test_other_or_broken_encodings_are_refused() -> None:
    with pytest.raises(BadEncoding) as other:
        await read_capped(Source(1), CHUNK, encoding="br")
    assert other.value.coding == "br" and not other.value.corrupt
    with pytest.raises(BadEncoding) as broken:
        await read_capped(Source(1, b"not gzip at all"), CHUNK, encoding="gzip")
    assert broken.value.corrupt


async def test_a_gzip_stream_cut_short_is_refused_as_corrupt() -> None:
    whole = gzip.compress(b"hello " * 1000)
    for cut in (whole[:-8], whole[: len(whole) // 2], whole[:12]):  # no trailer; half; header
        with pytest.raises(BadEncoding) as cut_short:
            await read_capped(Source(1, cut), CHUNK, encoding="gzip")
        assert cut_short.value.coding == "gzip" and cut_short.value.corrupt
    assert await read_capped(Source(1, whole), CHUNK, encoding="gzip") == b"hello " * 1000
    assert await read_capped(Source(0), CHUNK, encoding="gzip") == b""  # no body at all
