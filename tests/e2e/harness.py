"""The real ``python -m kernel`` against the Telegram and Anthropic simulators, with faults.

    async with Rig(tmp_path) as rig:          # simulators up, nothing spawned yet
                                              # (mcp=True: with the MCP test server)
        await rig.start()                     # the process, until its first poll returns
        rig.send("m1 SLOW")                   # the owner writes; the model streams slowly
        await rig.tg.wait_for(is_draft)       # … then the moment to kill comes
        await rig.kill()                      # SIGKILL
        await rig.start()                     # a new process on the same data folder
        assert rig.integrity() == "ok"
        assert rig.ledger().lost == []

The owner's messages carry a token (``m17``) and optional keywords after it; the model
simulator (``LedgerModel``) answers each from the request it gets, so a restarted Kernel
re-running a turn gets the same answer: ``ok m17`` for a plain message, and

  SLOW    the reply streams in pieces ``SLOW_DELAY`` seconds apart (kill during streaming)
  LONG    two chunks of ~3500 characters: ``ok m17 part 1/2 …`` and ``ok m17 part 2/2 …``
          (each a sendMessage: no placeholder comes before them)
  TOOL    a call of the MCP test server's ``nap`` (``TOOL_NAP`` s; ``Rig(mcp=True)``),
          then ``ok m17``
  NAP     a short nap (0.3 s, the same tool), then ``ok m17``
  CLI     a ``delegate_to_cli`` call to the stand-in CLI, then ``ok m17``
  POISON  400 invalid_request_error, as a provider refusing the message's content (as
          long as the text is anywhere in the request, like a real provider)

The ledger reads every message the bot ever showed in the owner's chat (deleted ones too:
the owner saw them) and sorts them per token: reply chunks (``ok m17 …``), re-sends marked
with ``↻``, and notices naming the message (any other text with the token).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

import aiohttp
from aiohttp import web

from kernel.audit.anchor import ANCHOR_FILE, load_anchor
from kernel.audit.key import KEY_FILE, read_key
from kernel.audit.verify import Verdict, verify_chain
from kernel.store.audit import read_chain, read_only
from tests.conftest import (
    SECRET_KEY,
    KernelProcess,
    free_port,
    kernel_env,
    spawn_kernel,
    write_config,
)
from tests.delegate.standins import alive, make_cli
from tests.sim.anthropic_sim import AnthropicSim, has_credentials, validate_request
from tests.sim.script import Error, Reply, Scripted, Text, ToolUse
from tests.sim.telegram_sim import DEFAULT_TOKEN, OWNER, BotCall, ChatMessage, TelegramSim
from tests.zygote import python_script

MARK = "↻"
TOKEN = re.compile(r"\bm\d+\b")
PART = re.compile(r"^ok (m\d+)(?: part (\d+)/(\d+))?")
SLOW_DELAY = 0.5  # seconds between stream events (8 events: a kill or an outage lands mid-reply)
TOOL_NAP = 30.0
FILLER = "lorem ipsum dolor sit amet " * 130  # ~3500 characters
MCP_SERVER = Path(__file__).resolve().parents[1] / "mcp" / "stdio_server.py"
REFUSAL = "Output blocked by content filtering policy"
QUIET = 1.5  # seconds without a Bot API call: a turn is over (pacing only)
AFTERWARDS = frozenset({"getWebhookInfo", "editMessageReplyMarkup"})  # not the turn's calls
PLACEHOLDERS = ("正在生成回复…", "Working on a reply…")  # what a placeholder said once
PROGRESS = ("⚙ ", "⏳ ")  # a tool's line (a placeholder's, with drafts off)


# ---- the model ---------------------------------------------------------------------------


def _text_of(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(b.get("text", "")) for b in content if b.get("type") == "text")
    return ""


def _ends_with_tool_result(messages: list[dict[str, Any]]) -> bool:
    content = messages[-1].get("content") if messages else None
    return isinstance(content, list) and any(b.get("type") == "tool_result" for b in content)


def answer(body: dict[str, Any]) -> Scripted:
    """The model's answer to one request, from the owner's latest token and keywords."""
    messages: list[dict[str, Any]] = body["messages"]
    if any("POISON" in _text_of(m) for m in messages if m.get("role") == "user"):
        return Error(400, "invalid_request_error", REFUSAL)
    token, words = "m0", []
    for message in reversed(messages):
        if message.get("role") != "user":
            continue
        split = _text_of(message).split()
        tokens = [i for i, word in enumerate(split) if TOKEN.fullmatch(word)]
        if tokens:
            token, words = split[tokens[-1]], split[tokens[-1] + 1 :]
            break
    if _ends_with_tool_result(messages):
        return Reply(Text(f"ok {token}"))
    if "TOOL" in words:
        return Reply(ToolUse("mcp_test__nap", {"seconds": TOOL_NAP}))
    if "NAP" in words:
        return Reply(ToolUse("mcp_test__nap", {"seconds": 0.3}))
    if "CLI" in words:
        return Reply(ToolUse("delegate_to_cli", {"task": f"work for {token}"}))
    delay = SLOW_DELAY if "SLOW" in words else 0.0
    if "LONG" in words:
        parts = [f"ok {token} part {i}/2 {FILLER}" for i in (1, 2)]
        return Reply(Text("\n\n".join(parts)), chunk_delay=delay)
    return Reply(Text(f"ok {token}"), chunk_delay=delay)


class LedgerModel(AnthropicSim):
    """The Anthropic simulator answering by `answer` when nothing is scripted."""

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        recorded = await self.record(request)
        body = recorded.body
        if not has_credentials(request) or not isinstance(body, dict):
            return self.invalid("bad request")
        if problem := validate_request(body):
            return self.invalid(problem)
        scripted = self._queue.popleft() if self._queue else answer(body)
        return await self._answer(request, body, scripted)


# ---- the ledger --------------------------------------------------------------------------


@dataclass
class Entry:
    """What the owner saw about one message."""

    token: str
    parts: dict[str, int] = field(default_factory=dict)  # chunk text -> unmarked copies
    marked: dict[str, int] = field(default_factory=dict)  # chunk text -> marked re-sends
    expected_parts: int = 1
    notices: list[str] = field(default_factory=list)

    @property
    def answered(self) -> bool:
        return len(set(self.parts) | set(self.marked)) >= self.expected_parts

    @property
    def accounted(self) -> bool:
        return self.answered or bool(self.notices)

    @property
    def unmarked_duplicates(self) -> int:
        return sum(count - 1 for count in self.parts.values() if count > 1)

    @property
    def resends(self) -> int:
        return sum(self.marked.values())


@dataclass
class Ledger:
    entries: dict[str, Entry]

    @property
    def lost(self) -> list[str]:
        return [token for token, entry in self.entries.items() if not entry.accounted]

    @property
    def unanswered(self) -> list[str]:
        return [token for token, entry in self.entries.items() if not entry.answered]

    @property
    def unmarked_duplicates(self) -> int:
        return sum(entry.unmarked_duplicates for entry in self.entries.values())

    @property
    def resends(self) -> int:
        return sum(entry.resends for entry in self.entries.values())

    def summary(self) -> str:
        rows = [
            f"{e.token}: parts={e.parts} marked={e.marked} notices={len(e.notices)}"
            for e in self.entries.values()
            if not e.answered or e.unmarked_duplicates or e.marked or e.notices
        ]
        return "; ".join(rows) or "all answered once"


def ledger(messages: list[ChatMessage], tokens: list[str]) -> Ledger:
    entries = {token: Entry(token) for token in tokens}
    for message in messages:
        if not message.from_bot:
            continue
        text = message.text.strip()
        marked = text.startswith(MARK)
        body = text.removeprefix(MARK).strip()
        if match := PART.match(body):
            entry = entries.get(match[1])
            if entry is None:
                continue
            entry.expected_parts = int(match[3] or 1)
            chunk = body.split(FILLER[:11])[0].strip()  # "ok m1 part 2/2"
            side = entry.marked if marked else entry.parts
            side[chunk] = side.get(chunk, 0) + 1
            continue
        for token in set(TOKEN.findall(text)):
            if token in entries:
                entries[token].notices.append(text)
    return Ledger(entries)


# ---- the rig -----------------------------------------------------------------------------


class Rig:
    """Simulators, a data folder that survives restarts, and the Kernel process."""

    def __init__(self, folder: Path, *, cli: bool = False, mcp: bool = False) -> None:
        self.folder = folder
        self.tg = TelegramSim(port=free_port())
        self.model = LedgerModel()
        self.proc: KernelProcess | None = None
        self.runs = 0
        self.tokens: list[str] = []
        self.output: list[str] = []
        self._drains: list[asyncio.Task[None]] = []
        self.cli = cli
        self.mcp = mcp
        self.cli_record = folder / "cli-record.json"
        self.extra_config = ""
        self.gateway_port = free_port()

    async def __aenter__(self) -> Self:
        await self.tg.start()
        await self.model.start()
        self._write_config()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            await self.stop()
        self._end_stand_in_cli()
        await self.tg.stop()
        await self.model.stop()

    @property
    def db(self) -> Path:
        return self.folder / "data" / "kernel.db"

    def _write_config(self) -> None:
        work = self.folder / "work"
        work.mkdir(exist_ok=True)
        path = write_config(
            self.folder,
            self.model.base_url,
            "claude",
            language="en",
            default_workspace=str(work),
            gateway={"port": self.gateway_port},
            shutdown_timeout=2.0,
        )
        lines = [
            "[telegram]",
            f'api_base = "{self.tg.api_base}"',
            "poll_timeout = 1",
            "watchdog_seconds = 10",
        ]
        if self.mcp:
            command, args = python_script(MCP_SERVER)
            lines += [
                "[mcp]",
                "[[mcp.servers]]",
                'name = "test"',
                'type = "stdio"',
                f'command = "{command}"',
                f"args = {json.dumps(args)}",
            ]
        if self.cli:
            fake = make_cli(self.folder / "bin", "claude_code")
            lines += ["[cli.claude_code]", f'command = "{fake}"']
        path.write_text(path.read_text() + "\n".join(lines) + "\n" + self.extra_config)

    def env(self) -> dict[str, str]:
        extra = {
            "KERNEL_TELEGRAM_TOKEN": DEFAULT_TOKEN,
            "KERNEL_TELEGRAM_ALLOWED_USER": str(OWNER),
            "STANDIN_MODE": "step_then_hang",
            "STANDIN_RECORD": str(self.cli_record),
        }
        return kernel_env(**extra)

    # ---- the process ------------------------------------------------------------------

    async def spawn(self) -> None:
        """Start the process without waiting for it."""
        assert self.proc is None or self.proc.returncode is not None
        self.runs += 1
        self.proc = await spawn_kernel(cwd=self.folder, env=self.env())
        for stream in (self.proc.stdout, self.proc.stderr):
            assert stream is not None
            self._drains.append(asyncio.create_task(self._drain(stream, self.runs)))

    async def start(self) -> None:
        """Start the process and wait until its first getUpdates was answered."""
        polls = self.tg.get_updates_completed
        await self.spawn()
        await self.wait_until(lambda: self.tg.get_updates_completed > polls, "first poll")

    async def _drain(self, stream: asyncio.StreamReader, run: int) -> None:
        """Read the child's output as it comes (a full pipe would block its logging)."""
        # A test's own small log file, line by line (kept for a failing test's reader).
        with open(self.folder / f"kernel-{run}.out", "ab") as file:  # noqa: ASYNC230
            while line := await stream.readline():
                file.write(line)
                self.output.append(line.decode(errors="replace").rstrip())
                del self.output[:-200]

    async def kill(self) -> None:
        """SIGKILL, as the OOM killer or a power cut would end it."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        await self.proc.wait()
        await self._drained()

    async def stop(self) -> int | None:
        """SIGTERM and wait for the exit code."""
        if self.proc is None or self.proc.returncode is not None:
            return None if self.proc is None else self.proc.returncode
        self.proc.send_signal(signal.SIGTERM)
        async with asyncio.timeout(60):
            code = await self.proc.wait()
        await self._drained()
        return code

    async def _drained(self) -> None:
        drains, self._drains = self._drains, []
        await asyncio.gather(*drains, return_exceptions=True)

    def _end_stand_in_cli(self) -> None:
        """The stand-in CLI a killed Kernel left running (it sleeps for minutes)."""
        with contextlib.suppress(OSError, ValueError, KeyError):
            pid = int(json.loads(self.cli_record.read_text())["pid"])
            if alive(pid):
                os.kill(pid, signal.SIGKILL)

    # ---- the owner --------------------------------------------------------------------

    def send(self, text: str) -> str:
        """The owner writes `text` (starting with a new token, e.g. ``m3 SLOW``)."""
        token = text.split()[0]
        assert TOKEN.fullmatch(token) and token not in self.tokens, token
        self.tokens.append(token)
        self.tg.inject_text(text)
        return token

    def bot_messages(self) -> list[ChatMessage]:
        return [m for m in self.tg.history(OWNER) if m.from_bot]

    def ledger(self) -> Ledger:
        return ledger(self.tg.history(OWNER), self.tokens)

    def press(self, message: ChatMessage, index: int) -> None:
        """The owner presses button `index` (row by row) under `message`."""
        rows = (message.reply_markup or {}).get("inline_keyboard", [])
        buttons = [button for row in rows for button in row]
        self.tg.inject_callback(buttons[index]["callback_data"], message_id=message.message_id)

    async def wait_until(
        self,
        condition: Callable[[], bool],
        what: str,
        timeout: float = 60,  # noqa: ASYNC109
    ) -> None:
        try:
            await self.tg.wait_until(condition, timeout=timeout)
        except TimeoutError:
            tail = "\n".join(self.output[-25:])
            chat = [m.text[:60] for m in self.bot_messages()[-8:]]
            raise AssertionError(
                f"{what}: not within {timeout}s; ledger: {self.ledger().summary()}\n"
                f"chat (last bot messages): {chat}\nkernel output (last lines):\n{tail}"
            ) from None

    async def answered(self, *tokens: str, timeout: float = 60) -> None:  # noqa: ASYNC109
        """Wait for the answers, then for the chat to go quiet (the turn is over)."""

        def done() -> bool:
            entries = self.ledger().entries
            return all(entries[token].answered for token in tokens)

        await self.wait_until(done, f"answers to {', '.join(tokens)}", timeout)
        await self.settle()

    async def settle(self, quiet: float = QUIET) -> None:
        """Pacing, not a check: wait until Kernel made no Bot API call for the turn for
        `quiet` seconds, so the owner's next message does not land in the turn's last
        moments (it would get the busy notice, as it should). Not the turn's: getUpdates,
        the watchdog's getWebhookInfo (every 2.5 s here), and the 🔁 taken off the reply
        before (editMessageReplyMarkup, which the chat's rate budget sends a second or
        two later; the owner may well write meanwhile)."""
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(60):
            while True:
                turn = (c.at for c in reversed(self.tg.calls) if c.method not in AFTERWARDS)
                last = next(turn, 0.0)
                idle = loop.time() - last
                if idle >= quiet:
                    break
                await asyncio.sleep(quiet - idle)

    async def accounted(self, *tokens: str, timeout: float = 60) -> None:  # noqa: ASYNC109
        def done() -> bool:
            entries = self.ledger().entries
            return all(entries[token].accounted for token in tokens)

        await self.wait_until(done, f"answers or notices for {', '.join(tokens)}", timeout)

    async def wait_call(
        self,
        predicate: Callable[[BotCall], bool],
        timeout: float = 60,  # noqa: ASYNC109
        *,
        since: int = 0,
    ) -> BotCall:
        """The first Bot API call from index `since` on (``len(rig.tg.calls)`` taken
        before the step) that satisfies `predicate`."""
        found: list[BotCall] = []

        def seen() -> bool:
            found[:] = [c for c in self.tg.calls[since:] if predicate(c)][:1]
            return bool(found)

        await self.wait_until(seen, "a matching Bot API call", timeout)
        return found[0]

    async def restart_after_kill(self) -> None:
        """SIGKILL now, start again on the same data, and check the database file."""
        await self.kill()
        assert self.integrity() == "ok"
        await self.start()

    async def next_turn_works(self, token: str) -> None:
        """The owner's next message is answered (the history is valid for the model)."""
        await self.answered(self.send(token))

    def check_promise(self) -> Ledger:
        """Every message answered or noticed, no unmarked duplicate."""
        book = self.ledger()
        assert book.lost == [], book.summary()
        assert book.unmarked_duplicates == 0, book.summary()
        return book

    # ---- what is left -----------------------------------------------------------------

    def integrity(self) -> str:
        db = sqlite3.connect(self.db)
        try:
            return str(db.execute("PRAGMA integrity_check").fetchone()[0])
        finally:
            db.close()

    def audit(self) -> tuple[Verdict, list[str]]:
        """The global audit chain as `kernel audit verify` sees it (read-only, the anchor
        beside the database), and the kinds of its rows in order."""
        chain = read_only(Path(self.db), lambda conn: read_chain(conn, None))
        anchor = load_anchor(Path(self.db).parent / ANCHOR_FILE)
        key = read_key(self.folder / KEY_FILE)  # beside config.toml, as Kernel made it
        return verify_chain(chain, anchor, key=key), [row.kind for row in chain.rows]

    def query(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        db = sqlite3.connect(self.db)
        try:
            return db.execute(sql, args).fetchall()
        finally:
            db.close()

    async def healthz(self) -> dict[str, Any]:
        """GET /healthz of the sidecar (an empty dict while nothing answers)."""
        url = f"http://127.0.0.1:{self.gateway_port}/healthz"
        try:
            async with aiohttp.ClientSession() as session, session.get(url) as response:
                body: dict[str, Any] = await response.json()
                return body
        except aiohttp.ClientError:
            return {}

    async def polling_state(self) -> str:
        health = await self.healthz()
        return str(health.get("channels", {}).get("telegram", {}).get("state", ""))

    def log_text(self) -> str:
        logs = self.folder / "data" / "logs" / "kernel.log"
        return logs.read_text(errors="replace") if logs.exists() else ""

    def placeholders_left(self) -> list[ChatMessage]:
        """Placeholders and progress lines still showing (not replaced, not deleted)."""
        return [
            m
            for m in self.tg.chat(OWNER, from_bot=True)
            if m.text.strip() in PLACEHOLDERS or m.text.startswith(PROGRESS)
        ]

    def secrets_leaked(self) -> bool:
        text = self.log_text() + "\n".join(self.output)
        return DEFAULT_TOKEN in text or SECRET_KEY in text


def is_draft(call: BotCall) -> bool:
    return call.method == "sendMessageDraft" and call.ok


def shows(text: str) -> Callable[[BotCall], bool]:
    """A progress call whose text holds ``text``: a draft (no placeholder while drafts
    work, issue 37) or an edit."""
    methods = ("sendMessageDraft", "editMessageText")
    return lambda call: call.method in methods and text in str(call.params.get("text"))


def is_dropped_send(call: BotCall) -> bool:
    """A sendMessage the simulator processed and whose answer it then dropped."""
    return call.method == "sendMessage" and call.status == 0
