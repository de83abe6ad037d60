"""The verifying TLS context of Kernel's HTTP clients, built once per process.

Building one reads the whole CA bundle (~30 ms of CPU); httpx builds one for every client
it makes, even one that only ever speaks plain HTTP to 127.0.0.1, and the Telegram
channel alone makes two at each start. So the clients that would take httpx's default
are handed this one: Telegram's requests and ``kernel check``'s (aiohttp's ``ssl=``,
``kernel/telegram/aio_request.py``), webhook, QQ, web search and web fetch's guard
(httpx's ``verify=tls_context()``, ``trust_env=False``). It is the context
httpx would build itself: certifi's roots, or SSL_CERT_FILE / SSL_CERT_DIR when
``trust_env``. These clients speak HTTP/1.1 (httpcore sets the context's ALPN to it at
each connection), so sharing it changes nothing a server sees. Not here: the sidecar
client keeps the system's roots (``kernel/client/http.py``, built once there too), and
the model SDKs and MCP over HTTP build their own clients.

Public API: :func:`tls_context`.
"""

from __future__ import annotations

import functools
import ssl

import httpx


@functools.cache
def tls_context(*, trust_env: bool = True) -> ssl.SSLContext:
    """httpx's verifying context (``trust_env`` as httpx's own flag), built once."""
    return httpx.create_ssl_context(trust_env=trust_env)
