"""PTB's HTTP requests with lone surrogates (valid JSON, not text) mended both ways.

Telegram's JSON may carry an escape of half a UTF-16 pair (``"\\ud800"``) in a message's
text, a caption, a callback's data or a file name; decoded, that string can be neither
stored, matched by RE2 nor sent on. Every update is read here, where the bytes arrive,
so the owner's message is kept with U+FFFD in its place and answered like any other.
Going out, a reply that still carries one (a model's output, a tool's result) would
fail in the HTTP library on every retry: it is sent mended instead.
"""

from __future__ import annotations

from typing import Any

from telegram._utils.types import JSONDict, ODVInput
from telegram.request import BaseRequest, RequestData
from telegram.request._requestparameter import RequestParameter

from kernel.core.surrogates import may_carry, mend_all
from kernel.telegram.aio_request import AioRequest


class MendingRequest(AioRequest):
    """An :class:`~kernel.telegram.aio_request.AioRequest` (aiohttp, the process's one
    TLS context) whose answers and requests hold no lone surrogate."""

    @staticmethod
    def parse_json_payload(payload: bytes) -> JSONDict:
        data = BaseRequest.parse_json_payload(payload)
        if may_carry(payload):  # only an escape brings one: else nothing is walked
            mended: JSONDict = mend_all(data)
            return mended
        return data

    async def do_request(
        self,
        url: str,
        method: str,
        request_data: RequestData | None = None,
        read_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
        write_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
        connect_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
        pool_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
    ) -> tuple[int, bytes]:
        timeouts: dict[str, Any] = {
            "read_timeout": read_timeout,
            "write_timeout": write_timeout,
            "connect_timeout": connect_timeout,
            "pool_timeout": pool_timeout,
        }
        try:
            return await super().do_request(url, method, request_data, **timeouts)
        except UnicodeEncodeError:  # raised while encoding, before anything is sent
            if request_data is None:
                raise
            return await super().do_request(url, method, mended(request_data), **timeouts)


def mended(data: RequestData) -> RequestData:
    """``data`` with every string of its parameters mended (files as they were)."""
    return RequestData(
        [
            RequestParameter(p.name, mend_all(p.value), p.input_files)
            for p in data._parameters  # noqa: SLF001 (PTB keeps them only here)
        ]
    )
