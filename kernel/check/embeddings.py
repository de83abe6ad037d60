"""``kernel check``'s line for ``[memory.embeddings]`` (issue 39): the endpoint embeds one
word, and how far the memories' backfill is (read from the database, which is not
changed)."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

from kernel.check.line import CheckLine
from kernel.config import Config
from kernel.core.errors import KernelError
from kernel.core.i18n import t
from kernel.store.vectors import progress

PART = "memory embeddings"


async def embeddings(config: Config) -> CheckLine:
    from kernel.memory.embeddings import EmbeddingsClient
    from kernel.memory.vectors import model_key

    cfg = config.memory.embeddings
    assert cfg is not None
    client = EmbeddingsClient(cfg)
    try:
        answer = await client.embed(["check"], cfg.batch_timeout)
    except KernelError as exc:
        return CheckLine(PART, "warn", t("check.embeddings_failed", error=exc))
    finally:
        await client.aclose()
    done, total = backfill(config.db_path, model_key(cfg))
    dims = len(answer.vectors[0])
    words = t("check.embeddings_ok", model=cfg.model, dims=dims, done=done, total=total)
    return CheckLine(PART, "ok", words)


def backfill(path: Path, model: str) -> tuple[int, int]:
    """(memories with a vector of ``model``, memories); (0, 0) without a database yet."""
    if not path.exists():
        return 0, 0
    try:
        with closing(sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)) as conn:
            return progress(conn, model)
    except sqlite3.Error:  # not migrated yet (an older Kernel's database)
        return 0, 0
