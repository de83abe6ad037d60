"""Coding-CLI adapters (seed 003): everything the Delegator needs to know of one CLI.

An adapter says how its CLI is run and read, and nothing else in the delegation does:
the command line (:meth:`CliAdapter.argv`: the task last, where no option can swallow
it; the instructions placed as the CLI takes them), the flags one run adds
(:meth:`CliAdapter.run_flags`: Codex's working root and final-answer file), its JSONL
stream's formatter (:meth:`CliAdapter.formatter`), the permission wiring
(:meth:`CliAdapter.permission_flags`, for a CLI whose ``CliSpec.asks_owner``: how it
reaches Kernel's MCP endpoint with the run's permit), and the version probe
(:meth:`CliAdapter.version_argv`). Its :class:`kernel.config.cli.CliSpec` says what the
configuration knows of it (defaults, variadic flags, its ``args`` rule).

A new coding CLI is one adapter registered by a plugin (``Plugins.add_cli``): no edit to
the configuration's types or to the Delegator. The three built-ins are registered here.

Public API: :class:`CliAdapter`, :func:`register_adapter`, :func:`adapter_for`.
"""

from __future__ import annotations

from pathlib import Path

from kernel.config.cli import SPECS, CliSpec, register_cli
from kernel.delegate import permits
from kernel.delegate.argv import build_argv, output_flags
from kernel.delegate.formats import (
    DISPLAY_NAMES,
    ClaudeStream,
    CodexStream,
    Formatter,
    GeminiStream,
    PlainText,
)


class CliAdapter:
    """One coding CLI. The defaults are a CLI that takes ``args``, then ``--``, then
    the task (with the instructions as a leading ``[SYSTEM]`` block), prints plain text
    (or a stream this adapter's :meth:`stream` reads), and answers ``--version``."""

    spec: CliSpec
    display: str = ""

    @property
    def name(self) -> str:
        return self.spec.name

    def stream(self) -> Formatter:
        """The formatter of the CLI's JSONL stream (``output = "jsonl"``)."""
        return PlainText()

    def formatter(self, jsonl: bool) -> Formatter:
        return self.stream() if jsonl else PlainText()

    def argv(
        self, executable: str, args: list[str], task: str, extra: list[str], system: str
    ) -> list[str]:
        """The command line; the task must be its last element (the audit masks it).
        The built-ins' placements are :func:`kernel.delegate.argv.build_argv`'s."""
        return build_argv(self.name, executable, args, task, extra, system)

    def run_flags(self, folder: Path, stamp: str, workdir: Path) -> tuple[list[str], Path | None]:
        """Flags one run adds, and the file its final answer is written to (None)."""
        return [], None

    def permission_flags(self, permit: Path) -> list[str]:
        """The flags that send the CLI's permission prompts to Kernel's MCP endpoint
        with the run's ``permit`` file (only for a spec that ``asks_owner``)."""
        raise NotImplementedError(f"{self.name} cannot ask the owner")

    def version_argv(self, executable: str) -> list[str]:
        return [executable, "--version"]


class ClaudeCode(CliAdapter):
    spec = SPECS["claude_code"]
    display = "Claude Code"

    def stream(self) -> Formatter:
        return ClaudeStream()

    def permission_flags(self, permit: Path) -> list[str]:
        return permits.flags(permit)


class Codex(CliAdapter):
    spec = SPECS["codex"]
    display = "Codex"

    def stream(self) -> Formatter:
        return CodexStream()

    def run_flags(self, folder: Path, stamp: str, workdir: Path) -> tuple[list[str], Path | None]:
        return output_flags(folder, stamp, workdir)


class Gemini(CliAdapter):
    spec = SPECS["gemini"]
    display = "Gemini CLI"

    def stream(self) -> Formatter:
        return GeminiStream()


ADAPTERS: dict[str, CliAdapter] = {}


def register_adapter(adapter: CliAdapter) -> None:
    """Make ``adapter`` the way its CLI runs, and ``[cli.<name>]`` a known table."""
    register_cli(adapter.spec)
    ADAPTERS[adapter.name] = adapter
    DISPLAY_NAMES[adapter.name] = adapter.display or adapter.name


def adapter_for(name: str) -> CliAdapter:
    """The registered adapter of ``name``; a configured CLI without one runs as the
    default adapter does (its spec's name)."""
    adapter = ADAPTERS.get(name)
    if adapter is not None:
        return adapter
    fallback = CliAdapter()
    fallback.spec = SPECS.get(name) or CliSpec(name, name)
    return fallback


for _builtin in (ClaudeCode(), Codex(), Gemini()):
    register_adapter(_builtin)
