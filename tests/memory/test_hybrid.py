"""Hybrid recall (issue 39) against the embeddings simulator: a paraphrase only the
vector side finds reaches the model, fusion order, an endpoint that is down or hangs
(FTS5 answers within the timeout, the turn goes on), the backfill resuming after a
``kill -9``, and the progress in /status full and ``kernel check``."""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kernel.agent.agent import UserInput
from kernel.app import Kernel
from kernel.check.embeddings import embeddings as check_embeddings
from kernel.commands.status import status_lines
from kernel.config import EmbeddingsConfig
from kernel.core.events import Completed
from kernel.core.usage import Usage
from kernel.memory.fusion import WORDS_WEIGHT, rrf
from kernel.memory.memories import Memories
from kernel.memory.tokens import fts_query
from kernel.memory.vectors import VectorIndex
from kernel.store.db import Store
from kernel.store.usage import UsageFilter, UsageStore
from tests.conftest import KernelFactory
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.context import recalled_of
from tests.sim.embeddings_sim import EmbeddingsSim
from tests.sim.script import text_reply
from tests.waiting import wait_until

MOCHI = "My cat is called Mochi"
# The case: 14 memories, k = 3; the cat saved first (never among the newest).
OTHERS = [
    "我住在上海浦东",
    "I work at a bank as an analyst",
    "我对花生过敏",
    "My car is a blue Toyota",
    "我每天早上七点起床",
    "I drink green tea every afternoon",
    "我的生日是五月三日",
    "My sister lives in Berlin",
    "我喜欢打羽毛球",
    "My phone is a Pixel",
    "我在学西班牙语",
    "My dentist is Dr. Lee",
    "我最喜欢的颜色是绿色",
]
QUESTION = "我的宠物叫什么？"
ROOT = Path(__file__).resolve().parents[2]


def table(sim: EmbeddingsSim, **extra: object) -> str:
    keys = {"base_url": sim.base_url, "api_key": "emb-key", "timeout": 1.0, **extra}
    lines = [f"{k} = {v!r}".replace("'", '"') for k, v in keys.items()]
    return "\n[memory.embeddings]\n" + "\n".join(lines) + "\n"


@pytest.fixture
async def embed_sim() -> AsyncIterator[EmbeddingsSim]:
    async with EmbeddingsSim(key="emb-key") as sim:
        yield sim


async def embedded(kernel_or_index: Kernel | VectorIndex, count: int) -> None:
    index = kernel_or_index
    if isinstance(index, Kernel):
        assert index.memories.vectors is not None
        index = index.memories.vectors

    async def done() -> bool:
        return await index.progress() == (count, count)

    await wait_until(done, what=f"{count} memories embedded")


async def test_a_paraphrase_only_the_vectors_find_reaches_the_model_and_down_is_fts(
    make_kernel: KernelFactory, anthropic_sim: AnthropicSim, embed_sim: EmbeddingsSim
) -> None:
    kernel = await make_kernel(anthropic_sim, memory_recall_k=3, extra=table(embed_sim))
    for text in [MOCHI, *OTHERS]:
        await kernel.memories.add(text)
    await embedded(kernel, 14)
    # Words alone do not find it (today's recall).
    words_only = Memories(kernel.store, kernel.config.data_dir / "cache")
    assert MOCHI not in [m.text for m in await words_only.recall(QUESTION, 3)]

    anthropic_sim.enqueue(text_reply("Mochi."))
    final = await kernel.agent.start_turn("console:c", UserInput(QUESTION)).wait()
    assert isinstance(final, Completed)
    assert MOCHI in recalled_of(anthropic_sim.requests[0])
    # Each batch and each message's vector is in the usage ledger, with its tokens.
    rows = await UsageStore(kernel.store).entries(UsageFilter(purpose="embedding"))
    assert rows and {(r.provider, r.model) for r in rows} == {
        ("embeddings", "text-embedding-3-small")
    }
    assert sum(r.usage.input for r in rows) > 0 and all(r.usage_known for r in rows)
    lines = await status_lines(kernel, "console:c", full=True)
    assert "语义记忆（text-embedding-3-small）：14/14 条已嵌入" in lines

    # The endpoint hangs: the turn goes on with the words' recall, not waiting for it.
    embed_sim.stall = True
    anthropic_sim.enqueue(text_reply("Tea."))
    final = await kernel.agent.start_turn("console:c", UserInput("green tea")).wait()
    assert isinstance(final, Completed)
    assert embed_sim.stalled == 1  # still hanging when the turn was over
    recalled = recalled_of(anthropic_sim.requests[1])
    assert "green tea" in recalled and MOCHI not in recalled
    embed_sim.release()


