"""The chat message that follows a running ``delegate_to_cli`` call.

The view learns a delegation started from the turn's ``tool_call`` event and hands it
here: "⏳ Running the task… (cli)", then the current step and the elapsed time read
from the Kernel's Delegator, edited at most once per ``interval`` (a new step is shown
at the first allowed moment, the elapsed time refreshes at least that often), then the
outcome, through the durable outbox (the edits before it are best effort): a run that
did not succeed says how it ended (the exit code or signal, and Kernel's signal with its
time) and the CLI's last known cause (its last retry or API error). While the
CLI waits on a permission prompt of this call (``approvals = "telegram"``), the message
says it waits for the owner's approval. An edit is never sent with unchanged text
("message is not modified").
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from telegram.error import TelegramError

from kernel.commands import format_elapsed
from kernel.core.asks import AskRegistry
from kernel.core.events import ToolResult
from kernel.core.i18n import t
from kernel.core.tasks import TaskSet
from kernel.delegate.delegator import Delegation, Delegator
from kernel.delegate.ending import cause_words, exit_words
from kernel.delegate.formats import Trouble, display_name
from kernel.store.mailbox import OutboxItem
from kernel.telegram.budget import Bot, Priority
from kernel.telegram.outbox import Outbox, delete_item, plain_items, unsend_item

log = logging.getLogger(__name__)

TOOL_NAME = "delegate_to_cli"
HALT_WAIT = 5.0  # seconds the view waits for a cancelled progress edit to end


def trouble_line(cli: str, trouble: Trouble) -> str:
    """ "Claude Code 无法连接其 API：… · 第 3 次重试" from the CLI's latest retry/error."""
    name = display_name(cli)
    if trouble.attempt <= 0:
        return t("tg.delegate_error", cli=name, error=trouble.error)
    if trouble.max_attempts:
        return t(
            "tg.delegate_trouble_max",
            cli=name,
            error=trouble.error,
            attempt=trouble.attempt,
            max=trouble.max_attempts,
        )
    return t("tg.delegate_trouble", cli=name, error=trouble.error, attempt=trouble.attempt)


def _with_ending(text: str, delegation: Delegation) -> str:
    """``text``, then how the process ended when Kernel signalled it (its time limits,
    /cancel, its stop; a kill from outside is the headline's), then the CLI's last known
    cause, each on its own line."""
    lines = [text]
    status = delegation.status
    if status is not None and status.sent:
        lines.append(t("tg.delegate_exit", status=exit_words(status)))
    no_progress = delegation.outcome == "no_progress"  # its headline names the cause
    if delegation.cause is not None and not no_progress:
        lines.append(t("tg.delegate_cause", cause=cause_words(delegation.cli, delegation.cause)))
    return "\n".join(lines)


