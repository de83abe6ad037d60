"""``[cli.<name>]``: the coding-agent CLIs, and the argument rules checked at load.

Each CLI gets its task where no option can swallow it (see :mod:`kernel.delegate.argv`).
What cannot work is refused at load (:func:`args_problem`): a ``--`` written in ``args``
(Kernel ends the options itself), a variadic flag with no value at the end of ``args``
(its values would be Kernel's ``--``), and gemini's ``-p`` anywhere but last.

``approvals = "telegram"`` (Claude Code only) has each of its permission prompts asked
in the owner's chat through Kernel's own MCP endpoint (:mod:`kernel.delegate.approvals`).

``instructions`` and ``instructions_file`` (read at each delegation, see
:mod:`kernel.delegate.instructions`) reach Claude Code as ``--append-system-prompt`` and
Codex and Gemini as a ``[SYSTEM]`` block before the task.

``env`` (issue 38): environment for that CLI only, on top of ``[envs]``. Under the
privilege rule (:mod:`kernel.config.privilege`) as ``[envs]`` is: a name that is not a
credential's (a loader variable such as ``LD_PRELOAD`` first of all) is the owner's to
set; the sidecar's callers are refused or the owner asked.

Which CLIs exist is a registry (issue 38, seed 003): each coding CLI is one
:class:`CliSpec` (its default command and args, the flags that take several values, its
own rule for ``args``, whether it can ask the owner), registered once per process by its
adapter's plugin (``Plugins.add_cli``; the three built-ins here). ``[cli.<name>]`` is
read for every registered name; any other is warned about and left out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, get_args

from pydantic import Field

from kernel.config.schema import SECRET_MAP, PosFloat, Section, StrMap, internal

CliName = Literal["claude_code", "codex", "gemini"]
CLI_NAMES: tuple[str, ...] = get_args(CliName)
CliOutput = Literal["text", "jsonl"]
CLI_OUTPUTS: tuple[str, ...] = get_args(CliOutput)

# Flags that take several values (or an optional one) in each CLI's --help.
VARIADIC: dict[str, frozenset[str]] = {
    "claude_code": frozenset(
        {
            "--add-dir",
            "--allowedTools",
            "--allowed-tools",
            "--disallowedTools",
            "--disallowed-tools",
            "--betas",
            "--file",
            "--mcp-config",
            "--tools",
        }
    ),
    "codex": frozenset({"-i", "--image"}),
    "gemini": frozenset(
        {
            "--policy",
            "--admin-policy",
            "--allowed-mcp-server-names",
            "--allowed-tools",
            "-e",
            "--extensions",
            "--include-directories",
        }
    ),
}
GEMINI_PROMPT = ("-p", "--prompt")
# Claude Code flags that would take the owner out of the loop Kernel sets up with
# ``approvals = "telegram"`` (Kernel passes --permission-prompt-tool itself).
UNASKED = ("--dangerously-skip-permissions", "--permission-prompt-tool", "bypassPermissions")
Approvals = Literal["off", "telegram"]


ArgsRule = Callable[[list[str]], tuple[str, str] | None]


@dataclass(frozen=True, slots=True)
class CliSpec:
    """What the configuration knows of one coding CLI. ``command``/``args``: its
    ``[cli.<name>]`` defaults; ``variadic``: flags that take several values (one may not
    end ``args``); ``rule``: its own check of ``args`` (a ``(kind, flag)`` whose words
    are ``config.cli_args_<kind>``); ``asks_owner``: it can put its permission prompts
    to the owner (``approvals = "telegram"``)."""

    name: str
    command: str
    args: tuple[str, ...] = ()
    variadic: frozenset[str] = frozenset()
    rule: ArgsRule | None = None
    asks_owner: bool = False
    defaults: dict[str, Any] = field(default_factory=dict)  # more [cli.<name>] defaults

    def table(self) -> dict[str, Any]:
        return {"command": self.command, "args": list(self.args), **self.defaults}


SPECS: dict[str, CliSpec] = {}  # every CLI this process knows, by name


def register_cli(spec: CliSpec) -> None:
    """Make ``[cli.<spec.name>]`` a known table (process-wide: configurations are read
    wherever they are, as cron node types are checked)."""
    SPECS[spec.name] = spec


def cli_names() -> tuple[str, ...]:
    return tuple(SPECS)


def _gemini_prompt(args: list[str]) -> tuple[str, str] | None:
    for index, arg in enumerate(args):
        if (arg in GEMINI_PROMPT and index != len(args) - 1) or arg.startswith("--prompt="):
            return ("prompt", arg)
    return None


def args_problem(cli: str, args: list[str], approvals: str = "off") -> tuple[str, str] | None:
    """``(kind, flag)`` when ``args`` cannot place the task safely, else None; kind is
    ``dashdash``, ``variadic``, ``prompt`` (the CLI's own rule), ``approvals_cli`` (only
    a CLI that can ask the owner) or ``approvals_flag`` (a flag that skips the asking);
    the loader words the refusal."""
    spec = SPECS.get(cli)
    if approvals == "telegram":
        if spec is None or not spec.asks_owner:
            return ("approvals_cli", cli)
        for arg in args:  # also inside --settings' JSON ({"defaultMode": "bypassPermissions"})
            for flag in UNASKED:
                if flag.lstrip("-") in arg:
                    return ("approvals_flag", flag)  # the flag, not the arg: it may hold more
    if "--" in args:
        return ("dashdash", "--")
    if spec is not None and args and args[-1] in spec.variadic:
        return ("variadic", args[-1])
    if spec is not None and spec.rule is not None:
        return spec.rule(args)
    return None


class CLIConfig(Section):
    name: str = internal("")
    command: str = Field("", description="executable name (looked up on PATH) or path")
    args: list[str] = Field(default_factory=list, description="arguments before the task")
    timeout: PosFloat = Field(600.0, description="seconds before the process group is killed")
    idle_timeout: PosFloat = Field(
        300.0, description="seconds without output, counted after the CLI first showed some"
    )
    output: CliOutput | None = Field(None, description='"jsonl" or "text"; unset: from args')
    no_progress_timeout: PosFloat = Field(
        60.0, description="seconds without progress after a retry or an API error"
    )
    version_timeout: PosFloat = Field(10.0, description="`<command> --version` and the probe")
    approvals: Approvals = Field(
        "off",
        description='claude_code only: "telegram" asks the owner before each tool the CLI '
        "wants to use (Allow once / Allow for this task / Deny); needs the sidecar",
    )
    approval_timeout: PosFloat = Field(
        600.0,
        description="seconds a permission prompt waits for the owner; then it is denied "
        "(the CLI's timeouts do not run while it waits)",
    )
    instructions: str = Field(
        "", description="system instructions given to the CLI with each delegated task"
    )
    instructions_file: str = Field(
        "",
        description="a UTF-8 file of instructions (relative: to config.toml's folder), "
        "read at each delegation; a missing one refuses the delegation",
    )
    env: Annotated[StrMap, SECRET_MAP] = Field(
        default_factory=dict,
        description="environment for this CLI only, over [envs]; names that are not a "
        "credential's (LD_PRELOAD, PATH …) are the owner's to set",
    )

    @property
    def jsonl(self) -> bool:
        """Whether stdout is a JSONL event stream rather than the answer itself."""
        if self.output is not None:
            return self.output == "jsonl"
        return any("stream-json" in a or a in ("--json", "--experimental-json") for a in self.args)


BUILT_IN: tuple[CliSpec, ...] = (
    CliSpec(
        "claude_code",
        "claude",
        ("-p", "--output-format=stream-json", "--verbose"),
        VARIADIC["claude_code"],
        asks_owner=True,
    ),
    # codex-cli 0.169.0 dropped --full-auto; --sandbox=workspace-write is what it set.
    CliSpec(
        "codex",
        "codex",
        ("exec", "--json", "--sandbox=workspace-write", "--skip-git-repo-check", "--color=never"),
        VARIADIC["codex"],
    ),
    # gemini-cli 0.61.0 exits 55 headless in a folder it was never told to trust.
    CliSpec(
        "gemini",
        "gemini",
        ("--output-format=stream-json", "--skip-trust"),
        VARIADIC["gemini"],
        _gemini_prompt,
    ),
)
for _spec in BUILT_IN:
    register_cli(_spec)

DEFAULT_CLI: dict[str, dict[str, Any]] = {spec.name: spec.table() for spec in BUILT_IN}
"""The built-ins' ``[cli.<name>]`` defaults (a registered CLI's are ``spec.table()``)."""