async def test_fusion_puts_what_both_rankings_find_first(
    tmp_path: Path, embed_sim: EmbeddingsSim
) -> None:
    # Found by both > found by meaning alone > found by words alone, at equal ranks.
    assert rrf([[1, 2], [3, 1]], weights=(WORDS_WEIGHT,)) == [1, 3, 2]
    assert rrf([[1, 2, 3], [4, 2, 5]]) == [2, 1, 4, 3, 5]
    store = Store(tmp_path / "kernel.db")
    await store.start()
    index = VectorIndex(store, EmbeddingsConfig(base_url=embed_sim.base_url, api_key="emb-key"))
    mem = Memories(store, tmp_path / "cache")
    mem.vectors = index  # a save wakes the worker
    await index.start()
    try:
        texts = [MOCHI, "宠物医院周日不开门", "我的猫咪很怕打雷", "名字写在护照第一页", *OTHERS]
        for text in texts:
            await mem.add(text)
        await embedded(index, len(texts))
        vector = await index.query(QUESTION)
        assert vector is not None
        terms = await asyncio.to_thread(mem.tokenizer.query_terms, QUESTION)
        ranked = await store.recall_ranked(
            terms, fts_query(terms), vector, index.model, limit=20, newest=100, floor=0.3
        )
        words = [m.text for m in ranked.words]
        meaning = [m.text for m, _ in ranked.meaning]
        assert MOCHI in meaning and MOCHI not in words  # the paraphrase: vectors only
        found = [m.text for m in await mem.recall(QUESTION, 3)]
        fused = rrf([words, meaning], weights=(WORDS_WEIGHT,))  # texts are unique here
        # Found by both first, then the vectors' best (ranked first there), then the rest.
        assert fused[:2] == ["宠物医院周日不开门", MOCHI] == [words[0], meaning[0]]
        assert found == fused[:3]
        # memory_search's path finds by meaning too (words alone: only the clinic).
        assert [m.text for m in await mem.search(QUESTION, 3)] == fused[:3]
        mem.vectors = None
        assert [m.text for m in await mem.search(QUESTION, 3)] == ["宠物医院周日不开门"]
        mem.vectors = index
    finally:
        await index.stop()
        await store.close()


async def test_endpoint_down_or_hanging_recall_is_fts_within_the_timeout(
    tmp_path: Path, embed_sim: EmbeddingsSim
) -> None:
    store = Store(tmp_path / "kernel.db")
    await store.start()
    # 2 s: the requests that are answered (the embeddings, the last query) must fit on
    # a loaded machine; only the stalled one waits it out
    cfg = EmbeddingsConfig(base_url=embed_sim.base_url, api_key="emb-key", timeout=2.0)
    index = VectorIndex(store, cfg)
    mem = Memories(store, tmp_path / "cache")
    await mem.add("I drink green tea every afternoon")
    await mem.add(MOCHI)
    words = [m.text for m in await mem.recall("green tea", 5)]
    mem.vectors = index
    await index.start()
    try:
        await embedded(index, 2)
        embed_sim.stall = True
        assert [m.text for m in await mem.recall("green tea", 5)] == words
        assert embed_sim.stalled == 1  # answered while the endpoint still hangs
        asked = len(embed_sim.calls)
        # Resting after the failure: the next turns do not even ask.
        assert [m.text for m in await mem.recall("green tea", 5)] == words
        assert len(embed_sim.calls) == asked
        embed_sim.release()
        embed_sim.down = True
        index.cooldown = 0.0
        await index.query("rest over")  # a 503 now
        assert [m.text for m in await mem.recall("green tea", 5)] == words
        embed_sim.down = False
        assert MOCHI in [m.text for m in await mem.recall(QUESTION, 1)]
    finally:
        await index.stop()
        await store.close()


