"""The ``webhook`` channel: each text POSTed as JSON to ``channels.webhook.url``.

Body: ``{"delivery_id", "user_id", "session_id", "channel", "text", "timestamp"}``
(``channel``: where the text came from, e.g. ``cron``; ``timestamp``: ISO 8601 UTC;
``delivery_id``: the same on every retry of one delivery, so a receiver can drop
repeats). With ``channels.webhook.secret`` set, each request carries
``X-Kernel-Timestamp: <unix seconds>`` and
``X-Kernel-Signature: sha256=<hex HMAC-SHA256(secret, timestamp + "." + body)>``.

Timeouts, connection failures, 429 and 5xx are retried ``max_retries`` times with
exponential backoff (``retry_base_delay`` doubled per retry, capped and jittered:
:func:`kernel.config.webhook_backoff`); other statuses fail at once; a redirect is never
followed. A delivery that finally fails, or is
cut short (``cron.delivery_timeout`` running out mid-retry, Kernel stopping), is logged
(never with the text or URL), kept in the database's ``webhook_failures`` (the newest
``FAILURES_KEPT``, so they survive a restart; shown by ``GET /channels/webhook/state``)
and raised as ``channel_dispatch_failed``. A worst case
(every attempt timing out, plus the backoff) longer than ``cron.delivery_timeout`` is
warned about when the configuration is loaded.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import logging
import uuid
from collections import deque
from datetime import datetime
from typing import Any

import httpx

from kernel.config import Config, WebhookChannelConfig, webhook_backoff
from kernel.core.backoff import Retrying
from kernel.core.capped import TooLarge, read_capped
from kernel.core.clock import Clock
from kernel.core.delivery import Target
from kernel.core.errors import ChannelError, StoreError
from kernel.core.i18n import t
from kernel.core.surrogates import mend
from kernel.core.tasks import TaskSet
from kernel.core.tls import tls_context
from kernel.store.channels import ChannelStore, WebhookFailure

log = logging.getLogger(__name__)

FAILURES_KEPT = 50
ANSWER_READ = 64 * 1024  # bytes of a receiver's answer read at most (it is not kept)


def signature(secret: str, timestamp: str, body: bytes) -> str:
    """The ``X-Kernel-Signature`` value for ``body`` sent at ``timestamp``."""
    mac = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


class WebhookChannel:
    name = "webhook"

    def __init__(self, config: Config, clock: Clock, records: ChannelStore | None = None) -> None:
        """``records``: where failures are kept across restarts (none: memory only)."""
        self.config = config
        self.clock = clock
        self.records = records
        self._http: httpx.AsyncClient | None = None
        self.delivered = 0
        self.failed = 0  # since this start
        self.last_delivery_at: datetime | None = None
        self.last_error = ""
        # The newest failures, oldest first: what the database holds, mirrored.
        self.failures: deque[WebhookFailure] = deque(maxlen=FAILURES_KEPT)
        self._saving = TaskSet("webhook")  # failures being recorded

    async def load(self) -> None:
        """The failures recorded before this start (called once the store runs)."""
        if self.records is None:
            return
        try:
            kept = await self.records.webhook_failures(limit=FAILURES_KEPT)
        except StoreError as exc:
            log.warning("could not read the recorded webhook failures: %s", type(exc).__name__)
            return
        self.failures.extendleft(kept)  # newest first in, so the newest ends up last
        if kept and not self.last_error:
            self.last_error = kept[0].error

    @property
    def cfg(self) -> WebhookChannelConfig:
        return self.config.channels.webhook

    def unavailable(self) -> str:
        if not self.cfg.enabled:
            return t("channel.disabled", name=self.name, key="channels.webhook.enabled")
        if not self.cfg.url:
            return t("config.channel_needs", key="channels.webhook.url")
        return ""

    async def send_text(self, target: Target, text: str) -> None:
        cfg = self.cfg  # one delivery uses one version of the settings
        delivery_id = uuid.uuid4().hex
        payload = {
            "delivery_id": delivery_id,
            "user_id": target.user_id,
            "session_id": target.session_id,
            "channel": target.origin or self.name,
            "text": mend(text),  # a model's lone surrogate cannot be UTF-8: U+FFFD
            "timestamp": self.clock.now().isoformat(timespec="seconds"),
        }
        body = json.dumps(payload, ensure_ascii=False).encode()
        attempts = 1 + cfg.max_retries
        problem = ""
        used = 0
        retrying = Retrying(webhook_backoff(cfg), self.clock)
        try:
            for attempt in range(attempts):
                used = attempt + 1
                headers = {
                    "Content-Type": "application/json",
                    "User-Agent": "Kernel",
                    "X-Kernel-Delivery": delivery_id,
                }
                if cfg.secret:
                    stamp = str(int(self.clock.now().timestamp()))
                    headers["X-Kernel-Timestamp"] = stamp
                    headers["X-Kernel-Signature"] = signature(cfg.secret, stamp, body)
                status, problem = await self._post(cfg, body, headers)
                if status is not None and 200 <= status < 300:
                    self.delivered += 1
                    self.last_delivery_at = self.clock.now()
                    if attempt:
                        log.info("webhook delivery %s succeeded on attempt %d", delivery_id, used)
                    return
                retry = status is None or status == 429 or status >= 500
                if not retry or used == attempts:
                    break
                log.info("webhook delivery %s: %s; retrying", delivery_id, problem)
                await retrying.pause()
        except asyncio.CancelledError:
            # The registry's bound (cron.delivery_timeout) ran out mid-retry, or Kernel is
            # stopping: a delivery that did not happen all the same, so it is recorded
            # (written by a task of its own, awaited at aclose: this one is cancelled).
            detail = t("webhook.interrupted", last=problem or "-")
            failure = self._record_failure(delivery_id, target, used, detail)
            self._saving.spawn(self._save(failure), "webhook-failure")
            raise
        await self._save(self._record_failure(delivery_id, target, used, problem))
        raise ChannelError(
            ChannelError.DISPATCH_FAILED,
            t("webhook.failed", attempts=used, detail=problem),
            channel=self.name,
            delivery_id=delivery_id,
        )

    async def _post(
        self, cfg: WebhookChannelConfig, body: bytes, headers: dict[str, str]
    ) -> tuple[int | None, str]:
        """(status, problem): status None when no answer came (timeout, connection)."""
        if self._http is None or self._http.is_closed:
            # No proxy from the environment and no redirects (the URL is the owner's).
            self._http = httpx.AsyncClient(
                trust_env=False, follow_redirects=False, verify=tls_context(trust_env=False)
            )
        try:
            # timeout_seconds bounds the whole attempt, not each read.
            async with (
                asyncio.timeout(cfg.timeout_seconds),
                self._http.stream(
                    "POST", cfg.url, content=body, headers=headers, timeout=cfg.timeout_seconds
                ) as response,
            ):
                # The status is the outcome; a small answer is read so the connection
                # can serve again, a large one is not (the connection is closed).
                with contextlib.suppress(TooLarge):
                    await read_capped(response.aiter_raw(), ANSWER_READ)
                return response.status_code, f"HTTP {response.status_code}"
        except (TimeoutError, httpx.TimeoutException):
            return None, t("webhook.timeout", seconds=f"{cfg.timeout_seconds:g}")
        except httpx.HTTPError as exc:
            return None, type(exc).__name__

    def _record_failure(
        self, delivery_id: str, target: Target, attempts: int, problem: str
    ) -> WebhookFailure:
        self.failed += 1
        self.last_error = problem
        failure = WebhookFailure(
            delivery_id=delivery_id,
            at=self.clock.now().isoformat(timespec="seconds"),
            attempts=attempts,
            error=problem,
            origin=target.origin or self.name,
            session_id=target.session_id,
        )
        self.failures.append(failure)
        log.warning(
            "webhook delivery %s failed after %d attempt(s): %s", delivery_id, attempts, problem
        )
        return failure

    async def _save(self, failure: WebhookFailure) -> None:
        if self.records is None:
            return
        try:
            await self.records.add_webhook_failure(failure, keep=FAILURES_KEPT)
        except StoreError as exc:  # still shown until the next start
            log.warning(
                "could not record webhook delivery %s: %s", failure.delivery_id, type(exc).__name__
            )

    def state(self) -> dict[str, Any]:
        return {
            "enabled": self.cfg.enabled,
            "configured": bool(self.cfg.url),
            "signed": bool(self.cfg.secret),
            "delivered": self.delivered,
            "failed": self.failed,
            "last_delivery_at": (
                self.last_delivery_at.isoformat(timespec="seconds")
                if self.last_delivery_at
                else None
            ),
            "last_error": self.last_error or None,
            "recent_failures": [f.to_dict() for f in reversed(self.failures)],
        }

    async def aclose(self) -> None:
        # Failures recorded by cancelled deliveries, before the store closes.
        await self._saving.wait()
        if self._http is not None:
            await self._http.aclose()
            self._http = None
