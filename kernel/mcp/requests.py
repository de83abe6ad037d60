"""What one MCP server asks of Kernel while its tools run: sampling and elicitation
requests, translated from the SDK's types into :mod:`kernel.mcp.interact`'s values and
put to the owner through the newest running call that can ask."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from typing import Any

import mcp.types as mtypes

from kernel.config import MCPServerConfig, MCPSettings
from kernel.core.asks import AskOutcome
from kernel.core.i18n import t
from kernel.mcp.interact import Sampler, SamplingRequest, choice_fields
from kernel.tools.registry import ToolContext

log = logging.getLogger(__name__)


class ServerRequests:
    """The server's requests to Kernel, and the running calls they may belong to.

    ``clean`` makes a text safe for the server (no secrets, one line, bounded)."""

    def __init__(
        self,
        config: MCPServerConfig,
        settings: MCPSettings,
        sampler: Sampler | None,
        clean: Callable[[str], str],
    ) -> None:
        self.name = config.name
        self.settings = settings
        self.sampler = sampler if settings.sampling != "off" else None
        self._config = config
        self._clean = clean
        self._calls: dict[int, ToolContext] = {}  # running calls, oldest first
        self._call_ids = 0

    @contextlib.contextmanager
    def running(self, context: ToolContext | None) -> Iterator[None]:
        """While a tool call runs: its context may be asked the server's questions."""
        self._call_ids += 1
        key = self._call_ids
        if context is not None:
            self._calls[key] = context
        try:
            yield
        finally:
            self._calls.pop(key, None)

    def _asker(self) -> ToolContext | None:
        """The running call a server's question belongs to: the newest that can ask.
        (Over stdio a request names no call; one turn runs one call per server at a
        time in practice.)"""
        for context in reversed(self._calls.values()):
            if context.ask is not None:
                return context
        return None

    async def on_sampling(
        self, context: Any, params: mtypes.CreateMessageRequestParams
    ) -> mtypes.CreateMessageResult | mtypes.ErrorData:
        assert self.sampler is not None
        messages = [(str(m.role), _sampling_text(m.content)) for m in params.messages]
        ceiling = self.settings.sampling_max_tokens
        request = SamplingRequest(
            self.name, params.system_prompt or "", messages, min(params.max_tokens, ceiling)
        )
        if self.settings.sampling == "ask":
            refusal = await self._approve_sampling(request)
            if refusal is not None:
                log.info("mcp server %s: sampling request refused (%s)", self.name, refusal)
                return mtypes.ErrorData(code=mtypes.INVALID_REQUEST, message=refusal)
        try:
            answer = await self.sampler(request)
        except Exception as exc:
            log.warning("mcp server %s: sampling failed (%s)", self.name, type(exc).__name__)
            message = f"the model call failed: {self._clean(str(exc)) or type(exc).__name__}"
            return mtypes.ErrorData(code=mtypes.INTERNAL_ERROR, message=message)
        log.info("mcp server %s: sampling request answered", self.name)
        return mtypes.CreateMessageResult(
            role="assistant",
            content=mtypes.TextContent(type="text", text=answer.text),
            model=answer.model,
            stop_reason=answer.stop_reason,
        )

    async def _approve_sampling(self, request: SamplingRequest) -> str | None:
        """None when the owner approves; else why not."""
        context = self._asker()
        if context is None or context.ask is None:
            return "sampling needs the owner's approval, and nobody can be asked now"
        last = next((text for role, text in reversed(request.messages) if role == "user"), "")
        preview = last if len(last) <= 300 else last[:300] + " …"
        question = t(
            "mcp.sampling_ask", server=self.name, tokens=request.max_tokens, prompt=preview
        )
        options = [t("ask.approve"), t("ask.deny")]
        answer = await context.ask(question, options, kind="approval", seconds=self._config.timeout)
        if answer.option == 0:
            return None
        if answer.outcome is AskOutcome.ANSWERED:
            return "the owner declined the sampling request"
        return "the owner did not answer the sampling request"

    async def on_elicitation(
        self, context: Any, params: mtypes.ElicitRequestParams
    ) -> mtypes.ElicitResult | mtypes.ErrorData:
        decline = mtypes.ElicitResult(action="decline")
        if isinstance(params, mtypes.ElicitRequestURLParams):
            log.info("mcp server %s: URL elicitation declined (not supported)", self.name)
            return decline
        fields = choice_fields(params.requested_schema)
        asker = self._asker()
        if fields is None or asker is None or asker.ask is None:
            why = "not only choices" if fields is None else "nobody can be asked"
            log.info("mcp server %s: elicitation declined (%s)", self.name, why)
            return decline
        content: dict[str, Any] = {}
        for field in fields:
            text = t("mcp.elicit", server=self.name, message=params.message, field=field.label)
            if field.description:
                text = f"{text}\n{field.description}"
            options = [*field.options, t("mcp.elicit_decline")]
            answer = await asker.ask(text, options, kind="question", seconds=self._config.timeout)
            if answer.option is None:
                return mtypes.ElicitResult(action="cancel")
            if answer.option == len(field.options):
                return decline
            content[field.name] = field.values[answer.option]
        log.info("mcp server %s: elicitation answered by the owner", self.name)
        return mtypes.ElicitResult(action="accept", content=content)


def _sampling_text(content: Any) -> str:
    """A sampling message's content as text (images and audio are named, not passed)."""
    blocks = content if isinstance(content, list) else [content]
    parts: list[str] = []
    for block in blocks:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(str(block.text))
        else:
            parts.append(f"[{kind or 'unknown'} content not passed]")
    return "\n".join(parts)
