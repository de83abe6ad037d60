"""A session's mode (issue 38; seed 001's ``EnterPlanMode`` / ``ExitPlanMode`` /
``SetPermissionMode`` and its "Mode 过滤逻辑"), and what a tool does, declared once with
the tool.

- ``act``: every tool (the default, and Kernel's behaviour before modes existed);
- ``plan``: the model plans before it acts; it asks the owner to leave plan mode with
  ``exit_plan_mode`` (the owner confirms);
- ``read_only``: the owner's permission: only the owner lifts it (``/mode act``).

In ``plan`` and ``read_only`` a tool that writes or acts is neither offered nor run.
A tool's :data:`Effect` says which it is: ``reads`` (changes nothing outside the chat),
``acts`` (writes, runs, delegates or reaches out: the default, so a tool that declares
nothing is held back), ``control`` (switches the mode itself: always offered, or a
restricted session could never leave its mode).
"""

from __future__ import annotations

from typing import Literal

ACT = "act"
PLAN = "plan"
READ_ONLY = "read_only"
SESSION_MODES = (ACT, PLAN, READ_ONLY)

Effect = Literal["reads", "acts", "control"]
READS: Effect = "reads"
ACTS: Effect = "acts"
CONTROL: Effect = "control"

# The stable error code of a tool refused by the session's mode (HTTP 403, as the seed's
# "Plan-mode 屏蔽写 tool").
REFUSED_CODE = "tool_forbidden_in_mode"


def restricted(mode: str) -> bool:
    """Whether ``mode`` holds back the tools that write or act."""
    return mode in (PLAN, READ_ONLY)


def mode_of(value: object) -> str:
    """A stored or given value as a mode; anything unknown is ``act``."""
    return value if isinstance(value, str) and value in SESSION_MODES else ACT
