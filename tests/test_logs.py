"""The log pipeline: secrets masked in messages and tracebacks, quoted values hidden in
exception messages, library levels held, the rotating file; plus a static check that
Kernel's own log calls pass no payloads."""

from __future__ import annotations

import ast
import io
import logging
import logging.handlers
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernel.core.logs import (
    LIBRARY_FLOORS,
    RedactingFormatter,
    RepeatFilter,
    format_exception,
    setup_logging,
)
from kernel.core.redact import Redactor

KEY = "sk-test-SECRET-0123456789abcdef"
OWNER_QUERY = "我的秘密日记"
KERNEL = Path(__file__).resolve().parent.parent / "kernel"


@pytest.fixture
def restore_logging() -> Iterator[None]:
    """setup_logging reconfigures the root logger: give pytest's handlers back."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    levels = {name: logging.getLogger(name).level for name in LIBRARY_FLOORS}
    yield
    for handler in list(root.handlers):
        root.removeHandler(handler)
        handler.close()
    for handler in handlers:
        root.addHandler(handler)
    root.setLevel(level)
    for name, old in levels.items():
        logging.getLogger(name).setLevel(old)


def _record(msg: str, *args: object, exc: BaseException | None = None, name: str = "x") -> str:
    exc_info = (type(exc), exc, exc.__traceback__) if exc is not None else None
    record = logging.LogRecord(name, logging.ERROR, __file__, 1, msg, args, exc_info)
    return RedactingFormatter(Redactor([KEY], ["X-Notes-Key"])).format(record)


def _raise_search_error(query: str) -> None:
    try:
        raise ConnectionError(f"upstream refused Authorization: Bearer {KEY}")
    except ConnectionError as inner:
        raise LookupError(f'fts5: syntax error near "{query}"') from inner


def test_traceback_keeps_frames_masks_secrets_and_hides_quoted_values() -> None:
    try:
        _raise_search_error(OWNER_QUERY)
    except LookupError as exc:
        text = _record("memory recall failed", exc=exc)
    assert "Traceback (most recent call last)" in text
    assert "_raise_search_error" in text  # the frames are there for debugging
    assert "direct cause" in text and "ConnectionError" in text
    assert KEY not in text and "Authorization: [REDACTED]" in text
    assert OWNER_QUERY not in text and 'LookupError: fts5: syntax error near "…"' in text


def test_suppressed_context_stays_out() -> None:
    try:
        try:
            raise ValueError("inner secret detail 'x'")
        except ValueError:
            raise RuntimeError("translated") from None
    except RuntimeError as exc:
        text = format_exception(exc, hide=True)
    assert "inner secret detail" not in text and text.endswith("RuntimeError: translated")


def test_exception_groups_show_every_member_hidden() -> None:
    group = ExceptionGroup("tasks failed", [KeyError("owner text"), OSError("disk 'full'")])
    text = format_exception(group, hide=True)
    assert "owner text" not in text and "KeyError: '…'" in text
    assert "OSError: disk '…'" in text


def test_code_shaped_exceptions_keep_their_names() -> None:
    error = AttributeError("'NoneType' object has no attribute 'send'")
    assert "'NoneType' object has no attribute 'send'" in format_exception(error, hide=True)
    assert "No module named 'jieba'" in format_exception(
        ModuleNotFoundError("No module named 'jieba'"), hide=True
    )


def test_messages_are_masked_and_quoted_values_hidden() -> None:
    text = _record("provider said %s; X-Notes-Key: %s", f"bad key {KEY}", "v1")
    assert KEY not in text and "sk-t…cdef" in text and "X-Notes-Key: [REDACTED]" in text
    library = _record("Calling endpoint with parameters `%s`", {"text": "昭和 music please"})
    assert "昭和" not in library and "{'…': '…'}" in library


def test_keep_text_keeps_values_but_still_masks_secrets() -> None:
    record = logging.LogRecord(
        "telegram.ext.ExtBot", logging.DEBUG, __file__, 1, "params %s", ({"text": KEY},), None
    )
    text = RedactingFormatter(Redactor([KEY]), keep_text=True).format(record)
    assert "'sk-t…cdef'" in text and KEY not in text


def test_setup_logging_file_stream_levels(tmp_path: Path, restore_logging: None) -> None:
    stream = io.StringIO()
    setup_logging(tmp_path / "logs", [KEY], stream=stream, level=logging.DEBUG)
    root = logging.getLogger()
    files = [h for h in root.handlers if isinstance(h, logging.handlers.RotatingFileHandler)]
    assert len(files) == 1
    assert (files[0].maxBytes, files[0].backupCount) == (10 * 1024 * 1024, 5)
    assert files[0].baseFilename == str(tmp_path / "logs" / "kernel.log")
    # Kernel's own debug lines pass; library payload logging does not.
    assert logging.getLogger("kernel.agent").isEnabledFor(logging.DEBUG)
    assert not logging.getLogger("telegram.ext.ExtBot").isEnabledFor(logging.DEBUG)
    assert not logging.getLogger("httpx").isEnabledFor(logging.INFO)
    assert not logging.getLogger("telegram.request.AioRequest").isEnabledFor(logging.INFO)
    assert not logging.getLogger("openai._base_client").isEnabledFor(logging.DEBUG)

    logging.getLogger("kernel.test").warning("key %s", KEY)
    logging.getLogger("httpx").warning("HTTP Request: POST https://x/bot123456:AAAAAAAAAA/getMe")
    for handler in root.handlers:
        handler.flush()
    for text in (stream.getvalue(), (tmp_path / "logs" / "kernel.log").read_text()):
        assert "key sk-t…cdef" in text and KEY not in text
        assert "/bot1234…AAAA/getMe" in text


def test_log_messages_lifts_the_library_floors(tmp_path: Path, restore_logging: None) -> None:
    setup_logging(None, [], stream=io.StringIO(), level=logging.DEBUG, log_messages=True)
    assert logging.getLogger("telegram.ext.ExtBot").isEnabledFor(logging.DEBUG)
    assert logging.getLogger("httpx").isEnabledFor(logging.INFO)
    assert logging.getLogger("telegram.request.AioRequest").isEnabledFor(logging.INFO)
    assert not (tmp_path / "logs").exists()


# ----- static audit of Kernel's own log calls -------------------------------------------

LOG_METHODS = {"debug", "info", "warning", "error", "exception", "critical"}
# Names that hold what the owner or the model said, or a body: never a log argument.
PAYLOAD_NAMES = {
    "text", "content", "message", "prompt", "query", "arguments", "args", "input",
    "transcript", "body", "caption", "file_name", "filename", "data", "payload", "reply",
    "question", "options", "answer", "delta", "output", "result", "params", "headers",
}  # fmt: skip
EXCEPTION_NAMES = {"exc", "e", "err", "error", "exception"}


def _final_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Call):
        return _final_name(node.func)
    return None


def _problems(tree: ast.AST, path: Path) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in LOG_METHODS
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id in {"log", "logger", "_log"}
            and node.args
        ):
            continue
        where = f"{path.relative_to(KERNEL.parent)}:{node.lineno}"
        fmt = node.args[0]
        if isinstance(fmt, ast.JoinedStr):
            found.append(f"{where}: f-string log message (pass values as %s arguments)")
        elif isinstance(fmt, ast.Constant) and "%r" in str(fmt.value):
            found.append(f"{where}: %r in a log message (repr shows values)")
        for arg in node.args[1:]:
            name = _final_name(arg)
            if isinstance(arg, ast.Call) and name == "str":
                name = _final_name(arg.args[0]) if arg.args else None
            if name in PAYLOAD_NAMES:
                found.append(f"{where}: logs {name!r}, which may hold message text or a body")
            elif name in EXCEPTION_NAMES and isinstance(arg, ast.Name | ast.Call):
                found.append(f"{where}: logs an exception's text (use type(exc).__name__)")
    return found


def test_kernel_log_calls_pass_no_payloads() -> None:
    problems = []
    for path in sorted(KERNEL.rglob("*.py")):
        problems += _problems(ast.parse(path.read_text(encoding="utf-8")), path)
    assert problems == []


def test_the_audit_finds_what_it_looks_for() -> None:
    source = (
        "log.info(f'got {text}')\n"
        "log.warning('failed: %s', exc)\n"
        "log.info('user said %s', update.message.text)\n"
        "log.debug('x %r', thing)\n"
        "log.info('tool %s took %d ms', tool.name, elapsed)\n"
    )
    problems = _problems(ast.parse(source), KERNEL / "example.py")
    assert [p.split(": ", 1)[0] for p in problems] == [
        "kernel/example.py:1",
        "kernel/example.py:2",
        "kernel/example.py:3",
        "kernel/example.py:4",
    ]


def test_log_settings_are_validated(tmp_path: Path) -> None:
    from kernel.config import load_config
    from kernel.core.errors import ConfigError
    from tests.conftest import write_config

    path = write_config(tmp_path, "http://127.0.0.1:9", "claude", log_level="verbose")
    with pytest.raises(ConfigError) as refused:
        load_config(path, env={}, require_telegram=False)
    assert "general.log_level" in str(refused.value) and "debug" in str(refused.value)
    path.write_text(path.read_text().replace('log_level = "verbose"', "log_messages = 1"))
    with pytest.raises(ConfigError) as refused:
        load_config(path, env={}, require_telegram=False)
    assert "general.log_messages" in str(refused.value)


def test_every_record_is_one_line_whatever_its_values() -> None:
    text = _record("file %s written", "a\nFAKE ERROR\r\x1b[31m\x85\u2028b\tc")
    assert "\n" not in text and "\r" not in text and "\x1b" not in text
    assert "a\\nFAKE ERROR\\r\\x1b[31m\\x85\\u2028b\\tc" in text
    try:
        raise ValueError("bad\nforged line")
    except ValueError as exc:
        text = _record("failed", exc=exc)
    # The traceback spans lines (ours), the exception's message does not.
    assert "Traceback (most recent call last)" in text
    assert "ValueError: bad\\nforged line" in text.splitlines()
    assert not any(line.startswith("forged line") for line in text.splitlines())


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_burst_of_identical_records_is_summarised(restore_logging: None) -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    clock = _Clock()
    handler.addFilter(RepeatFilter(handler, burst=3, window=60.0, clock=clock))
    log = logging.getLogger("asyncio.test")
    log.addHandler(handler)
    log.propagate = False
    try:
        for _ in range(1000):
            log.error("socket.accept() out of system resource")
            log.warning("other %d", 1)
        clock.now = 61.0
        log.error("socket.accept() out of system resource")
    finally:
        log.removeHandler(handler)
        log.propagate = True
    lines = stream.getvalue().splitlines()
    assert lines.count("socket.accept() out of system resource") == 4
    assert lines.count("other 1") == 3
    summaries = [line for line in lines if line.startswith("suppressed")]
    assert sorted(summaries) == [
        "suppressed 997 similar records in 60 s: other 1",
        "suppressed 997 similar records in 60 s: socket.accept() out of system resource",
    ]
    assert len(lines) == 4 + 3 + 2


def test_setup_logging_installs_the_repeat_filter(tmp_path: Path, restore_logging: None) -> None:
    stream = io.StringIO()
    setup_logging(tmp_path / "logs", [], stream=stream)
    for _ in range(10_000):
        logging.getLogger("asyncio").error("socket.accept() out of system resource")
    for handler in logging.getLogger().handlers:
        handler.flush()
    for text in (stream.getvalue(), (tmp_path / "logs" / "kernel.log").read_text()):
        assert 1 <= text.count("out of system resource") <= 10
