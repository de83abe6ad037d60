"""Command line: ``kernel`` runs the service; ``kernel chat`` talks to it in a terminal;
``kernel chats|models|env|cron|channels …`` manage the running service through its sidecar;
``kernel audit list|verify`` reads (never writes) the audit trail in kernel.db;
``kernel export`` writes the owner's data in open formats, ``kernel import`` reads its
JSON Lines back;
``kernel backup`` writes a backup archive (safe while Kernel runs), ``kernel restore``
puts one back (kernel/backup/);
``kernel console`` prints a one-time sign-in link to the web console (and opens it on a
desktop);
``kernel tui`` is the full-screen terminal client (the ``tui`` extra)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import html
import logging
import os
import sys
import tempfile
import urllib.parse
import webbrowser
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from kernel import __version__
from kernel.config import Config, language_of, load_config
from kernel.core.errors import ConfigError, StartupError
from kernel.core.fileio import create_whole
from kernel.core.i18n import set_language, t
from kernel.core.optional import leave_out
from kernel.core.platform import install_stop, run_service

log = logging.getLogger("kernel")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kernel", description="Kernel personal AI assistant")
    parser.add_argument("--version", action="version", version=f"kernel {__version__}")
    sub = parser.add_subparsers(dest="command")
    sub.add_parser("run", help="run the assistant service (the default)")
    chat = sub.add_parser(
        "chat",
        help="talk to the assistant in this terminal (through the running Kernel if any)",
    )
    chat.add_argument("--local", action="store_true", help="always run an agent in-process")
    tui = sub.add_parser(
        "tui", help="the full-screen terminal client (through the running Kernel if any)"
    )
    where = tui.add_mutually_exclusive_group()
    where.add_argument("--local", action="store_true", help="always run Kernel in-process")
    where.add_argument("--url", help="the running Kernel's sidecar address (no fallback)")
    sub.add_parser(
        "check", help="validate config.toml and reach every configured part (one line each)"
    )
    sub.add_parser(
        "console", help="print a one-time sign-in link to the web console (opened on a desktop)"
    )
    from kernel.backup import command as backup
    from kernel.client import audit, data
    from kernel.client.commands import register

    register(sub)
    audit.register(sub)
    data.register(sub)
    backup.register(sub)
    return parser


def _remote_chat() -> int | None:
    """``kernel chat`` through the running Kernel's sidecar, when one answers."""
    from kernel.client.chat import run_remote_chat
    from kernel.client.http import sidecar_from

    try:
        sidecar = sidecar_from()
    except ConfigError:
        return None  # the in-process path reports the config problem
    if sidecar is None or not sidecar.probe():
        return None
    return run_remote_chat(sidecar, sys.stdin, sys.stdout, sys.stderr)


def _remote_tui(url: str | None) -> int | None:
    """``kernel tui`` through the running Kernel's sidecar, when one answers; with
    ``--url``, that address or an error (exit 3), never the in-process fallback."""
    from kernel.client.http import sidecar_from
    from kernel.client.verbs import EXIT_UNREACHABLE

    env = dict(os.environ) | ({"KERNEL_GATEWAY_URL": url} if url else {})
    try:
        sidecar = sidecar_from(env)
    except ConfigError as exc:
        if url is None:
            return None  # the in-process path reports the config problem
        print(f"kernel: {exc}", file=sys.stderr)
        return 2
    if sidecar is None or not sidecar.probe():
        if url is None:
            return None
        print(f"kernel: {t('tui.no_sidecar', url=url)}", file=sys.stderr)
        return EXIT_UNREACHABLE
    from kernel.tui.run import run_remote

    return asyncio.run(run_remote(sidecar.url, sidecar.api_key))


def desktop(env: Mapping[str, str], platform: str = sys.platform) -> bool:
    """Whether a browser can be opened here: macOS, Windows, or a display on others."""
    if platform == "darwin" or platform.startswith(("win", "cygwin")):
        return True
    return bool(env.get("DISPLAY") or env.get("WAYLAND_DISPLAY"))


