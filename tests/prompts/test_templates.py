"""``/prompts:<name> KEY=VALUE …`` (issue 20, point 3): the template is filled in before
the turn in Telegram, ``kernel chat`` and POST /agent/process; a missing template, a
placeholder without a value, a value without a placeholder or a path for a name is
refused before anything is stored or sent, naming the templates; ``/prompts`` lists
them."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from kernel.agent.prompt_files import PromptFiles
from kernel.config import load_config
from kernel.console.chat import CONVERSATION, ConsoleChat
from kernel.core.errors import PromptError
from kernel.core.i18n import set_language
from tests.conftest import KernelFactory, write_config
from tests.gateway.conftest import SidecarFactory
from tests.prompts.conftest import FLAGS_ON
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.context import owner_texts
from tests.sim.script import text_reply
from tests.telegram.conftest import CONV, Factory

REVIEW = "Review {{FILE}} for $FOCUS.\nCost: $$5, {{ FILE }} again.\n"


def templates(base: Path) -> None:
    folder = base / "prompts"
    folder.mkdir(exist_ok=True)
    (folder / "review.md").write_text(REVIEW)
    (folder / "hello.md").write_text("\n# Say hello\nHello there.\n")
    (folder / "AGENTS.md").write_text("A layer, not a template.\n")
    (base / "secret.md").write_text("outside prompts/ {{X}}\n")


def last_text(sim: AnthropicSim) -> str:
    return owner_texts(sim.requests[-1].body["messages"][-1])[0]


def files(tmp_path: Path, extra: str = FLAGS_ON) -> PromptFiles:
    path = write_config(tmp_path, "http://127.0.0.1:9", "claude", language="en")
    path.write_text(path.read_text() + extra)
    config = load_config(path, env={}, require_telegram=False)
    set_language(config.general.language)  # as Kernel's entry points do
    return PromptFiles(config)


def test_expansion_fills_both_placeholder_forms_and_quoted_values(tmp_path: Path) -> None:
    templates(tmp_path)
    f = files(tmp_path)
    out = f.expand('/prompts:review FILE=a.py FOCUS="error handling"')
    assert out == "Review a.py for error handling.\nCost: $5, a.py again."
    assert f.expand("/prompts:hello") == "# Say hello\nHello there."
    assert f.expand("just /prompts:review in a sentence") == "just /prompts:review in a sentence"
    # a value is put in as it is, never scanned again for placeholders
    assert f.expand("/prompts:review FILE={{FOCUS}} FOCUS=$FILE").startswith(
        "Review {{FOCUS}} for $FILE."
    )


@pytest.mark.parametrize(
    ("text", "code", "words"),
    [
        ("/prompts:nope", "prompt_template_not_found", ["nope", "hello, review"]),
        ("/prompts:../secret X=1", "prompt_template_not_found", ["hello, review"]),
        ("/prompts:AGENTS", "prompt_template_not_found", ["hello, review"]),
        ("/prompts:", "prompt_template_not_found", ["hello, review"]),
        ("/prompts:review FILE=a.py", "prompt_template_invalid", ["FOCUS"]),
        ("/prompts:review FILE=a FOCUS=b EXTRA=c", "prompt_template_invalid", ["EXTRA"]),
        ("/prompts:review FILE=a FOCUS", "prompt_template_invalid", ["FOCUS"]),
        ("/prompts:review FILE=a FILE=b FOCUS=c", "prompt_template_invalid", ["FILE"]),
        ('/prompts:review FILE="a FOCUS=b', "prompt_template_invalid", ["review"]),
    ],
)
def test_refusals_name_the_problem_and_the_templates(
    tmp_path: Path, text: str, code: str, words: list[str]
) -> None:
    templates(tmp_path)
    with pytest.raises(PromptError) as caught:
        files(tmp_path).expand(text)
    assert caught.value.code == code
    for word in words:
        assert word in str(caught.value)


def test_switched_off_by_the_feature_flag(tmp_path: Path) -> None:
    templates(tmp_path)
    f = files(tmp_path, "\n[features]\nprompt_templates = false\n")
    with pytest.raises(PromptError) as caught:
        f.expand("/prompts:hello")
    assert caught.value.code == "prompt_templates_disabled"


async def test_telegram_expands_refuses_and_lists(bot: Factory, tmp_path: Path) -> None:
    templates(tmp_path)
    h = await bot(extra=FLAGS_ON)
    h.model.enqueue(text_reply("reviewed"))

    assert await h.converse('/prompts:review FILE=app.py FOCUS="races"') == "reviewed"
    assert last_text(h.model) == "Review app.py for races.\nCost: $5, app.py again."

    reply = await h.converse("/prompts:review FILE=app.py")
    assert reply.startswith("⚠️ the template review cannot be filled in: no value for FOCUS")
    reply = await h.converse("/prompts:../etc/passwd")
    assert "Templates: hello, review" in reply
    assert len(h.model.requests) == 1  # the refusals sent nothing
    session = h.kernel.agent.sessions.current_session(CONV)
    assert session is not None
    assert len(await h.kernel.store.load_messages(session)) == 2  # one exchange stored

    listing = await h.converse("/prompts")
    assert listing.splitlines() == [
        "Prompt templates (/prompts:NAME KEY=VALUE …):",
        "/prompts:hello — # Say hello",
        "/prompts:review — Review {{FILE}} for $FOCUS.",
    ]
    assert "Unknown command" not in " ".join(h.texts())


async def test_http_process_expands_and_refuses_before_sending(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    templates(tmp_path)
    sc = await sidecar(anthropic_sim, extra=FLAGS_ON)
    anthropic_sim.enqueue(text_reply("hi"))
    status, data = await sc.process("/prompts:hello")
    assert status == 200 and data["reply"] == "hi"
    assert last_text(anthropic_sim) == "# Say hello\nHello there."

    status, data = await sc.process("/prompts:missing")
    assert status == 404 and data["error"]["code"] == "prompt_template_not_found"
    assert "hello, review" in data["error"]["message"]
    status, data = await sc.process("/prompts:review FILE=x FOCUS=y ZED=z")
    assert status == 400 and data["error"]["code"] == "prompt_template_invalid"
    assert len(anthropic_sim.requests) == 1


async def test_console_treats_a_template_as_a_message(
    make_kernel: KernelFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    templates(tmp_path)
    kernel = await make_kernel(anthropic_sim, language="en", extra=FLAGS_ON)
    anthropic_sim.enqueue(text_reply("done"))
    out, err = io.StringIO(), io.StringIO()
    chat = ConsoleChat(kernel, out, err, interactive=False)

    await chat.handle("/prompts:review FILE=a FOCUS=b")
    assert out.getvalue() == "done\n" and err.getvalue() == ""
    assert last_text(anthropic_sim).startswith("Review a for b.")
    assert kernel.agent.sessions.current_session(CONVERSATION) is not None

    await chat.handle("/prompts:review FILE=a")
    assert "no value for FOCUS" in err.getvalue()
    await chat.handle("/prompts")
    assert "/prompts:hello — # Say hello" in out.getvalue()
    assert len(anthropic_sim.requests) == 1