CHILD = """
import asyncio, sys
from pathlib import Path
from kernel.config import EmbeddingsConfig
from kernel.memory.vectors import VectorIndex
from kernel.store.db import Store

async def main():
    store = Store(Path(sys.argv[1]))
    await store.start()
    cfg = EmbeddingsConfig(base_url=sys.argv[2], api_key="emb-key", batch_size=5)
    await VectorIndex(store, cfg).start()
    await asyncio.Event().wait()

asyncio.run(main())
"""


@pytest.mark.slow
@pytest.mark.posix
async def test_the_backfill_resumes_after_a_kill(tmp_path: Path, embed_sim: EmbeddingsSim) -> None:
    path = tmp_path / "kernel.db"
    store = Store(path)
    await store.start()
    texts = [f"memory number {i} about topic {i % 4}" for i in range(20)]
    for text in texts:
        await store.add_memory(text)  # saved before embeddings were configured
    await store.close()

    embed_sim.stall_after = 2  # two batches of five, then the third hangs
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-c", CHILD, str(path), embed_sim.base_url, cwd=ROOT
    )
    try:
        await embed_sim.wait_until(lambda: embed_sim.stalled == 1)
    finally:
        child.send_signal(signal.SIGKILL)
        await child.wait()
    before = embed_sim.inputs()
    stored = before[:10]  # the two batches answered
    embed_sim.release()

    store = Store(path)
    await store.start()
    index = VectorIndex(store, EmbeddingsConfig(base_url=embed_sim.base_url, api_key="emb-key"))
    await index.start()
    try:
        assert (await index.progress())[0] == 10
        await embedded(index, 20)
        again = embed_sim.inputs()[len(before) :]
        assert sorted(again) == sorted(set(texts) - set(stored))
    finally:
        await index.stop()
        await store.close()


async def test_kernel_check_names_the_endpoint_and_the_backfill(
    make_kernel: KernelFactory, anthropic_sim: AnthropicSim, embed_sim: EmbeddingsSim
) -> None:
    kernel = await make_kernel(anthropic_sim, extra=table(embed_sim), language="en")
    await kernel.memories.add(MOCHI)
    await embedded(kernel, 1)
    line = await check_embeddings(kernel.config)
    assert (line.status, line.detail) == (
        "ok",
        "text-embedding-3-small embeds text (256 dimensions); 1/1 memories embedded",
    )
    embed_sim.down = True
    line = await check_embeddings(kernel.config)
    assert (
        line.status == "warn" and "HTTP 503" in line.detail and "[memory.embeddings]" in line.detail
    )


async def test_a_failed_batch_is_retried_and_the_daily_budget_pauses_the_worker(
    tmp_path: Path, embed_sim: EmbeddingsSim
) -> None:
    store = Store(tmp_path / "kernel.db")
    await store.start()
    recorded: list[tuple[int, bool, int]] = []

    async def record(usage: Usage, known: bool, retries: int) -> None:
        recorded.append((usage.input, known, retries))

    cfg = EmbeddingsConfig(
        base_url=embed_sim.base_url, api_key="emb-key", batch_size=2, daily_tokens=5
    )
    index = VectorIndex(store, cfg, record=record)
    index.client.retry_delay = 0.01
    mem = Memories(store, tmp_path / "cache")
    mem.vectors = index
    for text in ("I drink green tea every afternoon", MOCHI, "我住在上海浦东"):
        await store.add_memory(text)
    embed_sim.fail_next(503)
    await index.start()
    try:
        await embed_sim.wait_until(lambda: len(recorded) == 1)
        # One batch of two, after one 503: its tokens (8) pass today's budget of 5.
        assert len(embed_sim.calls) == 2 and recorded == [(8, True, 1)]
        await wait_until(lambda: index.paused == "budget")
        assert await index.progress() == (2, 3)
        line = await index.status_line()
        assert line.startswith("语义记忆（text-embedding-3-small）：2/3 条已嵌入")
        assert "今日嵌入额度已用完" in line
        # Messages are not embedded either: recall is the words' alone.
        assert await index.query("tea") is None and len(embed_sim.calls) == 2
        assert [m.text for m in await mem.recall("green tea", 3)] == [
            "I drink green tea every afternoon"
        ]
    finally:
        await index.stop()
        await store.close()