def console_command(env: Mapping[str, str] | None = None, platform: str = sys.platform) -> int:
    """``kernel console``: a one-time sign-in link to the console on stdout (asked of the
    running sidecar with its key; the bare address with ``gateway.auth = "none"``), how
    to sign in and reach it safely on stderr, and the page opened in the browser on a
    desktop."""
    from kernel.client.http import SidecarError, SidecarUnreachable, sidecar_from
    from kernel.client.verbs import EXIT_REFUSED, EXIT_UNREACHABLE
    from kernel.config import gateway_of

    env = os.environ if env is None else env
    set_language(language_of(env=env))
    try:
        gateway = gateway_of(env=env)
        sidecar = sidecar_from(env)
    except ConfigError as exc:
        print(f"kernel: {exc}", file=sys.stderr)
        return 2
    if sidecar is None:
        print(f"kernel: {t('client.no_address')}", file=sys.stderr)
        return 2
    if not gateway.console:
        print(f"kernel: {t('client.console_off')}", file=sys.stderr)
        return 1
    url = sidecar.url.rstrip("/") + "/console/"
    if sidecar.api_key:
        try:
            answer = sidecar.call("POST", "/console/link")
        except SidecarUnreachable as exc:  # no link without a running Kernel
            print(f"kernel: {exc}", file=sys.stderr)
            return EXIT_UNREACHABLE
        except SidecarError as exc:
            print(f"kernel: {exc}", file=sys.stderr)
            return EXIT_REFUSED
        link = answer.get("link") if isinstance(answer, dict) else None
        if not isinstance(link, str) or not link.isascii():
            print(f"kernel: {t('client.console_no_link', url=sidecar.url)}", file=sys.stderr)
            return EXIT_REFUSED
        url += f"#signin={urllib.parse.quote(link, safe='')}"
    print(url)
    port = urllib.parse.urlsplit(url).port or 8088
    # Without a key here: keyless by choice, or a Kernel whose key this machine lacks.
    keyless = "client.console_hint" if gateway.auth == "none" else "client.console_key_hint"
    hint = "client.console_link_hint" if sidecar.api_key else keyless
    print(t(hint, port=port), file=sys.stderr)
    if desktop(env, platform):
        with contextlib.suppress(webbrowser.Error, OSError):  # printed above: opened by hand
            webbrowser.open(_redirect_page(url, env) if sidecar.api_key else url)
    return 0


def _redirect_page(url: str, env: Mapping[str, str]) -> str:
    """A file:// address of a page that goes on to ``url``, so that the one-time link
    is on no command line (the browser's or its launcher's, which any local user can
    read): the page is 0600 in a fresh 0700 folder of the user's runtime directory
    (or the temporary one). Left there, as the browser may read it after this returns:
    what it holds is valid once, for a minute."""
    runtime = env.get("XDG_RUNTIME_DIR") or ""
    private = runtime if runtime and Path(runtime).is_dir() else None
    folder = Path(tempfile.mkdtemp(prefix="kernel-console-", dir=private))
    page = folder / "console.html"
    target = html.escape(url, quote=True)
    text = f'<!doctype html><meta http-equiv="refresh" content="0;url={target}">\n'
    create_whole(page, text.encode("utf-8"), mode=0o600)
    return page.as_uri()


def _configure(require_telegram: bool, to_file: bool, stream: TextIO | None = None) -> Config:
    from kernel.config.secrets import header_names_of, header_values_of, secrets_of
    from kernel.core.logs import LEVELS, setup_logging
    from kernel.plugins import default_plugins

    # Provider types are what the plugins provide: the loader checks the names it is given.
    types = default_plugins().provider_types
    config = load_config(require_telegram=require_telegram, provider_types=types)
    set_language(config.general.language)
    level = LEVELS[config.general.log_level]
    # The service logs to stdout and the file; `kernel chat` keeps stdout for the
    # conversation and shows only warnings, on stderr.
    log_dir = config.data_dir / "logs" if to_file else None
    try:
        setup_logging(
            log_dir,
            secrets_of(config),
            stream=stream or (sys.stdout if to_file else sys.stderr),
            level=level if to_file else max(level, logging.WARNING),
            log_messages=config.general.log_messages,
            header_names=header_names_of(config),
            opaque=header_values_of(config),
        )
    except OSError as exc:
        detail = exc.strerror or str(exc)
        raise StartupError(t("startup.storage", path=config.data_dir, detail=detail)) from None
    for warning in config.warnings:
        log.warning("%s", warning)
    return config


