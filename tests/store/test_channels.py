"""The channels' tables: seen inbound event ids, forgotten after their window; failed
webhook deliveries, the newest kept."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from kernel.store.channels import ChannelStore, WebhookFailure
from kernel.store.db import Store

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)


async def test_event_ids_are_claimed_once_per_channel_until_forgotten(tmp_path: Path) -> None:
    store = Store(tmp_path / "kernel.db")
    await store.start()
    try:
        records = ChannelStore(store)
        old = NOW - timedelta(minutes=20)
        assert await records.claim_event("qq", "e1", NOW, forget_before=old)
        assert not await records.claim_event("qq", "e1", NOW, forget_before=old)
        assert await records.claim_event("other", "e1", NOW, forget_before=old)
        later = NOW + timedelta(minutes=30)
        assert await records.claim_event(
            "qq", "e1", later, forget_before=later - timedelta(minutes=10)
        )
        assert not await records.claim_event("qq", "e1", later, forget_before=NOW)
    finally:
        await store.close()


async def test_only_the_newest_webhook_failures_are_kept(tmp_path: Path) -> None:
    store = Store(tmp_path / "kernel.db")
    await store.start()
    try:
        records = ChannelStore(store)
        for n in range(55):
            failure = WebhookFailure(f"d{n}", NOW.isoformat(), 1, "HTTP 502", "cron", "s")
            await records.add_webhook_failure(failure, keep=50)
        kept = await records.webhook_failures(limit=100)
        assert [f.delivery_id for f in kept] == [f"d{n}" for n in range(54, 4, -1)]
    finally:
        await store.close()
