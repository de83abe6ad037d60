"""The Windows branches of kernel.core.platform, run on Linux with fakes: PATHEXT lookup,
the taskkill command line, the stop handlers Ctrl+C/Ctrl+Break call, the replace retry."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from kernel.check import programs
from kernel.config import load_config
from kernel.core import fileio, platform
from kernel.delegate import runner
from kernel.delegate.formats import formatter_for
from kernel.delegate.runner import CLIProcess, RunRequest
from tests.conftest import write_config
from tests.waiting import wait_until


def touch(path: Path) -> Path:
    path.write_text("@echo off\n")
    return path


def test_pathext_finds_a_cmd_shim(tmp_path: Path) -> None:
    bin_ = tmp_path / "npm"
    bin_.mkdir()
    shim = touch(bin_ / "claude.CMD")
    found = platform.which("claude", str(bin_), windows=True, pathext=".COM;.EXE;.BAT;.CMD")
    assert found == str(shim)


def test_pathext_order_and_path_order_decide(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    touch(first / "codex.CMD")
    exe = touch(first / "codex.EXE")
    touch(second / "codex.COM")
    path = f'"{first}";;{second}'  # quoted entries and empty ones, as Windows PATHs have
    assert platform.which("codex", path, windows=True, pathext=".EXE;.CMD") == str(exe)
    assert platform.which("codex", path, windows=True, pathext=".CMD") == str(first / "codex.CMD")
    assert platform.which("codex", path, windows=True, pathext=".COM") == str(second / "codex.COM")


def test_a_name_with_its_extension_and_a_full_path(tmp_path: Path) -> None:
    shim = touch(tmp_path / "gemini.CMD")
    pathext = ".EXE;.CMD"
    assert platform.which("gemini.CMD", str(tmp_path), windows=True, pathext=pathext) == str(shim)
    full = str(tmp_path / "gemini")
    assert platform.which(full, "", windows=True, pathext=pathext) == str(shim)
    assert platform.which("gemini", "", windows=True, pathext=pathext) is None


def test_the_working_folder_is_not_searched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    touch(tmp_path / "claude.EXE")  # planted in the folder a CLI works in
    elsewhere = tmp_path / "bin"
    elsewhere.mkdir()
    assert platform.which("claude", str(elsewhere), windows=True, pathext=".EXE") is None


def test_pathext_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shim = touch(tmp_path / "claude.CMD")
    monkeypatch.setenv("PATHEXT", ".CMD")
    assert platform.which("claude", str(tmp_path), windows=True) == str(shim)
    monkeypatch.delenv("PATHEXT")  # the default list has .CMD too
    assert platform.which("claude", str(tmp_path), windows=True) == str(shim)


def test_taskkill_ends_the_whole_tree(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SystemRoot", "D:\\Win")
    ran: list[list[str]] = []
    platform.kill_tree(4242, force=True, windows=True, run=ran.append)
    platform.kill_tree(4242, force=False, windows=True, run=ran.append)
    platform.kill_tree(4242, force=True, leader_gone=True, windows=True, run=ran.append)
    taskkill = "D:\\Win\\System32\\taskkill.exe"
    assert ran == [
        [taskkill, "/T", "/F", "/PID", "4242"],
        [taskkill, "/T", "/PID", "4242"],
    ]


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({"SystemRoot": "C:\\WINDOWS"}, "C:\\WINDOWS\\System32\\taskkill.exe"),
        ({"SYSTEMROOT": "E:\\Windows"}, "E:\\Windows\\System32\\taskkill.exe"),
        ({}, "C:\\Windows\\System32\\taskkill.exe"),
        ({"SystemRoot": ""}, "C:\\Windows\\System32\\taskkill.exe"),
        ({"SystemRoot": "."}, "C:\\Windows\\System32\\taskkill.exe"),  # the current folder
        ({"SystemRoot": "Windows"}, "C:\\Windows\\System32\\taskkill.exe"),
        ({"SystemRoot": "C:"}, "C:\\Windows\\System32\\taskkill.exe"),  # C:'s current folder
    ],
)
def test_taskkill_is_named_by_its_full_path_never_searched_for(
    environ: dict[str, str], expected: str
) -> None:
    """A bare ``taskkill`` is looked for in the current folder first (CreateProcess):
    a planted taskkill.exe there would run with the PID of every CLI ended."""
    argv = platform.taskkill_argv(7, force=True, environ=environ)
    assert argv == [expected, "/T", "/F", "/PID", "7"]


async def test_stopping_a_cli_whose_leader_was_reaped_runs_no_taskkill(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kernel stopping after a CLI exited: its PID may be another process's by now, and
    ``taskkill /T /F`` would end that one and its tree."""
    ran: list[list[str]] = []

    def windows_kill(pid: int, *, force: bool, leader_gone: bool = False) -> None:
        platform.kill_tree(pid, force=force, leader_gone=leader_gone, windows=True, run=ran.append)

    def request(code: str) -> RunRequest:
        return RunRequest(
            argv=[sys.executable, "-c", code],
            cwd=tmp_path,
            env=dict(os.environ),
            timeout=60.0,
            idle_timeout=60.0,
            formatter=formatter_for("claude_code", False),
            output_path=tmp_path / "out.txt",
        )

    started = asyncio.Event()
    running = CLIProcess(
        request("import time; time.sleep(600)"), on_start=lambda pid: started.set()
    )
    task = asyncio.create_task(running.run())
    await asyncio.wait_for(started.wait(), 30)
    assert running.pid is not None
    monkeypatch.setattr(runner, "kill_tree", windows_kill)
    running.kill()  # a living leader: its tree is ended
    assert ran == [platform.taskkill_argv(running.pid, force=True)]
    monkeypatch.undo()
    platform.kill_tree(running.pid, force=True)  # for real, here
    await task

    ran.clear()
    exited = CLIProcess(request("print('done')"))
    report = await exited.run()
    assert report.exit_code == 0
    monkeypatch.setattr(runner, "kill_tree", windows_kill)
    exited.kill()  # reaped: nothing is run
    assert ran == []


