"""``kernel chat`` through the running Kernel's sidecar (the default chat, streamed).

Used when a sidecar answers; otherwise ``kernel chat`` runs its own agent in-process
(kernel/console/chat.py). Ctrl-C while a reply streams closes the connection, which
cancels the turn on the server; Ctrl-C while idle, ``/exit`` or end of input quits.
"""

from __future__ import annotations

from typing import IO, Any

from kernel.client.commands import show_stream
from kernel.client.http import Sidecar, SidecarError, SidecarUnreachable
from kernel.client.mcp import print_servers
from kernel.client.profiles import chat_command
from kernel.client.usage import print_summary
from kernel.client.verbs import EXIT_REFUSED, EXIT_UNREACHABLE
from kernel.core.i18n import t

LOCAL_ONLY = ("/history", "/resume", "/provider", "/model")
DEFAULT_CHAT = "chat-default"  # the chat /agent/process uses without a session_id


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
        if not line or text in ("/exit", "/quit"):
            break
        if not text:
            continue
        if text == "/help":
            out.write(t("client.chat_help") + "\n")
            continue
        if text.split()[0] in LOCAL_ONLY:
            out.write(t("client.chat_local_only", cmd=text.split()[0]) + "\n")
            continue
        command, _, arg = text.partition(" ")
        if command in ("/persona", "/project"):
            try:
                chat_command(sidecar, command[1:], arg.strip(), DEFAULT_CHAT, out)
            except SidecarUnreachable as exc:
                err.write(f"kernel: {exc}\n")
                return EXIT_UNREACHABLE
            continue
        if text.split()[0] in ("/usage", "/mcp"):  # read from Kernel, never a model's turn
            try:
                if text.split()[0] == "/usage":
                    print_summary(sidecar, out)
                else:
                    print_servers(sidecar, out)
            except SidecarError as exc:
                err.write(t("console.error", message=f"{exc} ({exc.code})") + "\n")
                failed = True
            except SidecarUnreachable as exc:
                err.write(f"kernel: {exc}\n")
                return EXIT_UNREACHABLE
            continue
        body = {
            "input": [
                {"role": "user", "type": "message", "content": [{"type": "text", "text": text}]}
            ],
            "channel": "console",
            "stream": True,
        }

        def answer(ask: dict[str, Any]) -> None:
            _answer(sidecar, ask, stdin, out)

        try:
            events = sidecar.stream("/agent/process", body)
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
