"""Token usage as the providers report it, and Kernel's one local token estimate.

:class:`Usage` follows the Anthropic split, which every provider is mapped onto:
``input`` is the input read fresh (billed at the input price), ``cache_read`` the input
served from the provider's prompt cache, ``cache_write`` the input written to it, and
``output`` what the model produced. An OpenAI-compatible ``prompt_tokens`` that
includes ``cached_tokens`` is split into ``input`` and ``cache_read`` by its adapter.

:func:`estimate_tokens` is the estimate used wherever Kernel must guess before a
provider counts: the prompt layers' sizes, the worst case a budget checks, the
sidecar's token estimates. ~4 characters a token for Latin text, one for each CJK
character; an image is :data:`IMAGE_TOKENS`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

from kernel.core.messages import ImageBlock, Message, TextBlock, ToolSpec, ToolUseBlock

IMAGE_TOKENS = 1600  # a typical image's cost; the real one depends on its size


@dataclass(frozen=True, slots=True)
class Usage:
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input + other.input,
            self.output + other.output,
            self.cache_read + other.cache_read,
            self.cache_write + other.cache_write,
        )

    @property
    def prompt(self) -> int:
        """All input tokens, cached or not."""
        return self.input + self.cache_read + self.cache_write

    @property
    def cached_share(self) -> float:
        """The share of the input served from the cache (0 when there was none)."""
        return self.cache_read / self.prompt if self.prompt else 0.0

    def as_json(self) -> dict[str, int]:
        return {
            "input_tokens": self.input,
            "output_tokens": self.output,
            "cache_read_tokens": self.cache_read,
            "cache_write_tokens": self.cache_write,
        }


def estimate_tokens(text: str) -> int:
    """~4 characters a token for Latin text, ~1 for CJK: count both kinds."""
    cjk = sum(1 for ch in text if ord(ch) > 0x2E80)
    return cjk + (len(text) - cjk + 3) // 4


def estimate_request_tokens(
    system: str, messages: Iterable[Message], tools: Iterable[ToolSpec] = ()
) -> int:
    """The input tokens of a request, estimated locally (before any provider counts)."""
    parts = [system]
    images = 0
    for message in messages:
        for block in message.content:
            if isinstance(block, TextBlock):
                parts.append(block.text)
            elif isinstance(block, ImageBlock):
                images += 1
            elif isinstance(block, ToolUseBlock):
                parts.append(block.name + json.dumps(block.input, ensure_ascii=False))
            else:
                parts.append(block.content)
    for tool in tools:
        parts.append(tool.name + tool.description + json.dumps(tool.parameters))
    return estimate_tokens("\n".join(parts)) + images * IMAGE_TOKENS
