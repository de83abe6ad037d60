"""Files the owner sends (photos, documents, voice notes, audio), fetched from Telegram's
file server in chunks and refused the moment they pass ``media.MAX_BYTES``: a message
need not declare its file's size, and getFile need not either, so only the running total
is sure. Never more than the limit and one chunk is held (``core/capped.py``).

The request goes through the bot's own HTTP client (:class:`FileRequest`, an aiohttp
request: its connection pool, timeouts and proxy rules), to ``base_file_url``;
python-telegram-bot's own download methods read the whole body first."""

from __future__ import annotations

from urllib.parse import quote, urlsplit, urlunsplit

import aiohttp
from telegram import Bot
from telegram.error import NetworkError

from kernel.core.capped import BodyRefused, TooLarge, read_capped
from kernel.telegram import media
from kernel.telegram.aio_request import translated
from kernel.telegram.mending import MendingRequest


class FileRequest(MendingRequest):
    """The bot's request (aiohttp, lone surrogates mended: mending.py) that can also
    stream a file with a running cap."""

    async def retrieve_capped(self, url: str, limit: int) -> bytes:
        """The file at ``url``, at most ``limit`` bytes (TooLarge past it); network
        trouble and an error status are TelegramErrors, as PTB's own ``retrieve`` has."""
        # Uncompressed: the cap then bounds what is held, never an inflated chunk.
        self._open_session()  # RuntimeError now, before a slot is waited for
        try:
            # The request is made only once a slot is had: a pool timeout leaves none
            # half-built (aiohttp's coroutine never awaited).
            async with (
                self._slot(self.DEFAULT_NONE),
                self.stream(url, {"Accept-Encoding": "identity"}) as response,
            ):
                if not 200 <= response.status <= 299:
                    raise NetworkError(f"the file server answered HTTP {response.status}")
                return await read_capped(
                    response.content.iter_any(),
                    limit,
                    declared=response.headers.get("content-length"),
                    encoding=response.headers.get("content-encoding"),
                )
        # Never str(exc): aiohttp quotes the URL (the token).
        except (aiohttp.ClientError, OSError) as exc:
            raise translated(exc) from exc


async def download(bot: Bot, file_id: str, kind: media.Kind) -> bytes:
    """The file's bytes; MediaRefused (naming the limit and the fix) when getFile says
    it is too big or when more than the limit arrives."""
    request = bot.request
    if not isinstance(request, FileRequest):
        raise TypeError("the bot's request must be a FileRequest to download files")
    file = await bot.get_file(file_id)
    media.check_size(file.file_size, kind)  # getFile may know what the message did not
    url = _file_url(file.file_path)
    try:
        return await request.retrieve_capped(url, media.MAX_BYTES)
    except TooLarge as exc:
        raise media.too_big(kind, exc.size) from None
    except BodyRefused as exc:  # a compressed body though none was asked for
        raise NetworkError(f"the file server's answer is unreadable ({exc})") from None


def _file_url(path: str | None) -> str:
    """The download URL, its path percent-encoded as PTB does. Only a URL: a getFile
    answer naming a local path (PTB then reads that file) is not followed."""
    parts = urlsplit(path or "")
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise NetworkError("getFile named no downloadable file")
    return urlunsplit(parts._replace(path=quote(parts.path)))
