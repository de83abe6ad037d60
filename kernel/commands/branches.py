"""/branches (issue 38, seed 002 ``siblingNav``): the current session's branches — what
/undo, /rewind and 🔁 took out of what the model sees — and a switch to one.

A bare ``/branches`` lists them (where each forks, its first words, how many messages,
when), each offered as a choice ``/branches N`` (Telegram's picker makes them buttons);
``/branches N`` makes branch N the live history, the history left kept as a branch
(kernel/agent/rewind.py, kernel/store/branches.py). Refused while a turn runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kernel.commands.listing import activity_words, recap
from kernel.commands.reply import Choice, Reply
from kernel.core.errors import KernelError
from kernel.core.i18n import t
from kernel.core.oneline import one_line

if TYPE_CHECKING:
    from kernel.agent.agent import Agent
    from kernel.store.branches import BranchRow

WORDS = 60  # characters of a branch's first words in the listing
FORK_WORDS = 30  # characters of its fork message's
CHOICE_WORDS = 24  # characters of its first words on a button


async def branches_command(agent: Agent, conversation: str, arg: str, actor: str) -> Reply:
    """``arg`` empty: the listing, with its branches as choices; else switch to ``arg``."""
    if arg:
        return await _switch(agent, conversation, arg, actor)
    session_id = agent.sessions.current_session(conversation)
    if session_id is None:
        return Reply(t("conv.no_branches"), error=True)
    listed = await agent.control.list_branches(session_id)
    if not listed.rows:
        return Reply(t("conv.no_branches"), error=True)
    now = agent.local_now()
    lines = [t("conv.branches_header")]
    for row in listed.rows:
        when = activity_words(agent.local_time(row.started_at), now)
        lines.append(
            t(
                "conv.branch_line",
                branch=row.branch,
                when=when,
                count=row.messages,
                how=t(f"conv.branch_how.{row.how}") if row.how in _HOW else row.how,
                fork=_fork(row),
                first=_words(row.first_words, WORDS),
            )
        )
    if listed.total > len(listed.rows):
        lines.append(t("conv.branches_more", shown=len(listed.rows), total=listed.total))
    lines.append(t("conv.branches_pick"))
    choices = tuple(
        Choice(
            t(
                "conv.branch_choice",
                branch=row.branch,
                first=_words(row.first_words, CHOICE_WORDS),
                count=row.messages,
            ),
            f"/branches {row.branch}",
        )
        for row in reversed(listed.rows)  # the newest first
    )
    return Reply("\n".join(lines), choices=choices)


async def _switch(agent: Agent, conversation: str, arg: str, actor: str) -> Reply:
    if not (arg.isascii() and arg.isdigit() and len(arg) <= 18):
        return Reply(t("conv.branch_usage"), error=True)
    try:
        switched = await agent.control.switch(conversation, int(arg), actor)
    except KernelError as exc:
        return Reply(str(exc), error=True)
    left = ""
    if switched.left:
        left = t("conv.switched_left", left=switched.left[0][0])
    text = t("conv.switched", branch=switched.branch, restored=switched.restored, left=left)
    session_id = agent.sessions.current_session(conversation)
    last = await agent.store.load_messages(session_id, rounds=1) if session_id else []
    return Reply(text + recap(last))


_HOW = ("undo", "rewind", "retry", "switch", "cut")


def _words(text: str, width: int) -> str:
    return one_line(text, width) if text.strip() else t("conv.branch_no_text")


def _fork(row: BranchRow) -> str:
    if row.fork <= 0:
        return t("conv.branch_fork_start")
    return t("conv.branch_fork_after", words=_words(row.fork_words, FORK_WORDS))
