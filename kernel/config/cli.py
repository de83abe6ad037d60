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
"""

from __future__ import annotations

from typing import Any, Literal, get_args

from pydantic import Field

from kernel.config.schema import PosFloat, Section, internal

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


def args_problem(cli: str, args: list[str], approvals: str = "off") -> tuple[str, str] | None:
    """``(kind, flag)`` when ``args`` cannot place the task safely, else None; kind is
    ``dashdash``, ``variadic``, ``prompt``, ``approvals_cli`` (only Claude Code can ask
    the owner) or ``approvals_flag`` (a flag that skips the asking); the loader words
    the refusal."""
    if approvals == "telegram":
        if cli != "claude_code":
            return ("approvals_cli", cli)
        for arg in args:
            if any(arg.startswith(flag) or arg.endswith(flag) for flag in UNASKED):
                return ("approvals_flag", arg)
    if "--" in args:
        return ("dashdash", "--")
    if args and args[-1] in VARIADIC.get(cli, ()):
        return ("variadic", args[-1])
    if cli == "gemini":
        for index, arg in enumerate(args):
            if (arg in GEMINI_PROMPT and index != len(args) - 1) or arg.startswith("--prompt="):
                return ("prompt", arg)
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

    @property
    def jsonl(self) -> bool:
        """Whether stdout is a JSONL event stream rather than the answer itself."""
        if self.output is not None:
            return self.output == "jsonl"
        return any("stream-json" in a or a in ("--json", "--experimental-json") for a in self.args)


DEFAULT_CLI: dict[str, dict[str, Any]] = {
    "claude_code": {
        "command": "claude",
        "args": ["-p", "--output-format=stream-json", "--verbose"],
    },
    # codex-cli 0.169.0 dropped --full-auto; --sandbox=workspace-write is what it set.
    "codex": {
        "command": "codex",
        "args": [
            "exec",
            "--json",
            "--sandbox=workspace-write",
            "--skip-git-repo-check",
            "--color=never",
        ],
    },
    # gemini-cli 0.61.0 exits 55 headless in a folder it was never told to trust.
    "gemini": {"command": "gemini", "args": ["--output-format=stream-json", "--skip-trust"]},
}