def test_a_new_process_group_on_windows_a_new_session_on_posix() -> None:
    assert platform.group_spawn_kwargs(windows=True) == {"creationflags": 0x200}
    assert getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0x200) == 0x200
    assert platform.group_spawn_kwargs(windows=False) == {"start_new_session": True}


@pytest.mark.posix
def test_kill_tree_on_posix_ends_a_grandchild_too() -> None:
    """The grandchild holds the pipe open: end of file means the whole group is gone."""
    code = (
        "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', "
        "'import time; time.sleep(600)']); print('up', flush=True); time.sleep(600)"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, **platform.group_spawn_kwargs()
    )
    assert proc.stdout is not None
    rest: list[bytes] = []
    try:
        assert proc.stdout.readline() == b"up\n"
        platform.kill_tree(proc.pid, force=True)
        assert proc.wait(timeout=30) == -signal.SIGKILL
        reader = threading.Thread(target=lambda: rest.append(proc.stdout.read()))  # type: ignore[union-attr]
        reader.start()
        reader.join(timeout=30)
        assert rest == [b""], "a grandchild still holds the pipe"
        platform.kill_tree(proc.pid, force=True)  # gone already: no error
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stdout.close()


async def test_ctrl_c_and_ctrl_break_stop_through_the_loop() -> None:
    """What the Windows handlers do when the console delivers Ctrl+C or Ctrl+Break: the
    stop callback runs on the loop, whatever thread the handler ran in."""
    installed: dict[int, Any] = {}

    def install(sig: int, handler: Any) -> Any:
        previous = installed.get(sig, "default")
        installed[sig] = handler
        return previous

    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    seen: list[int] = []

    def callback() -> None:
        seen.append(threading.get_ident())
        stop.set()

    restore = platform.install_stop(loop, callback, windows=True, install=install)
    ctrl_c = installed[signal.SIGINT]
    assert set(installed) == {
        signal.SIGINT,
        *([signal.SIGBREAK] if hasattr(signal, "SIGBREAK") else []),
    }
    thread = threading.Thread(target=ctrl_c, args=(signal.SIGINT, None))
    thread.start()
    thread.join()
    await asyncio.wait_for(stop.wait(), 30)
    assert seen == [threading.get_ident()]  # on the loop's thread
    restore()
    assert installed[signal.SIGINT] == "default"


