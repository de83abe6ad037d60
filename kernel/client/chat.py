"""``kernel chat`` through the running Kernel's sidecar (the terminal chat, streamed).

Used when a sidecar answers; otherwise ``kernel chat`` runs its own agent in-process
(kernel/console/chat.py). Every line goes to ``POST /agent/terminal``: the terminal chat
of the running Kernel, whose commands are those of ``kernel chat --local`` and Telegram
(:mod:`kernel.commands.terminal`), answered there without a model. Ctrl-C while a reply
streams closes the connection, which cancels the turn on the server; Ctrl-C while idle,
``/exit`` or end of input quits.
"""

from __future__ import annotations

from typing import IO, Any

from kernel.client.commands import show_stream
from kernel.client.http import Sidecar, SidecarError, SidecarUnreachable
from kernel.client.verbs import EXIT_REFUSED, EXIT_UNREACHABLE
from kernel.core.i18n import t


def run_remote_chat(sidecar: Sidecar, stdin: IO[str], out: IO[str], err: IO[str]) -> int:
    interactive = stdin.isatty()
    failed = False
    if interactive:
        out.write(t("client.chat_remote", url=sidecar.url) + "\n")
    while True:
        if interactive:
            out.write("› ")
            out.flush()
        try:
            line = stdin.readline()
        except KeyboardInterrupt:
            break
        text = line.strip()
        if not line or text.partition(" ")[0] in ("/exit", "/quit"):
            break
        if not text:
            continue

        def answer(ask: dict[str, Any]) -> None:
            _answer(sidecar, ask, stdin, out)

        try:
            events = sidecar.stream("/agent/terminal", {"text": text, "stream": True})
            failed |= show_stream(events, out, err, answer) != 0
        except KeyboardInterrupt:  # the connection is closed: the turn is cancelled
            out.write(f"\n[{t('turn.cancelled')}]\n")
        except SidecarUnreachable as exc:
            err.write(f"kernel: {exc}\n")
            return EXIT_UNREACHABLE
        except SidecarError as exc:
            err.write(t("console.error", message=f"{exc} ({exc.code})") + "\n")
            failed = True
    if interactive:
        out.write(t("console.bye") + "\n")
    return EXIT_REFUSED if failed else 0


def _answer(sidecar: Sidecar, ask: dict[str, Any], stdin: IO[str], out: IO[str]) -> None:
    """Show the question with numbered options; the next valid number answers it."""
    options = [str(o) for o in ask.get("options", [])]
    out.write(str(ask.get("question", "")) + "\n")
    if ask.get("details"):  # an approval's full arguments: a terminal has room for them
        out.write(str(ask["details"]) + "\n")
    for n, option in enumerate(options, start=1):
        out.write(f"  {n}) {option}\n")
    while True:
        out.write(t("console.ask_prompt", count=len(options)))
        out.flush()
        line = stdin.readline()
        if not line:
            return  # end of input: the question times out on the server
        choice = line.strip()
        if choice.isdigit() and 1 <= int(choice) <= len(options):
            break
    try:
        sidecar.call("POST", f"/agent/asks/{ask['id']}/answer", {"choice": int(choice) - 1})
    except SidecarError:
        out.write(t("tg.ask_gone") + "\n")  # answered elsewhere, timed out or cancelled
