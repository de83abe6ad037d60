"""The /status lines every text channel shares; a channel adds its own in the middle."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from kernel.commands.profiles import scope_line
from kernel.commands.usage import budget_line, turn_line
from kernel.core.i18n import t, t_or
from kernel.memory import scopes
from kernel.spend import budget_state

if TYPE_CHECKING:
    from kernel.commands.command_set import KernelParts


def format_elapsed(seconds: float) -> str:
    whole = max(0, int(seconds))
    if whole < 60:
        return t("delegate.seconds", s=whole)
    return t("delegate.minutes", m=whole // 60, s=whole % 60)


async def status_lines(
    kernel: KernelParts, conversation: str, channel_lines: Sequence[str] = ()
) -> list[str]:
    """Session, model, persona and project, providers not healthy and the session's last
    routing decision, busy (and the running turn's usage), spend today and this month,
    CLI, MCP, memory search, ``channel_lines``, cron, last error."""
    agent = kernel.agent
    turn = agent.sessions.running(conversation)
    budget = await budget_state(agent.meter)
    session = agent.current_session(conversation)
    title = ""
    if session is not None:
        row = await kernel.store.get_session(session)
        title = (row.title if row else None) or t("session.untitled")
    scope = await agent.chat_scope(conversation)
    return [
        t("tg.status_session", session=f"{session} {title}" if session else t("tg.status_new")),
        t("tg.status_model", provider=agent.provider_name, model=agent.model),
        *scope_line(scope),
        *provider_lines(kernel),
        *await _last_decision(kernel, session),
        t("tg.status_busy") if turn is not None else t("tg.status_idle"),
        *([turn_line(turn, budget.currency)] if turn is not None else []),
        budget_line(budget),
        _cli_status(kernel),
        kernel.mcp.status_text(),
        await _search_status(kernel, scopes.visible(scope.project, scope.persona)),
        *channel_lines,
        _cron_status(kernel),
        t("tg.status_error", error=agent.last_error or "—"),
    ]


def provider_lines(kernel: KernelParts) -> list[str]:
    """One line per enabled provider whose circuit is not closed; none when all are."""
    agent = kernel.agent
    enabled = [n for n, p in agent.config.providers.items() if p.enabled]
    lines = []
    for state in agent.health.states(enabled):
        error = cause_words(state.last_error) if state.last_error else "—"
        if state.state == "open":
            seconds = max(1, round(state.retry_in))
            lines.append(
                t("routing.status_open", provider=state.provider, seconds=seconds, error=error)
            )
        elif state.state == "half_open":
            lines.append(t("routing.status_half_open", provider=state.provider, error=error))
        elif state.state == "unusable":
            lines.append(t("routing.status_unusable", provider=state.provider))
    return lines


def cause_words(code: str) -> str:
    """A failure's code in the owner's words, where the catalogue has them."""
    return t_or(f"routing.cause.{code}", code)


def why_words(why: str, rule: str, sticky: bool) -> str:
    """Why a model was chosen, in the owner's words."""
    words = t("routing.why_rule", rule=rule) if why == "rule" else t(f"routing.why_{why}")
    return words + t("routing.why_sticky") if sticky else words


async def _last_decision(kernel: KernelParts, session: int | None) -> list[str]:
    """The last model call of this conversation's session: one line, or none."""
    if session is None:
        return []
    found = await kernel.agent.decisions.recent(session, 1)
    if not found:
        return []
    d = found[0]
    chosen = d.chosen or t("routing.none_answered")
    why = why_words(d.why, d.rule, d.sticky)
    failed = [f"{a.model} → {cause_words(a.outcome)}" for a in d.attempts if a.outcome != "ok"]
    if failed:
        return [t("routing.status_last_failover", chosen=chosen, why=why, failed=", ".join(failed))]
    return [t("routing.status_last", chosen=chosen, why=why)]


def _cli_status(kernel: KernelParts) -> str:
    running = kernel.delegator.running
    if running is None:
        return t("tg.status_cli_idle")
    return t("tg.status_cli_running", cli=running.cli, elapsed=format_elapsed(running.elapsed))


async def _search_status(kernel: KernelParts, visible: Sequence[str]) -> str:
    """The search mode and how many memories this chat sees (its scopes)."""
    memories = kernel.memories
    key = "tg.status_search_fts" if memories.search_mode == "fts5" else "tg.status_search_like"
    return t(key, count=await memories.count(visible))


def _cron_status(kernel: KernelParts) -> str:
    cron = kernel.cron
    job = cron.next_due() if cron.started else None
    if job is None or job.row.next_run_at is None:
        return t("tg.status_cron_none")
    when = kernel.agent.local_time(job.row.next_run_at).strftime("%Y-%m-%d %H:%M")
    return t("tg.status_cron", name=job.spec.name, when=when)
