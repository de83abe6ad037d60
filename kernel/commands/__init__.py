"""The channel-neutral text commands (/new /history /resume /retitle /del_history
/provider /model /remember /memory /forget /status /cancel /usage /mcp /audit), written once for
every text channel; Telegram and ``kernel chat`` only render what they return.

Public API:

- ``Commands``: the command set of one process; ``run(conversation, name, arg)``
  answers a ``Reply``, and keeps the last ``#n`` listing of each conversation.
- ``KernelParts``: what ``Commands`` reads from the composition root; ``LocalCore``:
  those parts as a core started in this process (``kernel chat``, ``kernel tui``).
- ``Reply`` and ``Choice``: a neutral answer (catalogue text, an error flag, optional
  choices a channel may render as buttons, optional slow follow-up).
- ``SHARED``: the names ``run`` knows, in help order.
- ``Button``: an inline button of a ``Reply`` (its press data, the command it stands for).
- ``session_label``: the one line a session is known by (title or first words, last
  activity, message count); ``format_history``: the /history lines; ``parse_refs``:
  ``#n`` references into a /memory listing.
- ``mcp_listing``: the /mcp text of the MCP servers' status.
- ``format_elapsed``: "12 s" / "3 min 4 s" as the catalogue words it.
- ``render_report``: a :class:`~kernel.spend.UsageReport` as the /usage text.
- ``CATALOGUE``, ``MENU``: every command's declaration (its /help group, whether the
  Telegram menu offers it); ``welcome``, ``overview``, ``help_topic``: /start, /help
  and ``/help <topic>``.
"""

from kernel.commands.command_set import SHARED, Commands
from kernel.commands.help import CATALOGUE, MENU, overview, welcome
from kernel.commands.help import topic as help_topic
from kernel.commands.listing import format_history, parse_refs, session_label
from kernel.commands.mcp import mcp_listing
from kernel.commands.parts import KernelParts, LocalCore
from kernel.commands.reply import Button, Choice, Reply
from kernel.commands.status import format_elapsed
from kernel.commands.usage import render_report

__all__ = [
    "CATALOGUE",
    "MENU",
    "SHARED",
    "Button",
    "Choice",
    "Commands",
    "KernelParts",
    "LocalCore",
    "Reply",
    "format_elapsed",
    "format_history",
    "help_topic",
    "mcp_listing",
    "overview",
    "parse_refs",
    "render_report",
    "session_label",
    "welcome",
]
