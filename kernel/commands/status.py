"""/status: the owner's six lines every text channel shares, and ``/status full``, the
operator's view, where a channel adds its own lines."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kernel.commands.listing import named, session_name
from kernel.commands.profiles import scope_line
from kernel.commands.usage import budget_line, budget_today, turn_line
from kernel.core.i18n import t, t_or
from kernel.core.session_modes import ACT
from kernel.memory import scopes
from kernel.spend import budget_state

if TYPE_CHECKING:
    from kernel.commands.parts import KernelParts


def format_elapsed(seconds: float) -> str:
    whole = max(0, int(seconds))
    if whole < 60:
        return t("delegate.seconds", s=whole)
    return t("delegate.minutes", m=whole // 60, s=whole % 60)


@dataclass(frozen=True, slots=True)
class ChannelReport:
    """What a channel adds to /status: ``lines`` for the operator's view (/status full:
    dropped updates, polling, the mailbox), ``problems`` in the owner's words (shown
    in the short view too, and they make the health word)."""

    lines: Sequence[str] = ()
    problems: Sequence[str] = ()


async def status_lines(
    kernel: KernelParts,
    conversation: str,
    channel: ChannelReport = ChannelReport(),
    *,
    full: bool = False,
) -> list[str]:
    """The owner's /status, at most six lines: model, session (named as /history names
    it: ``#id`` and title or first words), what is running, today's spend, health in
    one word, and the problems when there are some. ``full``: then the operator's view
    (persona and project, the last routing decision, the running turn's usage, the
    month's budget, CLI, MCP, memory search, the channel's ``lines``, cron, the last
    error as it was raised)."""
    agent = kernel.agent
    turn = agent.sessions.running(conversation)
    budget = await budget_state(agent.meter)
    session = agent.sessions.current_session(conversation)
    backup = await _backup_state(kernel)
    problems = [
        *provider_lines(kernel),
        *_mcp_problems(kernel),
        *channel.problems,
        *_backup_problems(backup),
    ]
    short = [
        t("tg.status_model", provider=agent.selection.provider_name, model=agent.selection.model),
        await _session_line(kernel, conversation, session),
        _running_line(kernel, conversation),
        t("status.spend", today=budget_today(budget)),
        t("status.health", word=t(f"status.health_{_health(kernel, problems)}")),
        *(
            [t("status.problems", problems=t("status.problem_sep").join(problems))]
            if problems
            else []
        ),
    ]
    if not full:
        return short
    scope = await agent.scopes.current(conversation)
    return [
        *short,
        *scope_line(scope),
        *await _last_decision(kernel, session),
        *([turn_line(turn, budget.currency)] if turn is not None else []),
        budget_line(budget),
        _cli_status(kernel),
        kernel.mcp.status_text(),
        await _search_status(kernel, scopes.visible(scope.project, scope.persona)),
        *await _vector_status(kernel),
        *channel.lines,
        _cron_status(kernel),
        *_backup_line(kernel, backup),
        t("tg.status_error", error=agent.last_error or "—"),
    ]


async def _session_line(kernel: KernelParts, conversation: str, session: int | None) -> str:
    """The session, and its work mode when it is not ``act`` (issue 38)."""
    row = await kernel.store.get_session(session) if session is not None else None
    if row is None:
        line = t("tg.status_session", session=t("tg.status_new"))
        mode = await kernel.agent.modes.inherited(conversation)
    else:
        first = await kernel.store.first_words([row.id])
        shown = named(row.id, session_name(row, first.get(row.id, "")))
        line, mode = t("tg.status_session", session=shown), row.mode
    return line if mode == ACT else f"{line} · {t('mode.status', mode=mode)}"


def _running_line(kernel: KernelParts, conversation: str) -> str:
    """What runs now, one fact: the conversation's turn (and whether it waits for the
    owner), a delegated CLI; idle when none."""
    agent = kernel.agent
    parts = []
    if agent.sessions.running(conversation) is not None:
        parts.append(t("status.replying"))
        if agent.asks.waiting(conversation):
            parts.append(t("status.asking"))
    running = kernel.delegator.running
    if running is not None:
        elapsed = format_elapsed(running.elapsed)
        parts.append(t("status.cli", cli=running.cli, elapsed=elapsed))
    return t("status.running", what=" · ".join(parts)) if parts else t("tg.status_idle")


def _health(kernel: KernelParts, problems: Sequence[str]) -> str:
    """One word: ``down`` when no enabled model can be called now, ``degraded`` with
    any problem, else ``ok``."""
    agent = kernel.agent
    enabled = [n for n, p in agent.config.providers.items() if p.enabled]
    usable = [s for s in agent.health.states(enabled) if s.state in ("closed", "half_open")]
    if not usable:
        return "down"
    return "degraded" if problems else "ok"


def _mcp_problems(kernel: KernelParts) -> list[str]:
    return [
        t("status.problem_mcp", name=s.name) for s in kernel.mcp.status() if s.state == "failed"
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


async def _backup_state(kernel: KernelParts) -> tuple[float | None, bool] | None:
    """The last good backup's age and whether the daily one fails; None with it off
    (then nothing of kernel.backup is imported)."""
    if not kernel.agent.config.backup.enabled:
        return None
    from kernel.backup.schedule import backup_state

    return await backup_state(kernel.agent.config, kernel.store, kernel.cron.clock.now())


def _backup_problems(state: tuple[float | None, bool] | None) -> list[str]:
    """The daily backup failing, or the last good one past two days (issue 40)."""
    if state is None:
        return []
    from kernel.backup.schedule import STALE, age_words

    age, failing = state
    problems = [t("status.problem_backup_failing")] if failing else []
    if age is not None and age > STALE:
        problems.append(t("status.problem_backup_old", age=age_words(age)))
    return problems


def _backup_line(kernel: KernelParts, state: tuple[float | None, bool] | None) -> list[str]:
    """The last good backup's age, and where they are; none with the daily backup off."""
    if state is None:
        return []
    from kernel.backup.schedule import age_words

    path = kernel.agent.config.backups_dir
    if state[0] is None:
        return [t("backup.status_none", path=path)]
    return [t("backup.status_last", age=age_words(state[0]), path=path)]


async def _vector_status(kernel: KernelParts) -> list[str]:
    """Memory by meaning (issue 39), when configured: the backfill's progress."""
    vectors = kernel.memories.vectors
    return [] if vectors is None else [await vectors.status_line()]


def _cron_status(kernel: KernelParts) -> str:
    cron = kernel.cron
    job = cron.next_due() if cron.started else None
    if job is None or job.row.next_run_at is None:
        return t("tg.status_cron_none")
    when = kernel.agent.local_time(job.row.next_run_at).strftime("%Y-%m-%d %H:%M")
    return t("tg.status_cron", name=job.spec.name, when=when)
