"""``[memory]`` and ``[memory.embeddings]`` (issue 39): recall by meaning through any
OpenAI-compatible ``/v1/embeddings`` endpoint (OpenAI, a local Ollama or llama.cpp
server). Without ``[memory.embeddings]`` recall is FTS5/jieba alone and nothing of the
vector side is loaded."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from kernel.config.schema import SECRET, Base, Env, Label, NonNegInt, PosFloat, Section


class EmbeddingsConfig(Section):
    """``[memory.embeddings]``: the endpoint every memory (and each turn's message) is
    embedded by; recall fuses its ranking with FTS5's."""

    base_url: Base = Field(
        "", description="the endpoint's base URL (…/v1); empty: the provider's api_base"
    )
    provider: str = Field(
        "", description="a [providers.<name>] whose key (and api_base) is used when unset here"
    )
    api_key: Annotated[str, SECRET, Env("KERNEL_EMBEDDINGS_API_KEY")] = Field(
        "", description="the endpoint's key (a local server: none)"
    )
    model: str = Field("text-embedding-3-small", min_length=1, description="the embedding model")
    dimensions: NonNegInt = Field(0, description="asked of the endpoint; 0: the model's own")
    timeout: PosFloat = Field(
        2.0, description="seconds recall waits for a message's vector (then FTS5 alone)"
    )
    batch_timeout: PosFloat = Field(60.0, description="seconds per batch of saved memories")
    batch_size: Annotated[int, Field(ge=1, le=2048), Label(suffix=" 1-2048")] = Field(
        64, description="memories embedded per request"
    )
    max_retries: Annotated[int, Field(ge=0, le=10), Label(suffix=" 0-10")] = Field(
        3, description="retries of a failed batch (429/5xx/timeouts)"
    )
    daily_tokens: NonNegInt = Field(
        0, description="budget: tokens embedded per day (general.timezone); 0: no limit"
    )
    min_similarity: Annotated[float, Field(ge=-1, le=1), Label(suffix=" -1 to 1")] = Field(
        0.3, description="a memory found by meaning alone must be at least this close (cosine)"
    )


class MemoryConfig(Section):
    """``[memory]``: long-term memory; only its sub-table for now."""

    # [memory.embeddings], read as its own table; None: not configured.
    embeddings: EmbeddingsConfig | None = Field(None, json_schema_extra={"toml": False})