async def test_the_service_stops_on_the_windows_handler(tmp_path: Path) -> None:
    """kernel.__main__.serve's stop sequence, triggered by the callback the Windows
    handler calls (no signal sent)."""
    from kernel.__main__ import serve
    from kernel.config import load_config
    from tests.conftest import write_config

    path = write_config(tmp_path, "http://127.0.0.1:9/v1", "openai_compat")
    config = load_config(path, env={}, require_telegram=False)
    handlers: dict[int, Any] = {}

    def install(sig: int, handler: Any) -> Any:
        handlers[sig] = handler
        return signal.default_int_handler

    real = platform.install_stop

    def windows_stop(loop: asyncio.AbstractEventLoop, callback: Any, **kw: Any) -> Any:
        return real(loop, callback, windows=True, install=install)

    import kernel.__main__ as entry

    original, entry.install_stop = entry.install_stop, windows_stop
    try:
        task = asyncio.create_task(serve(config))
        await wait_until(lambda: signal.SIGINT in handlers or task.done())
        assert not task.done()
        await asyncio.sleep(0.2)  # let it get some way into the start-up
        handlers[signal.SIGINT](signal.SIGINT, None)
        await asyncio.wait_for(task, 60)
    finally:
        entry.install_stop = original


def test_replace_waits_out_a_reader_on_windows() -> None:
    calls: list[tuple[str, str]] = []
    pauses: list[float] = []

    def move(src: str, dst: str) -> None:
        calls.append((src, dst))
        if len(calls) < 3:
            raise PermissionError(13, "The process cannot access the file")

    platform.replace("a", "b", windows=True, move=move, pause=pauses.append)
    assert len(calls) == 3 and len(pauses) == 2

    def locked(src: str, dst: str) -> None:
        raise PermissionError(13, "The process cannot access the file")

    with pytest.raises(PermissionError):
        platform.replace("a", "b", windows=True, tries=4, move=locked, pause=pauses.append)


def test_replace_on_posix_does_not_retry() -> None:
    def locked(src: str, dst: str) -> None:
        raise PermissionError(13, "denied")

    with pytest.raises(PermissionError):
        platform.replace("a", "b", windows=False, move=locked, pause=pytest.fail)


def test_atomic_writes_without_fchmod(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(os, "fchmod", raising=False)  # absent on Windows before 3.13
    target = tmp_path / "state.json"
    fileio.write_atomic(target, b"{}")
    fileio.write_atomic(target, b"[]")
    assert target.read_bytes() == b"[]"
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]


def test_flags_missing_on_the_platform_are_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(os, "O_NOFOLLOW", raising=False)
    assert platform.flag("O_NOFOLLOW") == 0
    assert platform.flag("O_WRONLY") == os.O_WRONLY


# npm's cmd-shim, as `npm install -g @openai/codex` writes codex.cmd (npm 10).
NPM_SHIM = r"""@ECHO off
GOTO start
:find_dp0
SET dp0=%~dp0
EXIT /b
:start
SETLOCAL
CALL :find_dp0

IF EXIST "%dp0%\node.exe" (
  SET "_prog=%dp0%\node.exe"
) ELSE (
  SET "_prog=node"
  SET PATHEXT=%PATHEXT:;.JS;=;%
)

endLocal & goto #_undefined_# 2>NUL || title %COMSPEC% & "%_prog%"  \
"""
NPM_SHIM = NPM_SHIM.replace("\\\n", r'"%dp0%\node_modules\@openai\codex\bin\codex.js" %*')

TASK = 'fix "a & b" | echo %PATH%\nthen ^ more'


