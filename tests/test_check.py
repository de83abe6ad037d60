"""``kernel check`` as the owner runs it: a real process against the simulators, a real
MCP server and a stand-in CLI; one line per part and the exit code."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from kernel.check import report, routing, shown_url
from kernel.config import Config, load_config
from kernel.core.i18n import set_language
from tests.conftest import SECRET_KEY, kernel_env, spawn_kernel, write_config
from tests.delegate.standins import make_cli
from tests.mcp.conftest import free_port, mcp_toml, stdio_server
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.openai_sim import OpenAISim
from tests.sim.script import Error, text_reply
from tests.sim.telegram_sim import DEFAULT_TOKEN, OWNER, TelegramSim

# A busy machine may take more than the default 2 s to connect even on loopback; what a
# refused or a slow connection looks like does not depend on it.
PATIENT = {"check_connect_timeout": 30.0}


async def check(cwd: Path) -> tuple[int, list[str], str]:
    proc = await spawn_kernel("check", cwd=cwd, env=kernel_env(KERNEL_LANGUAGE="en"))
    out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    return proc.returncode or 0, out.decode().splitlines(), err.decode()


def line(lines: list[str], part: str) -> str:
    return next(x for x in lines if x.split("] ", 1)[-1].startswith(f"{part}:"))


def configure(
    folder: Path, model: AnthropicSim, tg: TelegramSim, token: str, extra: str = ""
) -> None:
    path = write_config(folder, model.base_url, "claude", **PATIENT)
    cli = make_cli(folder / "bin", "claude_code")
    path.write_text(
        path.read_text()
        + f'[telegram]\ntoken = "{token}"\nallowed_user = {OWNER}\napi_base = "{tg.api_base}"\n'
        + f'[cli.claude_code]\ncommand = "{cli}"\n[cli.codex]\ncommand = "no-such-codex"\n'
        + extra
    )


def voice_toml(openai: OpenAISim, ffmpeg: str = "") -> str:
    base = f'api_base = "{openai.base_url}"\napi_key = "sk-voice-0123456789"\n'
    return (
        f'\n[titles]\ntype = "openai_compat"\nmodel = "tiny"\n{base}'
        f"[stt]\n{base}"
        f'[tts]\ntype = "openai"\n{base}' + (f'ffmpeg = "{ffmpeg}"\n' if ffmpeg else "")
    )


@pytest.mark.posix
@pytest.mark.slow
async def test_all_parts_reachable(
    anthropic_sim: AnthropicSim, openai_sim: OpenAISim, tmp_path: Path
) -> None:
    async with TelegramSim() as tg:
        extra = mcp_toml([stdio_server("tools")]) + voice_toml(openai_sim)
        configure(tmp_path, anthropic_sim, tg, DEFAULT_TOKEN, extra)
        anthropic_sim.enqueue(text_reply("pong"))
        openai_sim.enqueue(text_reply("pong"))  # the titles model
        code, lines, err = await check(tmp_path)

    assert code == 0, lines
    assert line(lines, "provider main").startswith("[ok  ]")
    assert "model-a answered" in line(lines, "provider main")
    assert line(lines, "telegram").startswith("[ok  ] telegram: getMe answered: @")
    assert line(lines, "telegram").endswith(
        "; topics off (turn on Threaded Mode in @BotFather for a session per topic)"
    )
    assert line(lines, "mcp tools").startswith("[ok  ] mcp tools: connected, ")
    assert line(lines, "cli claude_code").startswith("[ok  ]")
    assert line(lines, "cli codex").startswith("[warn]")  # not installed: Kernel runs anyway
    assert "no-such-codex" in line(lines, "cli codex")
    assert line(lines, "data_dir").startswith("[ok  ]")
    assert line(lines, "titles").startswith("[ok  ] titles: tiny answered")
    assert line(lines, "stt").startswith("[ok  ] stt: whisper-1 transcribes speech")
    assert line(lines, "tts").startswith("[ok  ] tts: openai speaks (")
    assert line(lines, "ffmpeg").startswith("[ok  ] ffmpeg: ")  # with libopus
    uploads = openai_sim.audio_uploads
    assert len(uploads) == 1 and uploads[0][:4] == b"RIFF"  # a real WAV was sent
    assert line(lines, "memory search").startswith("[ok  ] memory search: FTS5 available")
    assert lines[-1] == "0 failed, 2 warnings"  # codex and gemini are not installed
    assert len(anthropic_sim.requests) == 1
    assert anthropic_sim.requests[0].body["max_tokens"] == 8  # a tiny request, not a chat
    assert SECRET_KEY not in "\n".join(lines) + err


@pytest.mark.posix
@pytest.mark.slow
async def test_broken_parts_are_named_with_the_fix(
    anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    nowhere = {"name": "docs", "type": "http", "url": f"http://127.0.0.1:{free_port()}/mcp"}
    nowhere["connect_timeout"] = 2.0  # type: ignore[assignment]
    async with TelegramSim() as tg, OpenAISim() as openai_sim:
        extra = mcp_toml([nowhere]) + voice_toml(openai_sim, ffmpeg="/nonexistent/ffmpeg")
        configure(tmp_path, anthropic_sim, tg, "999:WRONG-TOKEN", extra)
        anthropic_sim.enqueue(Error(401, "authentication_error", f"invalid x-api-key {SECRET_KEY}"))
        openai_sim.enqueue(Error(500))  # the titles model
        openai_sim.enqueue_transcription(Error(500))
        code, lines, err = await check(tmp_path)

    assert code == 1, lines
    provider = line(lines, "provider main")
    assert provider.startswith("[FAIL]") and "401" in provider and "api_key" in provider
    assert line(lines, "telegram").startswith("[FAIL]")
    assert "token" in line(lines, "telegram").lower()
    assert line(lines, "mcp docs").startswith("[warn] mcp docs: could not connect")
    assert line(lines, "titles").startswith("[warn]")
    assert line(lines, "stt").startswith("[warn]") and "[stt]" in line(lines, "stt")
    assert line(lines, "tts").startswith("[warn]") and "ffmpeg" in line(lines, "tts")
    assert line(lines, "ffmpeg") == (
        "[warn] ffmpeg: [tts] ffmpeg = /nonexistent/ffmpeg is not an executable: replies to "
        "voice will be text only; fix the path, or leave it empty to use ffmpeg on PATH"
    )
    assert lines[-1].startswith("2 failed")
    assert SECRET_KEY not in "\n".join(lines) + err
    assert "WRONG-TOKEN" not in "\n".join(lines) + err


@pytest.mark.slow
async def test_unreachable_provider_is_named_with_the_url_it_tried(tmp_path: Path) -> None:
    """A refused connection is one FAIL line naming the base URL (never the key); the
    time it takes is measured in bench/check.py, not here. A retiring model gets its
    own warn line with the date and the replacement."""
    closed = f"http://127.0.0.1:{free_port()}"
    async with TelegramSim() as tg:
        path = write_config(tmp_path, closed, "claude", **PATIENT)
        path.write_text(
            path.read_text().replace('"model-a"', '"claude-sonnet-4-5"', 1)
            + f'[telegram]\ntoken = "{DEFAULT_TOKEN}"\nallowed_user = {OWNER}\n'
            + f'api_base = "{tg.api_base}"\n'
        )
        code, lines, err = await check(tmp_path)

    assert code == 1, lines
    provider = line(lines, "provider main")
    assert provider == (
        f"[FAIL] provider main: cannot connect to {closed} (Connection refused): "
        "check providers.main.api_base, the network and any firewall"
    )
    model = line(lines, "model claude-sonnet-4-5")
    assert model.startswith("[warn] model claude-sonnet-4-5: ")
    assert "2026-11-30" in model and "claude-sonnet-5-5" in model
    assert SECRET_KEY not in "\n".join(lines) + err


async def test_a_loader_name_kept_in_runtime_toml_is_a_warning(
    tmp_path: Path, anthropic_sim: AnthropicSim
) -> None:
    """Issue 33: a keyless sidecar let anyone keep LD_PRELOAD or PATH in runtime.toml,
    and every child gets them; `kernel check` names them (never their values)."""
    async with TelegramSim() as tg:
        path = write_config(tmp_path, anthropic_sim.base_url, "claude", **PATIENT)
        path.write_text(
            path.read_text()
            + f'[telegram]\ntoken = "{DEFAULT_TOKEN}"\nallowed_user = {OWNER}\n'
            + f'api_base = "{tg.api_base}"\n'
        )
        (tmp_path / "data").mkdir()
        (tmp_path / "data" / "runtime.toml").write_text(
            '[envs]\nLD_PRELOAD = "/tmp/evil.so"\nGREETING = "hi"\n'
        )
        _, lines, _ = await check(tmp_path)
    envs = line(lines, "envs")
    assert envs.startswith("[warn] envs: ") and "LD_PRELOAD" in envs
    assert "GREETING" not in envs and "/tmp/evil.so" not in envs
    assert "kernel env delete" in envs


@pytest.mark.posix
@pytest.mark.slow
async def test_configured_ffmpeg_is_the_one_checked_even_with_spoken_replies_off(
    tmp_path: Path, anthropic_sim: AnthropicSim
) -> None:
    ffmpeg = tmp_path / "tools" / "my-ffmpeg"
    ffmpeg.parent.mkdir()
    ffmpeg.write_text("#!/bin/sh\necho ' A..... libopus              libopus Opus'\n")
    ffmpeg.chmod(0o755)
    async with TelegramSim() as tg:
        # type "openai" without a key: spoken replies are off, [tts] ffmpeg still counts.
        extra = '[tts]\ntype = "openai"\nffmpeg = "tools/my-ffmpeg"\n'
        configure(tmp_path, anthropic_sim, tg, DEFAULT_TOKEN, extra)
        anthropic_sim.enqueue(text_reply("pong"))
        code, lines, err = await check(tmp_path)

    assert line(lines, "ffmpeg") == f"[ok  ] ffmpeg: {ffmpeg}"


def test_a_url_is_shown_without_user_password_or_query() -> None:
    url = "https://me:sk-secret-0123456789@llm.example:8443/v1?key=sk-other-0123456789"
    assert shown_url(url) == "https://llm.example:8443/v1"


ROUTING = """
[providers.spare]
type = "openai_compat"
api_base = "http://127.0.0.1:1/v1"
default_model = "gpt-a"
models = ["gpt-a"]
[providers.other]
type = "openai_compat"
api_base = "http://127.0.0.1:1/v1"
api_key = "sk-other-0123456789abcdef"
enabled = false
default_model = "o"
models = ["o"]
[providers.main.model_options.model-b]
fallbacks = ["main:model-a"]
[[routing.rules]]
name = "cheap"
channel = ["qq"]
primary = "spare"
fallbacks = ["main", "other:o"]
[[routing.rules]]
name = "think"
pattern = "why"
reasoning = "low"
"""


def routing_config(tmp_path: Path, general: str, extra: str = ROUTING) -> Config:
    path = write_config(tmp_path, "http://127.0.0.1:1", "claude")
    text = path.read_text().replace("[gateway]\n", general + "[gateway]\n", 1)
    path.write_text(text + extra)
    config = load_config(path, env=kernel_env(KERNEL_LANGUAGE="en"), require_telegram=False)
    set_language(config.general.language)  # loading returns it; kernel check sets it
    return config


def test_a_chain_or_rule_naming_a_provider_that_cannot_be_called_is_a_warning(
    tmp_path: Path,
) -> None:
    config = routing_config(tmp_path, 'fallbacks = ["spare:gpt-a", "main:model-b"]\n')
    lines = {line.part: line for line in routing(config)}
    assert set(lines) == {"fallbacks general", "rule cheap"}  # main:model-b's chain is fine
    general = lines["fallbacks general"]
    assert general.status == "warn"
    assert general.detail == (
        "general.fallbacks names spare:gpt-a, but spare has no api_key or is switched off, "
        "so it is skipped: set KERNEL_PROVIDER_SPARE_API_KEY (or api_key), or remove it there"
    )
    rule = lines["rule cheap"]
    assert rule.status == "warn" and rule.detail.startswith(
        "routing.rules[0] names spare, other:o, but spare, other has no api_key"
    )
    assert "KERNEL_PROVIDER_SPARE_API_KEY, KERNEL_PROVIDER_OTHER_API_KEY" in rule.detail
    assert "sk-other" not in rule.detail and SECRET_KEY not in rule.detail
    assert report(routing(config))[1] == 0  # warnings only: Kernel runs


def test_chains_that_can_all_be_called_are_one_ok_line(tmp_path: Path) -> None:
    extra = ROUTING.split("[[routing.rules]]")[0].replace(
        "[providers.spare]\n", '[providers.spare]\napi_key = "sk-spare-0123456789"\n'
    )
    extra += '[[routing.rules]]\nname = "think"\npattern = "why"\nreasoning = "low"\n'
    config = routing_config(tmp_path, 'fallbacks = ["spare"]\n', extra)
    [line] = routing(config)
    assert (line.part, line.status) == ("routing", "ok")
    assert line.detail == (
        "every model named in the fallback chains (2) and routing rules (1) can be called"
    )
    # Nothing configured: nothing to say.
    plain = load_config(
        write_config(tmp_path, "http://127.0.0.1:1", "claude"),
        env=kernel_env(),
        require_telegram=False,
    )
    assert routing(plain) == []


def test_a_rules_thinking_budget_over_a_fallbacks_max_tokens_is_a_warning(
    tmp_path: Path,
) -> None:
    """The load checks a rule's budget against its primary; its fallbacks get it too."""

    def claude(name: str, ceiling: int) -> str:
        return (
            f'[providers.{name}]\ntype = "claude"\napi_base = "http://127.0.0.1:1"\n'
            f'api_key = "sk-{name}-0123456789"\nmax_tokens = {ceiling}\ndefault_model = "m"\n'
        )

    plain = (
        '[providers.plain]\ntype = "openai_compat"\napi_base = "http://127.0.0.1:1/v1"\n'
        'api_key = "sk-plain-0123456789"\nmax_tokens = 100\ndefault_model = "p"\n'
    )
    rules = (
        '[[routing.rules]]\nname = "own chain"\nprimary = "big"\nreasoning = 2000\n'
        'fallbacks = ["small", "plain"]\n'
        '[[routing.rules]]\nname = "usual chain"\nprimary = "big:m"\nreasoning = 4096\n'
        '[[routing.rules]]\nname = "fits"\nprimary = "big"\nreasoning = 1500\n'
        'fallbacks = ["small"]\n'
    )
    providers = claude("big", 16384) + claude("small", 2000) + plain
    # main's max_tokens is 1024 (write_config); big's chain is general.fallbacks.
    general = 'fallbacks = ["small:m", "plain", "main"]\n'
    config = routing_config(tmp_path, general, providers + rules)
    warned = {line.part: line for line in routing(config) if "thinking budget" in line.detail}
    assert set(warned) == {"rule own chain", "rule usual chain"}
    assert warned["rule own chain"].detail.startswith(
        "routing.rules[0].reasoning = 2000 is not below the max_tokens of small: "
    )  # plain declares no reasoning: the budget is never sent to it
    assert "max_tokens of small, main: " in warned["rule usual chain"].detail
    assert all(line.status == "warn" for line in warned.values())


