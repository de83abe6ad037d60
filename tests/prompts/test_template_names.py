"""``/prompts:<name>`` review fixes (issue 20): a name may be Unicode (``周报``) but never a
path; the name ends at any whitespace (a new line from Shift+Enter, a tab); backslashes
in values are kept; a file that does not read as a template is neither listed nor
called "not found", but refused with its own reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernel.agent.prompt_files import MAX_FILE_BYTES, PromptFiles
from kernel.core.errors import PromptError
from tests.gateway.conftest import SidecarFactory
from tests.prompts.conftest import FLAGS_ON
from tests.prompts.test_templates import files, last_text
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.script import text_reply
from tests.telegram.conftest import Factory

FIND = "Find {{PATTERN}} in {{FILE}}."


def folder(base: Path) -> Path:
    path = base / "prompts"
    path.mkdir(exist_ok=True)
    (path / "hello.md").write_text("Hello {{WHO}}.\n")
    (path / "周报.md").write_text("# 周报\n本周 {{WEEK}} 的进展。\n")
    (path / "find.md").write_text(FIND + "\n")
    return path


def broken(path: Path) -> None:
    """Files named like templates that do not read as one."""
    (path / "empty.md").write_text("")
    (path / "blank.md").write_text(" \n\n")
    (path / "binary.md").write_bytes(b"\xff\xfe\x00\x01 {{X}}")
    (path / "big.md").write_text("x" * (MAX_FILE_BYTES + 1))


def refused(f: PromptFiles, text: str) -> PromptError:
    with pytest.raises(PromptError) as caught:
        f.expand(text)
    return caught.value


def test_backslashes_in_values_are_kept_and_quotes_still_group(tmp_path: Path) -> None:
    folder(tmp_path)
    f = files(tmp_path)
    out = f.expand(r"/prompts:find PATTERN=\d+\.py FILE=C:\Users\me\a.py")
    assert out == r"Find \d+\.py in C:\Users\me\a.py."
    out = f.expand(r'/prompts:find PATTERN="#\w+ x" FILE="C:\Program Files\a b.py"')
    assert out == r"Find #\w+ x in C:\Program Files\a b.py."
    out = f.expand(r"/prompts:find PATTERN='a\' FILE=\\srv\share")
    assert out == r"Find a\ in \\srv\share."


@pytest.mark.parametrize(
    "text",
    [
        "/prompts:hello\nWHO=bob",
        "/prompts:hello\tWHO=bob",
        "/prompts:hello\r\nWHO=bob",
        "/prompts:hello\u3000WHO=bob",
        "/prompts:hello  \n  WHO=bob\n",
    ],
)
def test_the_name_ends_at_any_whitespace(tmp_path: Path, text: str) -> None:
    folder(tmp_path)
    assert files(tmp_path).expand(text) == "Hello bob."


def test_arguments_may_be_on_separate_lines_or_apart_by_an_ideographic_space(
    tmp_path: Path,
) -> None:
    folder(tmp_path)
    f = files(tmp_path)
    assert f.expand("/prompts:find\nPATTERN=a\nFILE=b") == "Find a in b."
    assert f.expand("/prompts:find PATTERN=a\u3000FILE=b") == "Find a in b."


def test_a_unicode_name_is_listed_and_filled_in(tmp_path: Path) -> None:
    folder(tmp_path)
    f = files(tmp_path)
    assert [(x.name, x.first_line) for x in f.templates()] == [
        ("find", FIND),
        ("hello", "Hello {{WHO}}."),
        ("周报", "# 周报"),
    ]
    assert f.expand("/prompts:周报 WEEK=48") == "# 周报\n本周 48 的进展。"
    # a name composed or decomposed (NFC or NFD) is the same template, typed either way
    (tmp_path / "prompts" / "caf\u00e9.md").write_text("Un {{X}}.\n")
    (tmp_path / "prompts" / "nai\u0308ve.md").write_text("So {{X}}.\n")
    assert f.expand("/prompts:cafe\u0301 X=1") == "Un 1."
    assert f.expand("/prompts:na\u00efve X=2") == "So 2."
    assert "na\u00efve" in [x.name for x in f.templates()]


def test_path_tricks_and_dotted_names_stay_refused(tmp_path: Path) -> None:
    path = folder(tmp_path)
    (path / "AGENTS.md").write_text("A layer.\n")
    (path / "code.review.md").write_text("Dotted.\n")
    (path / "a／b.md").write_text("Fullwidth solidus.\n")  # a legal file name on Linux
    (path / ".hidden.md").write_text("Hidden.\n")
    (path / "_x.md").write_text("Underscore first.\n")
    (tmp_path / "secret.md").write_text("Outside prompts/.\n")
    f = files(tmp_path)
    assert [x.name for x in f.templates()] == ["find", "hello", "周报"]
    for name in [
        "../secret",
        "%2e%2e",
        "..",
        "a/b",
        "a\\b",
        "a\x00b",
        "a／b",
        "AGENTS",
        "code.review",
        ".hidden",
        "_x",
        "../prompts/hello",
    ]:
        error = refused(f, f"/prompts:{name} WHO=x")
        assert error.code == "prompt_template_not_found", name
        assert error.details["templates"] == ["find", "hello", "周报"]
    error = refused(f, "/prompts:" + "x" * 5000)  # a long name is not echoed whole
    assert error.details["template"] == "x" * 64 + "…" and len(str(error)) < 300


def test_a_file_that_does_not_read_is_not_listed_and_refused_with_its_reason(
    tmp_path: Path,
) -> None:
    broken(folder(tmp_path))
    f = files(tmp_path)
    assert [x.name for x in f.templates()] == ["find", "hello", "周报"]
    for name in ["empty", "blank", "binary", "big"]:
        error = refused(f, f"/prompts:{name} X=1")
        assert error.code == "prompt_template_invalid", name
        assert f"prompts/{name}.md is empty, not UTF-8 text or over 256 KiB" in str(error)
        assert "Templates: find, hello, 周报" in str(error)
        assert error.details == {"template": name, "templates": ["find", "hello", "周报"]}
    # a missing placeholder's refusal carries the list of templates too
    error = refused(f, "/prompts:hello")
    assert error.code == "prompt_template_invalid"
    assert error.details["templates"] == ["find", "hello", "周报"]


async def test_telegram_lists_and_fills_in_a_unicode_name_and_a_new_line(
    bot: Factory, tmp_path: Path
) -> None:
    broken(folder(tmp_path))
    h = await bot(extra=FLAGS_ON)
    h.model.enqueue(text_reply("好的"), text_reply("hi bob"))

    listing = await h.converse("/prompts")
    assert listing.splitlines()[1:] == [
        "/prompts:find — " + FIND,
        "/prompts:hello — Hello {{WHO}}.",
        "/prompts:周报 — # 周报",
    ]
    assert await h.converse("/prompts:周报 WEEK=48") == "好的"
    assert last_text(h.model) == "# 周报\n本周 48 的进展。"
    assert await h.converse("/prompts:hello\nWHO=bob") == "hi bob"  # Shift+Enter
    assert last_text(h.model) == "Hello bob."
    reply = await h.converse("/prompts:binary X=1")
    assert "prompts/binary.md is empty, not UTF-8 text or over 256 KiB" in reply
    assert len(h.model.requests) == 2  # the refusal sent nothing


async def test_http_refuses_an_unreadable_template_with_the_list(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    broken(folder(tmp_path))
    sc = await sidecar(anthropic_sim, extra=FLAGS_ON)
    status, data = await sc.process("/prompts:empty")
    assert status == 400 and data["error"]["code"] == "prompt_template_invalid"
    assert data["error"]["details"]["templates"] == ["find", "hello", "周报"]
    assert anthropic_sim.requests == []
