"""Prompt modes (issue 20, point 4; seed 000): a session's ``default`` / ``codex`` /
``claude`` mode, persisted in its meta from ``biz_params.prompt_mode`` or ``/mode``;
codex and claude built from the owner's files under ``prompts/`` (Kernel ships none),
``500 *_prompt_unavailable`` naming a required file missing or empty (nothing stored or
sent); ``mode_variant`` and ``layer_hash`` in GET /agent/system-layers; collaboration
modes only under codex (400 otherwise), where only ``plan`` offers ``ask_user``
(Codex's ``request_user_input``)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from kernel.agent.agent import SessionKey, UserInput
from kernel.agent.prompt_modes import CLAUDE_REQUIRED, ModeChoice
from tests.gateway.conftest import SidecarFactory
from tests.prompts.conftest import FLAGS_ON
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.context import system_of
from tests.sim.script import Reply, Text, text_reply, tool_reply
from tests.telegram.conftest import CONV, Factory

CORE = Path("prompts/codex/codex-rs/core")
TEMPLATES = CORE / "templates"
CLAUDE = Path("prompts/claude/claude-code-reverse")


def put(base: Path, relative: Path | str, text: str) -> Path:
    path = base / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def codex_files(base: Path) -> None:
    put(base, CORE / "prompt.md", "You are Codex, a coding agent.\n")
    put(base, "prompts/AGENTS.md", "Local policy: never push to main.\n")


def claude_files(base: Path) -> None:
    for name, stem in CLAUDE_REQUIRED:
        put(base, CLAUDE / f"results/prompts/{stem}.prompt.md", f"claude layer {name}\n")


def tool_names(sim: AnthropicSim) -> list[str]:
    return [tool["name"] for tool in sim.requests[-1].body.get("tools", [])]


def layer_names(data: dict[str, Any]) -> list[str]:
    return [layer["name"] for layer in data["layers"] if layer["role"] == "system"]


async def meta_of(sc: Any, session_id: str = "session-default") -> dict[str, Any]:
    status, data, _ = await sc.call("GET", "/chats")
    assert status == 200
    chats = [c for c in data["chats"] if c["session_id"] == session_id]
    assert len(chats) == 1
    meta = chats[0]["meta"]
    assert isinstance(meta, dict)
    return meta


# ----- required files: missing, empty, present -------------------------------------------


@pytest.mark.parametrize("empty", [False, True])
async def test_codex_without_its_base_file_is_a_500_naming_it_and_nothing_is_sent(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, tmp_path: Path, empty: bool
) -> None:
    if empty:
        put(tmp_path, CORE / "prompt.md", " \n\n")
    sc = await sidecar(anthropic_sim, language="en", extra=FLAGS_ON)
    status, data = await sc.process("hi", biz_params={"prompt_mode": "codex"})
    assert status == 500 and data["error"]["code"] == "codex_prompt_unavailable"
    message = data["error"]["message"]
    assert message.startswith("codex prompt is unavailable")
    assert "prompts/codex/codex-rs/core/prompt.md" in message and "/mode default" in message
    assert data["error"]["details"]["missing"] == ["prompts/codex/codex-rs/core/prompt.md"]
    assert anthropic_sim.requests == []
    session = (await sc.kernel.store.list_sessions())[0]
    assert await sc.kernel.store.load_messages(session.id) == []  # nothing stored
    status, data, _ = await sc.call("GET", "/agent/system-layers?prompt_mode=codex")
    assert status == 500 and data["error"]["code"] == "codex_prompt_unavailable"
    assert "prompt_mode" not in await meta_of(sc)  # a mode it cannot run is not kept
    anthropic_sim.enqueue(text_reply("still default"))
    assert (await sc.process("hi"))[1]["reply"] == "still default"


async def test_claude_needs_all_four_files_and_names_the_missing_one(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    claude_files(tmp_path)
    workflow = CLAUDE / "results/prompts/system-workflow.prompt.md"
    (tmp_path / workflow).write_text("")
    sc = await sidecar(anthropic_sim, language="en", extra=FLAGS_ON)
    status, data = await sc.process("hi", biz_params={"prompt_mode": "claude"})
    assert status == 500 and data["error"]["code"] == "claude_prompt_unavailable"
    assert data["error"]["details"]["missing"] == [str(workflow)]
    assert anthropic_sim.requests == []

    put(tmp_path, workflow, "claude layer workflow, now written\n")
    put(tmp_path, CLAUDE / "tool-adapter-nextai.md", "Bash is delegate_to_cli.\n")
    anthropic_sim.enqueue(text_reply("ok"), text_reply("still claude"))
    status, data = await sc.process("hi", biz_params={"prompt_mode": "claude"})
    assert status == 200 and data["reply"] == "ok"
    assert (await sc.process("again"))[1]["reply"] == "still claude"  # the chat's mode now
    system = system_of(anthropic_sim.requests[-1])
    assert system.startswith("claude layer claude_identity_system")
    assert "now written" in system and system.endswith("Bash is delegate_to_cli.")
    assert "Kernel" not in system  # no SOUL.md, no Kernel tool guide: claude's layers only
    _, layers, _ = await sc.call("GET", "/agent/system-layers?prompt_mode=claude")
    assert layers["mode_variant"] == "claude_v1"
    assert layer_names(layers) == [n for n, _ in CLAUDE_REQUIRED] + [
        "claude_nextai_tool_adapter_system"
    ]
    assert all(len(layer["layer_hash"]) == 16 for layer in layers["layers"])


async def test_codex_v1_is_its_base_and_agents_md_persisted_for_the_chat(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    codex_files(tmp_path)
    (tmp_path / "SOUL.md").write_text("You are Kay.\n")
    sc = await sidecar(anthropic_sim, language="en", extra=FLAGS_ON)
    anthropic_sim.enqueue(text_reply("one"), text_reply("two"), text_reply("three"))

    assert (await sc.process("hi", biz_params={"prompt_mode": "codex"}))[0] == 200
    system = system_of(anthropic_sim.requests[-1])
    assert system == "You are Codex, a coding agent.\n\nLocal policy: never push to main."
    assert (await meta_of(sc))["prompt_mode"] == "codex"
    assert "memory_add" in tool_names(anthropic_sim)  # Kernel's tools are still offered
    assert "ask_user" not in tool_names(anthropic_sim)  # codex default: no asking

    assert (await sc.process("again"))[0] == 200  # no prompt_mode: the chat's
    assert system_of(anthropic_sim.requests[-1]).startswith("You are Codex")
    assert (await sc.process("back", biz_params={"prompt_mode": "default"}))[0] == 200
    assert system_of(anthropic_sim.requests[-1]).startswith("You are Kay.")
    assert "ask_user" in tool_names(anthropic_sim)

    _, data, _ = await sc.call("GET", "/agent/system-layers?prompt_mode=codex")
    assert data["mode_variant"] == "codex_v1" and data["prompt_mode"] == "codex"
    assert layer_names(data) == ["codex_base_system", "codex_local_policy_system"]
    assert [layer["role"] for layer in data["layers"]][-1] == "user"  # the time rides along
    _, default, _ = await sc.call("GET", "/agent/system-layers")
    assert default["mode_variant"] == "default" and layer_names(default)[0] == "soul"


# ----- codex v2 ---------------------------------------------------------------------------


def codex_v2_files(base: Path) -> None:
    codex_files(base)
    put(base, TEMPLATES / "agents/orchestrator.md", "You are Codex, a coding agent.\n")  # a repeat
    put(
        base,
        TEMPLATES / "model_instructions/gpt-5.2-codex_instructions_template.md",
        "Model instructions.\n\n{{ personality }}\n",
    )
    put(base, TEMPLATES / "personalities/gpt-5.2-codex_pragmatic.md", "Be pragmatic.\n")
    for mode in ("default", "plan"):
        put(
            base,
            TEMPLATES / f"collaboration_mode/{mode}.md",
            f"# Mode {mode}\nKnown: {{{{KNOWN_MODE_NAMES}}}}. "
            "Ask: {{REQUEST_USER_INPUT_AVAILABLE}}. Keep {{UNKNOWN}}.\n",
        )


async def test_codex_v2_layers_in_order_rendered_and_deduplicated(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    codex_v2_files(tmp_path)
    sc = await sidecar(
        anthropic_sim,
        language="en",
        extra="\n[features]\nprompt_context_introspect = true\ncodex_mode_v2 = true\n",
    )
    _, data, _ = await sc.call("GET", "/agent/system-layers?prompt_mode=codex")
    assert data["mode_variant"] == "codex_v2" and data["collaboration_mode"] == "default"
    assert layer_names(data) == [
        "codex_base_system",  # the orchestrator repeated it word for word: dropped
        "codex_model_instructions_system",
        "codex_collaboration_default_system",
        "codex_local_policy_system",
        "codex_tool_guide_system",  # no prompts/ai-tools.md: Kernel's own guide
    ]
    previews = {layer["name"]: layer["content_preview"] for layer in data["layers"]}
    assert previews["codex_model_instructions_system"] == "Model instructions.\n\nBe pragmatic."
    assert previews["codex_collaboration_default_system"] == (
        "# Mode default\nKnown: Default, Plan, Execute, Pair Programming. Ask: false. "
        "Keep {{UNKNOWN}}."
    )
    assert previews["codex_tool_guide_system"].startswith("## Tools")  # Kernel's own guide

    _, plan, _ = await sc.call(
        "GET", "/agent/system-layers?prompt_mode=codex&collaboration_event=set_plan"
    )
    previews = {layer["name"]: layer["content_preview"] for layer in plan["layers"]}
    assert plan["collaboration_mode"] == "plan"
    assert previews["codex_collaboration_default_system"].startswith("# Mode plan")
    assert "Ask: true." in previews["codex_collaboration_default_system"]

    put(tmp_path, "prompts/ai-tools.md", "Use the tools well.\n")
    put(tmp_path, CORE / "review_prompt.md", "Review the diff.\n")
    query = "prompt_mode=codex&task_command=review"
    _, review, _ = await sc.call("GET", f"/agent/system-layers?{query}")
    names = layer_names(review)
    assert names[-2:] == ["codex_tool_guide_system", "codex_task_review_system"]
    assert review["layers"][names.index("codex_tool_guide_system")]["source"] == (
        "prompts/ai-tools.md"
    )


async def test_codex_v2_catalog_source_and_the_shadow_compare_log(
    sidecar: SidecarFactory,
    anthropic_sim: AnthropicSim,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    codex_v2_files(tmp_path)
    catalog = {
        "models": [
            {
                "slug": "gpt-5.2-codex",
                "base_instructions": "Catalog base.",
                "model_messages": {
                    "instructions_template": "{{ base_instructions }}\n\n{{ personality }}",
                    "instructions_variables": {"personality_pragmatic": "Catalog pragmatic."},
                },
            }
        ]
    }
    put(tmp_path, "prompts/codex/models.runtime.json", json.dumps(catalog))
    features = (
        "\n[features]\nprompt_context_introspect = true\ncodex_mode_v2 = true\n"
        'codex_prompt_source = "catalog"\n'
    )
    sc = await sidecar(anthropic_sim, language="en", extra=features)
    _, data, _ = await sc.call("GET", "/agent/system-layers?prompt_mode=codex")
    layer = next(x for x in data["layers"] if x["name"] == "codex_model_instructions_system")
    assert layer["content_preview"] == "Catalog base.\n\nCatalog pragmatic."
    assert layer["source"] == "prompts/codex/models.runtime.json#gpt-5.2-codex"
    _, runtime, _ = await sc.call("GET", "/runtime-config")
    assert runtime["codex_prompt_source"] == "catalog"

    shadow = (
        "\n[features]\nprompt_context_introspect = true\ncodex_mode_v2 = true\n"
        "codex_prompt_shadow_compare = true\n"
    )
    sc2 = await sidecar(anthropic_sim, language="en", extra=shadow)
    with caplog.at_level(logging.INFO, logger="kernel.agent.prompt_modes"):
        _, data, _ = await sc2.call("GET", "/agent/system-layers?prompt_mode=codex")
    layer = next(x for x in data["layers"] if x["name"] == "codex_model_instructions_system")
    assert layer["content_preview"] == "Model instructions.\n\nBe pragmatic."  # the file's
    diffs = [r.getMessage() for r in caplog.records if "codex_prompt_shadow_diff" in r.getMessage()]
    assert len(diffs) == 1 and "diff_reason=content" in diffs[0]


# ----- collaboration modes ----------------------------------------------------------------


async def test_collaboration_only_under_codex_and_plan_offers_ask_user(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    codex_files(tmp_path)
    sc = await sidecar(anthropic_sim, language="en", extra=FLAGS_ON)
    refused = [
        {"collaboration_mode": "plan"},
        {"collaboration_event": "set_plan"},
        {"collaboration": {"mode": "plan"}},
        {"prompt_mode": "claude", "collaboration": {"event": "set_execute"}},
    ]
    for biz in refused:
        status, data = await sc.process("hi", biz_params=biz)
        assert status == 400, biz
        assert data["error"]["code"] == "invalid_request"
        assert data["error"]["message"].startswith(
            "collaboration mode is only supported when prompt_mode=codex"
        )
    assert anthropic_sim.requests == []

    bad = [
        ({"prompt_mode": "codex", "collaboration_mode": "Plan!"}, "invalid collaboration_mode"),
        ({"prompt_mode": "codex", "collaboration_event": "plan"}, "invalid collaboration_event"),
        ({"prompt_mode": "codex", "collaboration": {"event": 3}}, "invalid collaboration_event"),
        ({"prompt_mode": 7}, "invalid prompt_mode"),
    ]
    for biz, words in bad:
        status, data = await sc.process("hi", biz_params=biz)
        assert status == 400 and data["error"]["message"].startswith(words), biz
    assert anthropic_sim.requests == []

    anthropic_sim.enqueue(text_reply("planning"), text_reply("doing"))
    biz = {"prompt_mode": "codex", "collaboration": {"event": "set_plan"}}
    assert (await sc.process("plan it", biz_params=biz))[0] == 200
    assert "ask_user" in tool_names(anthropic_sim)
    meta = await meta_of(sc)
    assert meta["collaboration_mode"] == "plan"
    assert meta["collaboration_last_event"] == "set_plan"
    assert meta["collaboration_event_source"] == "biz_params.collaboration.event"
    assert meta["collaboration_updated_at"]
    # the chat is codex now: a collaboration mode alone is accepted; an event wins
    biz = {"collaboration_mode": "plan", "collaboration_event": "set_execute"}
    assert (await sc.process("do it", biz_params=biz))[0] == 200
    assert "ask_user" not in tool_names(anthropic_sim)
    assert (await meta_of(sc))["collaboration_mode"] == "execute"


async def test_ask_user_called_outside_plan_fails_and_the_turn_goes_on(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    codex_files(tmp_path)
    sc = await sidecar(anthropic_sim, language="en", extra=FLAGS_ON)
    anthropic_sim.enqueue(
        tool_reply("ask_user", {"question": "Which file?", "options": ["a", "b"]}),
        text_reply("I will pick a."),
    )
    status, data = await sc.process("edit", biz_params={"prompt_mode": "codex"})
    assert status == 200 and data["reply"] == "I will pick a."
    results = [
        block
        for block in anthropic_sim.requests[-1].body["messages"][-1]["content"]
        if block.get("type") == "tool_result"
    ]
    assert len(results) == 1 and results[0].get("is_error") is True
    assert "only plan may ask" in json.dumps(results[0]["content"])
    assert not any(e["type"] == "ask_user" for e in data["events"])


# ----- GET /agent/system-layers -----------------------------------------------------------


async def test_system_layers_parameters_are_checked_and_used_under_codex_only(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    codex_files(tmp_path)
    sc = await sidecar(anthropic_sim, language="en", extra=FLAGS_ON)
    for query, words in [
        ("prompt_mode=codex&task_command=deploy", "invalid task_command"),
        ("prompt_mode=codex&collaboration_mode=x", "invalid collaboration_mode"),
        ("prompt_mode=codex&collaboration_event=x", "invalid collaboration_event"),
        ("prompt_mode=", "invalid prompt_mode"),
    ]:
        status, data, _ = await sc.call("GET", f"/agent/system-layers?{query}")
        assert status == 400 and data["error"]["message"].startswith(words), query
    # checked whatever the mode (the published schema types them), used under codex only
    status, data, _ = await sc.call("GET", "/agent/system-layers?task_command=deploy")
    assert status == 400
    query = "task_command=review&collaboration_event=set_plan"
    status, data, _ = await sc.call("GET", f"/agent/system-layers?{query}")
    assert status == 200 and data["mode_variant"] == "default"
    assert data["collaboration_mode"] is None and "codex_task_review_system" not in str(data)

    status, data, _ = await sc.call("GET", "/agent/system-layers?session_id=nobody")
    assert status == 404
    anthropic_sim.enqueue(text_reply("ok"))
    await sc.process("hi", session_id="s1", biz_params={"prompt_mode": "codex"})
    status, data, _ = await sc.call("GET", "/agent/system-layers?session_id=s1")
    assert status == 200 and data["mode_variant"] == "codex_v1"  # the chat's mode


def test_a_mode_read_from_meta_is_lenient() -> None:
    assert ModeChoice.of_meta({"prompt_mode": "codex", "collaboration_mode": "plan"}).asks
    junk = ModeChoice.of_meta({"prompt_mode": ["x"], "collaboration_mode": {"a": 1}})
    assert junk == ModeChoice()
    assert not ModeChoice("codex").asks and ModeChoice("claude").asks


# ----- /mode in Telegram ------------------------------------------------------------------


async def test_telegram_mode_refuses_missing_files_switches_and_new_sessions_keep_it(
    bot: Factory, tmp_path: Path
) -> None:
    h = await bot(extra=FLAGS_ON)
    reply = await h.converse("/mode codex")
    assert "codex prompt is unavailable" in reply and "prompts/codex/codex-rs/core" in reply
    assert h.model.requests == []
    reply = await h.converse("/mode turbo")
    assert "There is no turbo mode" in reply

    codex_files(tmp_path)
    assert await h.converse("/mode codex") == (
        "Switched to the codex prompt mode (codex_v1), for this session and new ones"
    )
    h.model.enqueue(text_reply("codex here"), text_reply("still codex"), text_reply("kay"))
    assert await h.converse("hi") == "codex here"
    assert system_of(h.model.requests[-1]).startswith("You are Codex")
    session = h.kernel.agent.sessions.current_session(CONV)
    await h.converse("/new")
    assert await h.converse("hello") == "still codex"
    assert h.kernel.agent.sessions.current_session(CONV) != session
    assert system_of(h.model.requests[-1]).startswith("You are Codex")
    assert (await h.converse("/mode")).startswith("Prompt mode: codex (codex_v1), collaboration")

    assert "default" in await h.converse("/mode default")
    assert await h.converse("hi") == "kay"
    assert not system_of(h.model.requests[-1]).startswith("You are Codex")
    assert "Unknown command" not in " ".join(h.texts())


@pytest.mark.parametrize(
    "catalog",
    [
        '{"models": 5}',
        "7",
        '[{"slug": ["x"]}]',
        '{"models": [{"slug": "gpt-5.2-codex", "model_messages": "oops"}]}',
        '{"models": [{"slug": "gpt-5.2-codex", "model_messages":'
        ' {"instructions_variables": [1], "instructions_template": 3}}]}',
        "[" * 200_000,
        "not json",
    ],
)
async def test_a_catalog_of_the_wrong_shape_is_skipped_not_an_error(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, tmp_path: Path, catalog: str
) -> None:
    codex_v2_files(tmp_path)
    put(tmp_path, "prompts/codex/models.runtime.json", catalog)
    for source in ('codex_prompt_source = "catalog"', "codex_prompt_shadow_compare = true"):
        extra = f"\n[features]\nprompt_context_introspect = true\ncodex_mode_v2 = true\n{source}\n"
        sc = await sidecar(anthropic_sim, language="en", extra=extra)
        status, data, _ = await sc.call("GET", "/agent/system-layers?prompt_mode=codex")
        assert status == 200, data
        assert layer_names(data)[0] == "codex_base_system"
        anthropic_sim.enqueue(text_reply("ok"))
        status, data = await sc.process("hi", biz_params={"prompt_mode": "codex"})
        assert status == 200 and data["reply"] == "ok"


async def test_a_mode_asked_while_the_chat_is_busy_is_not_kept(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    claude_files(tmp_path)
    sc = await sidecar(anthropic_sim, language="en", extra=FLAGS_ON, gateway={"queue_timeout": 0.5})
    anthropic_sim.enqueue(Reply(Text("slow", chunks=["sl", "ow"]), stall_after=1))
    sc.kernel.agent.start_turn(
        (
            await sc.kernel.agent.sessions.open_session(SessionKey("console", "demo-user", "s1"))
        ).conversation,
        UserInput("first"),
    )
    status, data = await sc.process("second", session_id="s1", biz_params={"prompt_mode": "claude"})
    assert status == 409 and data["error"]["code"] == "session_busy"
    assert "prompt_mode" not in await meta_of(sc, "s1")