class DelegationProgress:
    def __init__(
        self,
        bot: Bot,
        outbox: Outbox,
        chat_id: int,
        delegator: Delegator,
        conversation: str,
        call_id: str,
        cli: str | None,
        *,
        interval: float,
        record: Callable[[int], Awaitable[None]] | None = None,
        asks: AskRegistry | None = None,
    ) -> None:
        self.bot = bot
        self.asks = asks  # where this call's permission prompts wait
        self.record = record  # a message of its own goes on record: a crash must not keep it
        self.outbox = outbox
        self.chat_id = chat_id
        self.delegator = delegator
        self.conversation = conversation
        self.call_id = call_id
        self.cli = cli or delegator.default_cli()  # the one the call runs
        self.interval = interval
        self.message_id: int | None = None
        self.outcome = ""  # the final state shown (once the call returned)
        self.outcome_rows: list[int] = []  # the outbox rows that show it
        self.started = time.monotonic()
        self._shown = ""
        self._last_edit = 0.0
        self._ticker = TaskSet("delegate progress")  # the edits, or the wait for the CLI
        self._began = False  # false while an approval is still asked

    def _delegation(self) -> Delegation | None:
        found = self.delegator.current(self.conversation)
        return found if found is not None and found.cli == self.cli else None

    def render(self) -> str:
        delegation = self._delegation()
        lines = [t("tg.delegate_running", cli=self.cli)]
        elapsed = time.monotonic() - self.started
        if delegation is not None:
            elapsed = delegation.elapsed
            if delegation.step:
                lines.append(t("tg.delegate_step", step=delegation.step))
            if delegation.trouble is not None:
                lines.append(trouble_line(self.cli, delegation.trouble))
        if waiting := self._prompts():
            lines.append(t("tg.perm_waiting", count=waiting))
        lines.append(t("tg.delegate_elapsed", elapsed=format_elapsed(elapsed)))
        return "\n".join(lines)

    def _prompts(self) -> int:
        """How many of this call's permission prompts wait for the owner."""
        if self.asks is None:
            return 0
        return sum(
            1
            for q in self.asks.waiting(self.conversation)
            if q.kind == "permission" and q.tool_call_id == self.call_id
        )

    async def begin(self, placeholder: int | None) -> None:
        """Show the progress in ``placeholder`` (or a new message) and start the edits."""
        self._began = True
        text = self.render()
        if placeholder is not None and await self._edit(placeholder, text):
            self.message_id = placeholder
        else:
            try:
                sent = await self.bot.send_message(self.chat_id, text, disable_notification=True)
                self.message_id = sent.message_id
                self._shown = text
                await self._record(sent.message_id)
            except TelegramError as exc:
                log.warning("progress message failed: %s", type(exc).__name__)
        self._last_edit = time.monotonic()
        if self.message_id is not None:
            self._ticker.spawn(self._tick(), "delegate-progress")

    async def _record(self, message_id: int) -> None:
        if self.record is not None:  # never raises (the view's record is best effort)
            await self.record(message_id)

    def begin_when_running(self) -> None:
        """For a call that waits for the owner's approval first: the message appears
        only once the CLI really starts (below the question), not while it is asked."""
        self._ticker.spawn(self._await_start(), "delegate-progress-wait")

    async def _await_start(self) -> None:
        seen = self.delegator.version
        while self.delegator.current(self.conversation) is None:
            seen = await self.delegator.wait_change(seen, self.interval)
        self.started = time.monotonic()
        await self.begin(None)

    async def _tick(self) -> None:
        # One edit per interval: a new step shows at the next allowed moment, and the
        # elapsed time (which changes every second) refreshes at that same cadence.
        while True:
            wait = self._last_edit + self.interval - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            assert self.message_id is not None
            await self._edit(self.message_id, self.render(), "progress")
            self._last_edit = time.monotonic()

    async def _edit(self, message_id: int, text: str, priority: Priority = "final") -> bool:
        if text == self._shown:
            return True
        try:
            await self.bot.edit_message_text(
                text,
                chat_id=self.chat_id,
                message_id=message_id,
                rate_limit_args={"priority": priority},
            )
        except TelegramError as exc:
            log.info("progress edit failed: %s", type(exc).__name__)
            return False
        self._shown = text
        return True

    async def _halt(self) -> None:
        # Bounded: an edit in flight gets a moment, the view never hangs on it.
        await self._ticker.close(HALT_WAIT)

    async def finish(self, event: ToolResult) -> None:
        """The tool returned: show its outcome."""
        await self._halt()
        if not self._began:
            return  # never ran (denied or unanswered approval): the question says so
        if not event.ok:  # refused before anything ran (busy, not installed, bad cwd)
            reason = event.summary.removeprefix("error: ")
            await self._show(t("tg.delegate_refused", cli=self.cli, reason=reason))
            return
        delegation = self.delegator.latest(self.conversation)
        await self._show(self._outcome(delegation))

    async def cancelled(self) -> None:
        """The turn was cancelled (or failed) while the CLI ran."""
        await self._halt()
        if not self._began:
            return
        delegation = self.delegator.latest(self.conversation)
        elapsed = delegation.elapsed if delegation else time.monotonic() - self.started
        if delegation is not None and delegation.outcome == "cancelled":
            text = t("tg.delegate_cancelled", cli=self.cli, elapsed=format_elapsed(elapsed))
            await self._show(_with_ending(text, delegation))
            return
        await self._show(t("tg.delegate_stopped", cli=self.cli, elapsed=format_elapsed(elapsed)))

    async def close(self) -> None:
        await self._halt()

    def _outcome(self, delegation: Delegation | None) -> str:
        text = self._headline(delegation)
        if delegation is None or delegation.outcome == "ok":
            return text
        return _with_ending(text, delegation)

    def _headline(self, delegation: Delegation | None) -> str:
        if delegation is None:  # not expected: a tool that returned has a record
            elapsed = format_elapsed(time.monotonic() - self.started)
            return t("tg.delegate_done", cli=self.cli, elapsed=elapsed)
        elapsed = format_elapsed(delegation.elapsed)
        outcome = delegation.outcome
        if outcome == "ok":
            return t("tg.delegate_ok", cli=self.cli, elapsed=elapsed)
        if outcome == "timeout":
            return t("tg.delegate_timeout", cli=self.cli, elapsed=elapsed)
        if outcome == "idle":
            return t("tg.delegate_idle", cli=self.cli, elapsed=elapsed)
        if outcome == "no_progress" and delegation.trouble is not None:
            trouble = delegation.trouble
            name = display_name(self.cli)
            return t(
                "tg.delegate_no_progress",
                cli=name,
                error=trouble.error,
                attempt=trouble.attempt,
                elapsed=elapsed,
            )
        if outcome in ("stopped", "cancelled"):
            return t("tg.delegate_stopped", cli=self.cli, elapsed=elapsed)
        status = delegation.status
        if status is not None and status.from_outside:
            return t("tg.delegate_killed", cli=self.cli, signal=status.signal, elapsed=elapsed)
        code = "—" if delegation.exit_code is None else delegation.exit_code
        return t("tg.delegate_failed", cli=self.cli, code=code, elapsed=elapsed)

    async def _show(self, text: str) -> None:
        """The final state, through the outbox: the progress message becomes ``text``
        (sent anew if it is gone), in order with the reply queued after it."""
        if self.message_id is not None and text == self._shown:
            return
        items = plain_items(text, replace=self.message_id, silent=True)
        ticket = await self.outbox.put(self.chat_id, items)
        self._shown = text
        self.outcome, self.outcome_rows = text, ticket.ids

    def folded(self) -> tuple[str, list[OutboxItem]]:
        """The finished call, folded into the answer (issue 34): its outcome line for
        the answer to carry, and the items that take its message away ("" and none
        when it never showed: an approval denied)."""
        if not self.outcome:
            return "", []
        gone = [unsend_item(row) for row in self.outcome_rows]
        if not gone and self.message_id is not None:
            gone = [delete_item(self.message_id)]
        return self.outcome, gone
