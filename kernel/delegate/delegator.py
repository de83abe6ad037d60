"""The Delegator: runs one coding-CLI task at a time and shows what runs to channels.

``delegate()`` is what the ``delegate_to_cli`` tool calls. It checks the request (known
CLI, not busy, a real working directory, an executable on PATH; each refusal a
:class:`ToolError` naming the fix), builds the command line (:mod:`kernel.delegate.argv`:
the task after ``--``, or gemini's ``--prompt=``; the instructions of
:mod:`kernel.delegate.instructions`), asks the CLI its ``--version`` (once
per executable), runs it through :class:`CLIProcess`, and returns
``{ok, cli, version, cwd, exit_code, reason, output_path, output, signal, kernel_signals,
cause}``: ``ok`` only when the CLI's completion event said success AND it exited 0;
``reason`` says in one line why not, with the real exit (:mod:`.ending`: the process's
own code, or the signal that ended it, and whether Kernel sent it) and the CLI's last
known cause (its last retry or API error) when there was one; ``exit_code`` is None
when a signal killed the process.
When the CLI gave no answer the model gets a summary (what went wrong, the last steps,
stderr's tail), never the raw JSONL stream. Channels read :attr:`running` (the CLI, its
cwd, start time, latest progress step, latest retry/API error, elapsed time) and wait for
changes with :meth:`wait_change`; they never touch the process. Each run that starts is
recorded in the audit trail (``delegation.started`` / ``.ended``, :mod:`.recording`).
A run's record and what it ends with (the result, the reason) are :mod:`.outcome`'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kernel.audit import AuditLog
from kernel.config import Config
from kernel.config.secrets import child_env
from kernel.core.errors import ToolError
from kernel.core.i18n import t
from kernel.core.platform import (
    BatchArgumentError,
    group_spawn_kwargs,
    kill_tree,
    launch_argv,
    which,
)
from kernel.delegate import outcome, permits
from kernel.delegate.adapters import adapter_for
from kernel.delegate.approvals import Approvals, RunGrant
from kernel.delegate.formats import one_line, strip_ansi
from kernel.delegate.instructions import instructions_for
from kernel.delegate.outcome import Delegation, omission
from kernel.delegate.outcome import ended as ended_with
from kernel.delegate.recording import RunRecord, command_line, place, project_of
from kernel.delegate.runner import CLIProcess, RunRequest
from kernel.profiles import Profile
from kernel.store.artifacts import ArtifactStore
from kernel.tools.registry import ToolContext

log = logging.getLogger(__name__)

DEFAULT_CLI = "claude_code"
# The chats whose last run is kept for their progress line, the most recent; an older
# chat shows none (only the chat a run is shown in reads it).
LATEST_KEPT = 16


class Delegator:
    def __init__(
        self,
        config: Config,
        *,
        approvals: Approvals | None = None,
        kill_grace: float = 0.8,
        done_grace: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self.approvals = approvals  # the owner's answers to a CLI's permission prompts
        self.audit: AuditLog | None = None  # where runs are recorded (set by the Kernel)
        self.kill_grace = kill_grace  # SPEC §4: /cancel stops a CLI child within a second
        self.done_grace = done_grace
        self.clock = clock
        self.running: Delegation | None = None
        self._latest: OrderedDict[str, Delegation] = OrderedDict()
        self._process: CLIProcess | None = None
        self._stopping = False
        self._version = 0
        self._changed = asyncio.Event()
        self._versions: dict[str, str] = {}
        self.artifacts: ArtifactStore | None = None  # where output files are recorded

    # ----- what channels read ------------------------------------------------------------

    def current(self, conversation: str) -> Delegation | None:
        """The running delegation if it belongs to ``conversation``."""
        running = self.running
        return running if running and running.conversation == conversation else None

    def latest(self, conversation: str) -> Delegation | None:
        """The last delegation (running or finished) that ``conversation`` started."""
        return self._latest.get(conversation)

    @property
    def version(self) -> int:
        return self._version

    async def wait_change(self, seen: int, timeout: float) -> int:  # noqa: ASYNC109
        """Wait until something changed after version ``seen`` (or ``timeout`` passed)."""
        if self._version != seen:
            return self._version
        # asyncio.wait, not wait_for: in 3.11 wait_for can swallow a cancellation that
        # arrives as the event fires, and a channel's ticker must stop when cancelled.
        waiter = asyncio.ensure_future(self._changed.wait())
        try:
            await asyncio.wait({waiter}, timeout=timeout)
        finally:
            waiter.cancel()
        return self._version

    def _bump(self) -> None:
        self._version += 1
        event, self._changed = self._changed, asyncio.Event()
        event.set()

    def installed(self) -> list[str]:
        """The configured CLIs whose command is found (on the PATH a delegated CLI gets,
        or as a path), in configuration order: what ``delegate_to_cli`` offers."""
        envs = self.config.envs
        return [
            name
            for name, cli in self.config.cli.items()
            if which(cli.command, path=child_env({**envs, **cli.env}).get("PATH"))
        ]

    def default_cli(self) -> str:
        """The CLI a ``delegate_to_cli`` call without ``cli`` runs: Claude Code when it
        is found, else the first one found."""
        names = self.installed()
        return DEFAULT_CLI if DEFAULT_CLI in names or not names else names[0]

    # ----- running ---------------------------------------------------------------------

    async def delegate(
        self,
        task: str,
        cwd: str | None = None,
        cli: str | None = None,
        *,
        conversation: str = "",
        folder: str = "",
        profiles: Sequence[Profile] = (),
        context: ToolContext | None = None,
    ) -> dict[str, Any]:
        """``folder``: the chat's project folder; without ``cwd`` the CLI runs there, and
        a relative ``cwd`` is taken from it (default: ``general.default_workspace``).
        ``profiles``: the chat's persona and project, whose bodies follow the configured
        instructions (:mod:`kernel.delegate.instructions`). ``context``: the calling
        turn's, through which the CLI's permission prompts reach the owner."""
        name = cli or DEFAULT_CLI
        if name not in self.config.cli:
            raise ToolError(t("delegate.unknown_cli", cli=name, names=", ".join(self.config.cli)))
        if not task.strip():
            raise ToolError(t("delegate.empty_task"))
        if self._stopping:
            raise ToolError(t("delegate.note_stopped", cli=name))
        if self.running is not None:  # checked and claimed with no await in between
            busy = self.running
            raise ToolError(t("delegate.busy", cli=busy.cli, elapsed=int(busy.elapsed), asked=name))
        cfg = self.config.cli[name]
        base = self._base(folder)
        claim = Delegation(
            cli=name,
            cwd=str(base),
            conversation=conversation,
            started=self.clock(),
            started_at=datetime.now(UTC),
            clock=self.clock,
            timeout=cfg.timeout,
        )
        self.running = claim
        # The chat's latest run from the claim on: a run cancelled while its --version
        # is asked is shown as itself, never as the run before it.
        before = self._latest.pop(conversation, None)
        self._latest[conversation] = claim
        while len(self._latest) > LATEST_KEPT:
            self._latest.popitem(last=False)
        self._bump()
        try:
            return await self._run(claim, task, cwd, base, profiles, context)
        except asyncio.CancelledError:
            claim.outcome = claim.outcome or "cancelled"
            raise
        except ToolError:
            if not claim.output_path:  # refused before it ran: no run of the chat's
                self._forget(conversation, claim, before)
            raise
        finally:
            self.running = None
            self._process = None
            if claim.finished is None:
                claim.finished = self.clock()
            self._bump()

    def _forget(self, conversation: str, claim: Delegation, before: Delegation | None) -> None:
        """The chat's latest run is ``before`` again, unless another took ``claim``'s place."""
        if self._latest.get(conversation) is not claim:
            return
        if before is None:
            del self._latest[conversation]
        else:
            self._latest[conversation] = before

    async def _run(
        self,
        claim: Delegation,
        task: str,
        cwd: str | None,
        base: Path,
        profiles: Sequence[Profile],
        context: ToolContext | None,
    ) -> dict[str, Any]:
        cfg = self.config.cli[claim.cli]
        adapter = adapter_for(claim.cli)
        workdir = await asyncio.to_thread(self._workdir, cwd, base)
        claim.cwd = str(workdir)
        env = child_env({**self.config.envs, **cfg.env})  # [cli.<name>] env: this CLI's own
        executable = which(cfg.command, path=env.get("PATH"))
        if executable is None:
            raise ToolError(t("delegate.not_found", cli=claim.cli, command=cfg.command))
        system = await instructions_for(claim.cli, cfg, self.config.base_dir, profiles)
        folder = self.config.data_dir / "cli_outputs"
        stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:6]
        claim.id = stamp
        output_path = folder / f"{stamp}-{claim.cli}.txt"
        extra, last_message = adapter.run_flags(folder, stamp, workdir)
        grant: RunGrant | None = None
        if cfg.approvals == "telegram":
            grant, flags = await self._grant(claim, stamp, context)
            extra = [*extra, *flags]
        try:
            argv = adapter.argv(executable, cfg.args, task, extra, system)
            facts: dict[str, Any] = {
                "delegation": stamp,
                "cli": claim.cli,
                "argv": command_line(argv, task, system, self.config, executable),
                "cwd": place(workdir, self.config, *project_of(context)),
            }
            try:
                argv = await asyncio.to_thread(launch_argv, argv)
            except BatchArgumentError:
                raise ToolError(
                    t("delegate.batch_args", cli=claim.cli, command=executable)
                ) from None
            session = context.session_id if context is not None else None
            return await self._execute(
                claim,
                argv,
                workdir,
                env,
                executable,
                output_path,
                last_message,
                grant,
                RunRecord(self.audit, session, facts),
            )
        finally:
            if grant is not None:
                assert self.approvals is not None
                self.approvals.close(grant)
                root = self.config.data_dir / "run"
                await asyncio.shield(asyncio.to_thread(permits.remove, root, stamp))
            await asyncio.shield(self._keep(output_path, context))  # issue 23: an artifact

    async def _grant(
        self, claim: Delegation, stamp: str, context: ToolContext | None
    ) -> tuple[RunGrant, list[str]]:
        """A run that asks the owner: its grant, and the flags pointing Claude Code at
        Kernel's MCP endpoint with the run's token (in a file only the owner can read,
        removed when the run ends)."""
        cfg = self.config.cli[claim.cli]
        url = self.approvals.endpoint_url if self.approvals is not None else None
        if self.approvals is None or url is None:
            raise ToolError(t("perm.no_endpoint", cli=claim.cli))
        if context is None or context.ask is None:  # a sub-agent's or a job's turn
            raise ToolError(t("perm.no_one_to_ask", cli=claim.cli))
        grant = self.approvals.open(stamp, claim.cli, context, timeout=cfg.approval_timeout)
        try:
            path = await asyncio.to_thread(
                permits.write,
                self.config.data_dir / "run",
                stamp,
                url,
                grant.token,
                cfg.approval_timeout,
            )
        except BaseException:
            self.approvals.close(grant)
            raise
        return grant, adapter_for(claim.cli).permission_flags(path)

    async def _execute(
        self,
        claim: Delegation,
        argv: list[str],
        workdir: Path,
        env: dict[str, str],
        executable: str,
        output_path: Path,
        last_message: Path | None,
        grant: RunGrant | None,
        record: RunRecord,
    ) -> dict[str, Any]:
        cfg = self.config.cli[claim.cli]
        probe = adapter_for(claim.cli).version_argv(executable)
        claim.version = await self._version_of(probe, env, cfg.version_timeout)
        await record.started(claim.version)
        ended: dict[str, Any] = {"reason": "cancelled", "ok": False}
        try:
            result = await self._supervise(
                claim, argv, workdir, env, output_path, last_message, grant, ended
            )
        finally:
            ended["seconds"] = round(claim.elapsed, 3)
            await asyncio.shield(record.ended(ended, output_path, self.config))
        return result

    async def _supervise(
        self,
        claim: Delegation,
        argv: list[str],
        workdir: Path,
        env: dict[str, str],
        output_path: Path,
        last_message: Path | None,
        grant: RunGrant | None,
        ended: dict[str, Any],
    ) -> dict[str, Any]:
        """Run the CLI to its end; ``ended`` gets what the audit records of it."""
        cfg = self.config.cli[claim.cli]
        formatter = adapter_for(claim.cli).formatter(cfg.jsonl)
        request = RunRequest(
            argv=argv,
            cwd=workdir,
            env=env,
            timeout=cfg.timeout,
            idle_timeout=cfg.idle_timeout,
            formatter=formatter,
            output_path=output_path,
            no_progress_timeout=cfg.no_progress_timeout,
        )

        def on_step(step: str) -> None:
            claim.step = step
            claim.steps += 1
            claim.recent.append(step)
            claim.trouble = None  # progress again: the retries are over
            self._bump()

        def on_trouble() -> None:
            claim.trouble = formatter.trouble
            claim.cause = formatter.cause
            self._bump()

        process = CLIProcess(
            request,
            on_step=on_step,
            on_start=lambda pid: setattr(claim, "pid", pid),
            on_trouble=on_trouble,
            kill_grace=self.kill_grace,
            done_grace=self.done_grace,
            clock=self.clock,
        )
        self._process = process
        if grant is not None:
            grant.hold = process.hold
        if self._stopping:  # stop() came while the working directory was checked
            process.kill()
        claim.output_path = str(output_path)
        log.info(
            "delegation started: cli=%s version=%s jsonl=%s",
            claim.cli,
            claim.version or "unknown",
            cfg.jsonl,
        )
        try:
            report = await process.run()
        except asyncio.CancelledError:
            claim.outcome = "cancelled"
            claim.finished = self.clock()
            claim.cause = formatter.cause
            ended_with(claim, process.exit_status(), ended)
            log.info("delegation cancelled: cli=%s after %.1fs", claim.cli, claim.elapsed)
            raise
        except OSError as exc:  # found on PATH but not runnable (permissions, bad binary)
            ended["reason"] = "start_failed"
            raise ToolError(
                t("delegate.start_failed", cli=claim.cli, command=cfg.command, detail=exc.strerror)
            ) from None
        claim.finished = self.clock()
        claim.cause = formatter.cause
        ended["reason"] = report.reason
        ended_with(claim, report.status, ended)
        answer = formatter.answer() if formatter.jsonl else report.stdout.text(omission)
        answer = strip_ansi(answer)
        if last_message is not None:
            answer = await asyncio.to_thread(_read_text, last_message) or answer
        claim.trouble = formatter.trouble
        result = outcome.result(
            self.config.cli, claim, report, formatter.failure, answer, output_path, formatter.jsonl
        )
        if grant is not None:
            result["approvals"] = grant.summary()
        ended.update(ok=result["ok"], outcome=claim.outcome)
        return result

    async def _version_of(self, probe: list[str], env: dict[str, str], timeout: float) -> str:  # noqa: ASYNC109
        """The CLI's version line (its adapter's probe, ``--version``), asked once per
        executable ("" if it will not say)."""
        executable = probe[0]
        if executable not in self._versions:
            self._versions[executable] = await cli_version(executable, env, timeout, probe)
        return self._versions[executable]

    async def _keep(self, output_path: Path, context: ToolContext | None) -> None:
        """Record the run's output file as an artifact of the calling turn's session
        (none when the run never wrote one)."""
        if self.artifacts is None or not await asyncio.to_thread(output_path.is_file):
            return
        session = context.session_id if context is not None else None
        await self.artifacts.save(
            self.config.data_dir, output_path, session_id=session, kind="cli_output", actor="model"
        )

    def _base(self, folder: str) -> Path:
        if not folder.strip():
            return self.config.general.default_workspace
        path = Path(folder.strip()).expanduser()
        return path if path.is_absolute() else self.config.base_dir / path

    def _workdir(self, cwd: str | None, base: Path) -> Path:
        path = base if not cwd or not cwd.strip() else Path(cwd.strip()).expanduser()
        if not path.is_absolute():
            path = base / path
        path = path.resolve()
        if not path.is_dir():
            raise ToolError(t("delegate.bad_cwd", cwd=path))
        return path

    async def stop(self) -> None:
        """Kernel is stopping: no new delegation starts, a running CLI's process group
        is killed at once (also one still being set up)."""
        self._stopping = True
        process = self._process
        if process is not None:
            log.info("stopping the running delegation")
            process.kill()


async def cli_version(
    executable: str,
    env: dict[str, str],
    timeout: float,  # noqa: ASYNC109
    probe: list[str] | None = None,
) -> str:
    """First line ``<executable> --version`` (or ``probe``) prints, within ``timeout``;
    "" on failure."""
    try:
        argv = await asyncio.to_thread(launch_argv, probe or [executable, "--version"])
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            env=env,
            **group_spawn_kwargs(),
        )
    except OSError:
        return ""
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        return ""
    finally:
        if proc.returncode is None:  # timed out or cancelled: the group goes, reaped
            kill_tree(proc.pid, force=True)
            with contextlib.suppress(ProcessLookupError):
                await asyncio.shield(proc.wait())
    text = out.decode("utf-8", "replace").strip()
    return one_line(text.splitlines()[0], limit=200) if text else ""


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return ""
