"""One TLS context per process (kernel/core/tls.py): building one reads the CA bundle
(~30 ms of CPU), and the Telegram channel alone made two at each start."""

from __future__ import annotations

from kernel.core.tls import tls_context
from kernel.telegram.aio_request import AioRequest
from kernel.telegram.mending import MendingRequest
from kernel.telegram.polling import poll_request


def _context_of(request: AioRequest) -> object:
    assert request._session is not None
    return request._session.connector._ssl  # type: ignore[union-attr]


async def test_the_telegram_requests_share_the_one_context_httpx_would_build() -> None:
    requests = [MendingRequest(), poll_request()]
    for request in requests:
        await request.initialize()
    try:
        contexts = {id(_context_of(r)) for r in requests}
    finally:
        for request in requests:
            await request.shutdown()
    assert contexts == {id(tls_context())}
    assert tls_context() is tls_context() and tls_context(trust_env=False) is not tls_context()
    assert tls_context().verify_mode.name == "CERT_REQUIRED" and tls_context().check_hostname