async def serve(config: Config) -> None:
    """Run until SIGINT/SIGTERM (Ctrl+C/Ctrl+Break on Windows); the Kernel starts and
    stops its parts in order."""
    from kernel.app import Kernel

    stop = asyncio.Event()
    restore = install_stop(asyncio.get_running_loop(), stop.set)
    try:
        await Kernel(config).serve(stop)
    finally:
        restore()


async def _check(config: Config) -> int:
    from kernel.check import report, run_checks

    text, code = report(await run_checks(config))
    print(text)
    return code


def main(argv: list[str] | None = None) -> int:
    leave_out()  # before anything imports httpx
    given = sys.argv[1:] if argv is None else argv
    # The service (`kernel`, `kernel run`) needs no parser: building one imports every
    # client verb's module (and httpx), which a resting service would carry for nothing.
    args = (
        argparse.Namespace(command="run") if given in ([], ["run"]) else _parser().parse_args(given)
    )
    # Loading never sets the language: every message from here on is in the one asked for.
    set_language(language_of())
    if getattr(args, "audit", None) is not None:  # reads kernel.db itself: no sidecar
        from kernel.client.audit import run as run_audit

        return run_audit(args)
    if getattr(args, "data", None) is not None:  # export/import: kernel.db itself
        from kernel.client.data import run as run_data

        return run_data(args)
    if getattr(args, "client", None) is not None:
        from kernel.client.commands import run

        return run(args)
    if getattr(args, "backup_verb", None) is not None:
        return _backup_command(args)
    command = args.command or "run"
    if command == "console":
        return console_command()
    if command == "chat" and not args.local:
        remote = _remote_chat()
        if remote is not None:
            return remote
    if command == "tui":
        from kernel.tui import textual_missing

        if textual_missing():
            print(f"kernel: {t('tui.no_textual')}", file=sys.stderr)
            return 2
        if not args.local:
            remote = _remote_tui(args.url)
            if remote is not None:
                return remote
    with contextlib.ExitStack() as stack:
        # The full screen is drawn on the terminal: the in-process TUI logs to the file only.
        quiet = stack.enter_context(open(os.devnull, "w")) if command == "tui" else None
        return _serve_command(command, quiet)


def _backup_command(args: argparse.Namespace) -> int:
    """``kernel backup`` and ``kernel restore``: the configuration read (no Telegram
    token needed, no log file set up), then the verb (kernel/backup/command.py)."""
    from kernel.backup.command import run
    from kernel.plugins import default_plugins

    try:
        types = default_plugins().provider_types
        config = load_config(require_telegram=False, provider_types=types)
    except ConfigError as exc:
        print(f"kernel: {exc}", file=sys.stderr)
        return 2
    set_language(config.general.language)
    return run(args, config)


def _serve_command(command: str, quiet: TextIO | None) -> int:
    try:
        # `check` reports a missing Telegram token as one of its lines, not as a refusal.
        config = _configure(
            require_telegram=command == "run", to_file=command in ("run", "tui"), stream=quiet
        )
    except (ConfigError, StartupError) as exc:
        print(f"kernel: {exc}", file=sys.stderr)
        return 2
    try:
        if command == "chat":
            from kernel.app import Kernel
            from kernel.console.chat import run_chat

            return asyncio.run(run_chat(config, Kernel))
        if command == "tui":
            from kernel.app import Kernel
            from kernel.tui.run import run_local

            return asyncio.run(run_local(config, Kernel))
        if command == "check":
            return asyncio.run(_check(config))
        # The service on uvloop's loop where it is installed (kernel/core/platform.py):
        # it runs for days, and an exchange costs ~9 % fewer instructions there. The
        # verbs above stay on asyncio's: short or interactive, they would gain nothing
        # one could notice, and the TUI's terminal driver is not tried on uvloop.
        run_service(serve(config))
    except StartupError as exc:
        print(f"kernel: {exc}", file=sys.stderr)  # one line, like config refusals
        return 2
    except Exception:
        # Through logging, not Python's own traceback print: the formatter masks secrets
        # and hides quoted values, and the file keeps it (systemd restarts on failure).
        log.critical("kernel crashed", exc_info=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
