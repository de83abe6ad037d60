"""``kernel check`` for the programs Kernel runs: each configured coding CLI (found,
answers ``--version``, accepts its configured arguments) and ffmpeg (with libopus)."""

from __future__ import annotations

import subprocess

from kernel.check.line import CheckLine, Status
from kernel.config import Config
from kernel.config.secrets import child_env
from kernel.core.i18n import t
from kernel.core.platform import BatchArgumentError, group_spawn_kwargs, launch_argv, which
from kernel.delegate.argv import GEMINI_PROMPT
from kernel.delegate.formats import strip_ansi


def _clis(config: Config) -> list[CheckLine]:
    """Each configured CLI (concurrently): found on PATH, answers ``--version``, and
    accepts the configured arguments: ``<command> <args> --help`` makes each CLI's own
    parser check them without calling its API (codex 0.169.0 exits 2 on ``--full-auto``
    this way; claude and gemini reject bad choices; gemini's headless trust flag is
    checked by name, since it is not an argument error)."""
    from concurrent.futures import ThreadPoolExecutor

    env = child_env(config.envs)
    names = list(config.cli)
    if not names:
        return []
    with ThreadPoolExecutor(max_workers=len(names)) as pool:
        return list(pool.map(lambda name: _cli(config, name, env), names))


def _cli(config: Config, name: str, env: dict[str, str]) -> CheckLine:
    from kernel.delegate.formats import display_name

    cli = config.cli[name]
    env = {**env, **cli.env}  # [cli.<name>] env: this CLI's own
    part = f"cli {name}"
    found = which(cli.command, path=env.get("PATH"))
    if not found:
        return CheckLine(part, "warn", t("delegate.not_found", cli=name, command=cli.command))
    args = cli.args
    if name == "gemini" and args and args[-1] in GEMINI_PROMPT:
        args = args[:-1]  # a run folds it into --prompt=<task>
    try:  # Windows: a batch file that is not an npm shim gets these args through cmd.exe
        launch_argv([found, *args, "--help"])
    except BatchArgumentError:
        words = t("check.cli_batch_args", cli=display_name(name), command=found, name=name)
        return CheckLine(part, "fail", words)
    seconds = f"{cli.version_timeout:g}"
    silent = t("check.timeout", seconds=seconds)
    code, out, err = _run_cli([found, "--version"], env, cli.version_timeout)
    version = _first_line(out) or _first_line(err)
    if code != 0 or not version:
        detail = version or (silent if code is None else f"exit {code}")
        words = t(
            "check.cli_no_version",
            path=found,
            seconds=seconds,
            detail=detail,
            cli=display_name(name),
        )
        return CheckLine(part, "warn", words)
    code, out, err = _run_cli([found, *args, "--help"], env, cli.version_timeout)
    if code != 0:
        error = _error_line(err) or _error_line(out)
        error = error or (silent if code is None else f"exit {code}")
        command = " ".join([cli.command, *cli.args[:1]]) if name == "codex" else cli.command
        words = t(
            "check.cli_rejected", cli=display_name(name), error=error, name=name, command=command
        )
        return CheckLine(part, "fail", words)
    trusted = "--skip-trust" in cli.args or env.get("GEMINI_CLI_TRUST_WORKSPACE") == "true"
    if name == "gemini" and not trusted:
        return CheckLine(part, "warn", t("check.cli_untrusted", cli=display_name(name), name=name))
    return CheckLine(part, "ok", t("check.cli_ok", path=found, version=version))


def _run_cli(argv: list[str], env: dict[str, str], seconds: float) -> tuple[int | None, str, str]:
    """Exit code (None: no answer in time), stdout and stderr of a short CLI run."""
    try:
        done = subprocess.run(
            launch_argv(argv),
            capture_output=True,
            text=True,
            errors="replace",
            timeout=seconds,
            env=env,
            stdin=subprocess.DEVNULL,
            **group_spawn_kwargs(),
        )
    except subprocess.TimeoutExpired:
        return None, "", ""
    except OSError as exc:
        return -1, "", exc.strerror or type(exc).__name__
    return done.returncode, done.stdout, done.stderr


_ERROR_START = ("error", "invalid", "unknown", "unexpected", "missing", "not enough")


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")[:200]


def _error_line(text: str) -> str:
    """The CLI's own error line (and its detail line when it ends with a colon)."""
    lines = [strip_ansi(line).strip() for line in text.splitlines() if line.strip()]
    for index, line in enumerate(lines):
        if line.lower().startswith(_ERROR_START):
            if line.endswith(":") and index + 1 < len(lines):
                line = f"{line} {lines[index + 1]}"
            return line[:300]
    return ""


def _ffmpeg(config: Config) -> CheckLine:
    from kernel.voice.ffmpeg import find_ffmpeg

    status: Status = "warn" if config.tts else "ok"  # only replies to voice need it
    found = find_ffmpeg(config.ffmpeg)  # [tts] ffmpeg even while spoken replies are off
    if not found:
        if config.ffmpeg:
            return CheckLine("ffmpeg", status, t("check.ffmpeg_bad_path", path=config.ffmpeg))
        return CheckLine("ffmpeg", status, t("check.ffmpeg_missing"))
    try:
        encoders = subprocess.run(
            [found, "-hide_banner", "-encoders"],
            capture_output=True,
            text=True,
            timeout=20,
            env=child_env({}),
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        encoders = ""
    if "libopus" not in encoders:
        return CheckLine("ffmpeg", status, t("check.ffmpeg_no_opus", path=found))
    return CheckLine("ffmpeg", "ok", found)
