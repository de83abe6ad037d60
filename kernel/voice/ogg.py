"""Just enough of the Ogg container to check that bytes are an Ogg/Opus stream and to
tell its length (Telegram shows the duration given with sendVoice)."""

from __future__ import annotations

OPUS_RATE = 48_000  # Opus granule positions always count 48 kHz samples


def opus_duration(data: bytes) -> float:
    """Seconds of audio in an Ogg/Opus stream; ValueError if it is not one."""
    pages = list(_pages(data))
    if not pages:
        raise ValueError("not an Ogg stream")
    first = pages[0][1]
    if not first.startswith(b"OpusHead") or len(first) < 19:
        raise ValueError("the first Ogg packet is not OpusHead")
    pre_skip = int.from_bytes(first[10:12], "little")
    granule = max(g for g, _ in pages)
    return max(0.0, (granule - pre_skip) / OPUS_RATE)


def _pages(data: bytes) -> list[tuple[int, bytes]]:
    """(granule position, body) of each page; ValueError on a broken page."""
    pages: list[tuple[int, bytes]] = []
    pos = 0
    while pos < len(data):
        if data[pos : pos + 4] != b"OggS" or len(data) < pos + 27:
            raise ValueError(f"no Ogg page at byte {pos}")
        granule = int.from_bytes(data[pos + 6 : pos + 14], "little", signed=True)
        segments = data[pos + 26]
        table = data[pos + 27 : pos + 27 + segments]
        start = pos + 27 + segments
        end = start + sum(table)
        if len(table) < segments or end > len(data):
            raise ValueError(f"truncated Ogg page at byte {pos}")
        pages.append((granule, data[start:end]))
        pos = end
    return pages
