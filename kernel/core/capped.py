"""Bodies whose size someone outside decides (a file from Telegram, a page, an API's
answer), read in chunks with a running total: refused the moment the total passes the
limit, so no more than the limit and one chunk is ever held. The one such reader: every
download goes through :func:`read_capped`."""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterable


class BodyRefused(Exception):
    """A body not read to its end; the caller words it for its reader."""


class TooLarge(BodyRefused):
    """More than ``limit`` bytes (inflated, when compressed). ``size``: what the sender
    declared (Content-Length), when it was the declaration that told."""

    def __init__(self, limit: int, size: int | None = None) -> None:
        super().__init__(f"larger than {limit} bytes")
        self.limit = limit
        self.size = size


class BadEncoding(BodyRefused):
    """Compressed in a way not read (``corrupt``: gzip that does not inflate, or is cut short)."""

    def __init__(self, coding: str, *, corrupt: bool = False) -> None:
        super().__init__("corrupt gzip" if corrupt else "an unread content encoding")
        self.coding = coding
        self.corrupt = corrupt


def declared_size(value: str | None) -> int | None:
    """A Content-Length header's value as a number; None when absent or malformed."""
    value = (value or "").strip()
    return int(value) if value.isdigit() and len(value) < 20 else None


async def read_capped(
    chunks: AsyncIterable[bytes],
    limit: int,
    *,
    declared: str | None = None,
    encoding: str | None = None,
) -> bytes:
    """The whole body, at most ``limit`` bytes; TooLarge as soon as more arrive (or when
    ``declared``, the Content-Length, says so before anything is read). ``encoding`` is
    the Content-Encoding of raw ``chunks``: gzip is inflated here a bounded piece at a
    time and both what came and what it inflated to are held to ``limit``; any other
    coding is BadEncoding. On refusal nothing read is kept."""
    size = declared_size(declared)
    if size is not None and size > limit:
        raise TooLarge(limit, size)
    coding = (encoding or "").strip().lower()
    if coding in ("", "identity"):
        inflater = None
    elif coding in ("gzip", "x-gzip"):
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    else:
        raise BadEncoding(coding)
    kept: list[bytes] = []
    try:
        await _gather(chunks, limit, inflater, coding, kept)
    except BaseException:
        kept.clear()  # a refusal's traceback keeps this frame: not what was read
        raise
    return b"".join(kept)


async def _gather(
    chunks: AsyncIterable[bytes],
    limit: int,
    inflater: zlib._Decompress | None,
    coding: str,
    kept: list[bytes],
) -> None:
    received = total = 0
    async for chunk in chunks:
        received += len(chunk)
        if received > limit:
            raise TooLarge(limit)
        if inflater is not None:
            try:  # at most one byte past the limit comes out: the limit is on the result
                chunk = inflater.decompress(chunk, limit - total + 1)
            except zlib.error:
                raise BadEncoding(coding, corrupt=True) from None
        total += len(chunk)
        if total > limit:
            raise TooLarge(limit)
        kept.append(chunk)
    if inflater is not None and received and not inflater.eof:
        raise BadEncoding(coding, corrupt=True)  # cut short: the gzip stream never ended
