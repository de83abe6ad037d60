"""What the audit trail keeps of a delegation (issue 23): facts, never the task.

:func:`command_line` is the command line as run with the task and the instructions
replaced by ``<task sha256:… chars:N>`` / ``<instructions sha256:… chars:N>``: the
executable by its file name, flags verbatim, except a secret (a value under a secret's
name — ``--token x``, ``--api-key=x`` —, a configured key, a value of ``envs``) which is
``<secret>``, and an absolute path, which is workspace- or data-relative
(``data/run/…``) or else ``<path sha256:…>``. :func:`place` names the working folder the
same way, or as ``project:<name>`` inside the chat's project folder. :class:`RunRecord`
writes a run's ``delegation.started`` and ``delegation.ended`` rows in the delegating
turn's session.
"""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any

from kernel.audit import AuditLog
from kernel.audit import kinds as audit_kinds
from kernel.config import Config, secrets
from kernel.core.redact import is_secret_name, secret_assignment
from kernel.tools.registry import ToolContext

SECRET = "<secret>"
MIN_SECRET = 8  # an envs value shorter than this is a setting, not a credential


def hashed(label: str, text: str) -> str:
    """``<label sha256:… chars:N>``: a text known by its hash and its length only."""
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    return f"<{label} sha256:{digest} chars:{len(text)}>"


def _path_hash(path: str) -> str:
    digest = hashlib.sha256(path.encode("utf-8", "surrogatepass")).hexdigest()
    return f"<path sha256:{digest}>"


def _inside(path: Path, root: Path) -> str | None:
    """``path`` relative to ``root`` ("." for the root itself), or None when outside."""
    try:
        rel = path.relative_to(root)
    except ValueError:
        return None
    return rel.as_posix() or "."


def relative_path(path: str, config: Config) -> str:
    """An absolute path as the audit may hold it: inside the workspace relative to it,
    inside the data folder as ``data/…``, else only its hash."""
    resolved = Path(path)
    workspace = config.general.default_workspace
    for root, prefix in ((workspace, ""), (config.data_dir, "data/")):
        for candidate in {root, root.resolve()}:
            rel = _inside(resolved, candidate)
            if rel is not None:
                return prefix + rel if prefix else rel
    return _path_hash(path)


def place(workdir: Path, config: Config, project: str = "", folder: str = "") -> str:
    """Where a delegation ran: ``project:<name>[/sub]`` in the chat's project folder,
    else workspace-relative, else a hash of the path."""
    if project and folder:
        root = Path(folder).expanduser()
        for candidate in {root, root.resolve()}:
            rel = _inside(workdir, candidate)
            if rel is not None:
                return f"project:{project}" + ("" if rel == "." else f"/{rel}")
    return relative_path(str(workdir), config)


def known_secrets(config: Config) -> list[str]:
    """The values a command line must never show: configured keys and tokens, and every
    ``envs`` value long enough to be one."""
    found = [s for s in secrets.secrets_of(config) if s]
    found += [v for v in config.envs.values() if len(v) >= MIN_SECRET]
    return sorted(set(found), key=len, reverse=True)


def command_line(
    argv: list[str], task: str, system: str, config: Config, executable: str
) -> list[str]:
    """The argv ``build_argv`` made, as the audit keeps it (see the module's docstring)."""
    task_mark = hashed("task", task)
    folded = f"{hashed('instructions', system)} {task_mark}"  # codex's, gemini's [SYSTEM]
    hidden = known_secrets(config)
    out: list[str] = []
    secret_next = False
    last = len(argv) - 1
    for index, arg in enumerate(argv):
        if index == 0:
            out.append(PurePath(executable).name or "cli")
            continue
        if index == last:  # build_argv puts the task last: after --, or --prompt=<task>
            prompt = arg.startswith("--prompt=")
            alone = arg.removeprefix("--prompt=") if prompt else arg
            out.append(("--prompt=" if prompt else "") + (task_mark if alone == task else folded))
            continue
        if secret_next:
            out.append(SECRET)
            secret_next = False
            continue
        out.append(_arg(arg, system, hidden, config))
        if arg.startswith("-") and "=" not in arg and is_secret_name(arg.lstrip("-")):
            secret_next = True
    return out


def _arg(arg: str, system: str, hidden: list[str], config: Config) -> str:
    if system and arg.endswith("=" + system):
        return arg[: len(arg) - len(system)] + hashed("instructions", system)
    if any(secret in arg for secret in hidden):
        flag, equals, _ = arg.partition("=")
        return f"{flag}={SECRET}" if equals and flag.startswith("-") else SECRET
    # A secret given by name without a flag (review R1): `-c x.api_key=sk-…`, `-e
    # OPENAI_API_KEY=…`, `--header "Authorization: Bearer …"` — the shared rule finds it.
    named = secret_assignment(arg)
    if named is not None and named[2] > named[1]:
        return arg[: named[1]] + SECRET + arg[named[2] :]
    flag, equals, value = arg.partition("=")
    if equals and flag.startswith("-"):
        if is_secret_name(flag.lstrip("-")):
            return f"{flag}={SECRET}"
        if PurePath(value).is_absolute():
            return f"{flag}={relative_path(value, config)}"
        return arg
    if PurePath(arg).is_absolute():
        return relative_path(arg, config)
    return arg


def project_of(context: ToolContext | None) -> tuple[str, str]:
    """The chat's project and its folder, as :func:`place` names a working folder."""
    return (context.project, context.folder) if context is not None else ("", "")


@dataclass(frozen=True, slots=True)
class RunRecord:
    """One run's audit rows: started, then ended (actor: the model delegated it)."""

    audit: AuditLog | None
    session_id: int | None
    facts: dict[str, Any]

    async def started(self, version: str) -> None:
        if self.audit is not None:
            await self.audit.record(
                audit_kinds.DELEGATION_STARTED,
                session_id=self.session_id,
                actor="model",
                version=version,
                **self.facts,
            )

    async def ended(self, facts: dict[str, Any], output: Path, config: Config) -> None:
        """``output``: the run's output file, named (data-relative) when it was made."""
        if self.audit is None:
            return
        if await asyncio.to_thread(output.exists):
            facts["output"] = relative_path(str(output), config)
        await self.audit.record(
            audit_kinds.DELEGATION_ENDED,
            session_id=self.session_id,
            actor="model",
            delegation=self.facts["delegation"],
            cli=self.facts["cli"],
            **facts,
        )