def npm_layout(tmp_path: Path, *, node_beside: bool) -> Path:
    shim = tmp_path / "codex.cmd"
    shim.write_text(NPM_SHIM)
    script = tmp_path / "node_modules" / "@openai" / "codex" / "bin" / "codex.js"
    script.parent.mkdir(parents=True)
    script.write_text("// the CLI\n")
    if node_beside:
        touch(tmp_path / "node.exe")
    return shim


def test_an_npm_shim_is_started_as_node_and_its_script(tmp_path: Path) -> None:
    shim = npm_layout(tmp_path, node_beside=False)
    argv = platform.launch_argv(
        [str(shim), "exec", "--", TASK], windows=True, node=lambda: "C:/node/node.exe"
    )
    script = tmp_path / "node_modules" / "@openai" / "codex" / "bin" / "codex.js"
    assert argv == ["C:/node/node.exe", str(script), "exec", "--", TASK]  # the task intact


def test_the_node_beside_the_shim_comes_first(tmp_path: Path) -> None:
    shim = npm_layout(tmp_path, node_beside=True)
    argv = platform.launch_argv([str(shim), "--version"], windows=True, node=lambda: None)
    assert argv[0] == str(tmp_path / "node.exe")


def test_an_old_npm_shim_with_tilde_dp0(tmp_path: Path) -> None:
    shim = tmp_path / "claude.cmd"
    shim.write_text(
        '@IF EXIST "%~dp0\\node.exe" (\n  "%~dp0\\node.exe"  "%~dp0\\node_modules\\'
        '@anthropic-ai\\claude-code\\cli.js" %*\n)\n'
    )
    script = tmp_path / "node_modules" / "@anthropic-ai" / "claude-code" / "cli.js"
    script.parent.mkdir(parents=True)
    script.write_text("")
    argv = platform.launch_argv([str(shim), "-p"], windows=True, node=lambda: "node.exe")
    assert argv == ["node.exe", str(script), "-p"]


def test_another_batch_file_runs_only_with_arguments_cmd_cannot_misread(tmp_path: Path) -> None:
    bat = tmp_path / "tool.bat"
    bat.write_text("@echo off\nmytool.exe %*\n")
    plain = [str(bat), "--version"]
    assert platform.launch_argv(plain, windows=True, node=lambda: None) == plain
    for task in (TASK, "a & calc", "50%", "line\nbreak", 'say "hi"'):
        with pytest.raises(platform.BatchArgumentError):
            platform.launch_argv([str(bat), "--", task], windows=True, node=lambda: None)


def test_an_exe_and_posix_are_left_alone(tmp_path: Path) -> None:
    argv = [str(tmp_path / "claude.exe"), "--", TASK]
    assert platform.launch_argv(argv, windows=True) == argv
    shim = npm_layout(tmp_path, node_beside=True)
    assert platform.launch_argv([str(shim), TASK], windows=False) == [str(shim), TASK]


@pytest.mark.posix  # the .bat is a #! script here, so that the unfixed check reaches its run
def test_check_names_batch_syntax_in_a_clis_args_as_a_problem(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``kernel check`` with a (non-npm) .bat CLI whose configured args hold % or ":
    a failed check line naming the fix, never an uncaught BatchArgumentError."""
    tool = tmp_path / "bin" / "tool.bat"
    tool.parent.mkdir()
    tool.write_text("#!/bin/sh\necho codex-cli 1.0\n")
    tool.chmod(0o755)
    path = write_config(tmp_path, "http://127.0.0.1:9", "claude", language="en")
    args = '["exec", "--model", "100%"]'
    path.write_text(path.read_text() + f'\n[cli.codex]\ncommand = "{tool}"\nargs = {args}\n')
    config = load_config(path, env={}, require_telegram=False)
    monkeypatch.setattr(platform, "WINDOWS", True)
    monkeypatch.setattr(programs, "group_spawn_kwargs", lambda: {})  # Linux cannot take the flags
    line = programs._cli(config, "codex", {"PATH": str(tool.parent)})
    assert line.status == "fail"
    assert "cli.codex.args" in line.detail and str(tool) in line.detail