@pytest.mark.posix
@pytest.mark.slow
async def test_a_provider_with_several_keys_says_how_many(
    anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    async with TelegramSim() as tg:
        configure(tmp_path, anthropic_sim, tg, DEFAULT_TOKEN)
        anthropic_sim.enqueue(text_reply("pong"))
        second, third = "sk-second-0123456789abcdef", "sk-third-0123456789abcdef"
        env = kernel_env(
            KERNEL_LANGUAGE="en", KERNEL_PROVIDER_MAIN_API_KEYS=f"{second},{third},{SECRET_KEY}"
        )
        proc = await spawn_kernel("check", cwd=tmp_path, env=env)
        out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    lines = out.decode().splitlines()
    provider = line(lines, "provider main")
    assert provider.startswith("[ok  ] provider main: model-a answered at ")
    assert provider.endswith(", 3 keys")  # the env's copy of api_key counted once
    text = out.decode() + err.decode()
    assert not any(key in text for key in (SECRET_KEY, second, third))


@pytest.mark.slow
async def test_edge_speech_without_the_voice_extra_names_the_install_command(
    tmp_path: Path, anthropic_sim: AnthropicSim
) -> None:
    # An install without ``--extra voice``: edge-tts cannot be imported in the process.
    hide = tmp_path / "hide"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text('import sys\nsys.modules["edge_tts"] = None\n')
    path = write_config(tmp_path, anthropic_sim.base_url, "claude", **PATIENT)
    path.write_text(path.read_text() + '[tts]\ntype = "edge"\n')
    env = kernel_env(KERNEL_LANGUAGE="en", PYTHONPATH=str(hide))
    proc = await spawn_kernel("check", cwd=tmp_path, env=env)
    out, _ = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert line(out.decode().splitlines(), "tts") == (
        '[warn] tts: [tts] type = "edge" needs the voice extra (edge-tts): run uv sync '
        "--extra voice in Kernel's folder (pip installs: pip install "
        "'kernel-assistant[voice]') and restart Kernel; until then replies to voice are "
        "text only"
    )
