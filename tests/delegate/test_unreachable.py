"""A delegated CLI that cannot reach its API: its retries and API errors are trouble, not
progress; the no-progress limit ends the run early; the model gets a summary, never the
raw stream. The stand-ins print the shapes recorded from claude 2.1.197, codex-cli
0.169.0 and gemini-cli 0.61.0 pointed at a closed port."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.delegate.conftest import ConfigFactory, cli_section, delegator_for

pytestmark = pytest.mark.posix  # stand-in CLIs: #!python scripts made executable

# What each CLI says when its API is unreachable (recorded; see standins.py).
UNREACHABLE = {
    "claude_code": "no HTTP response (unknown)",
    "codex": "Connection failed: error sending request",
    "gemini": "exception TypeError: fetch failed sending request",
}
NAMES = {"claude_code": "Claude Code", "codex": "Codex", "gemini": "Gemini CLI"}


@pytest.mark.parametrize("cli", ["claude_code", "codex", "gemini"])
async def test_retrying_forever_ends_early_with_the_reason_and_a_summary(
    cli: str,
    bin_dir: dict[str, Path],
    make_config: ConfigFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("STANDIN_MODE", "unreachable")  # retries until killed
    monkeypatch.setenv("STANDIN_DELAY", "0.05")
    config = make_config(cli_section(cli, command=str(bin_dir[cli]), no_progress_timeout=0.5))
    delegator = delegator_for(config)

    result = await delegator.delegate("say hello", cli=cli, conversation="c")

    assert result["ok"] is False
    latest = delegator.latest("c")
    assert latest is not None and latest.outcome == "no_progress"  # not the 600 s timeout
    assert latest.trouble is not None and latest.trouble.attempt >= 1
    reason = result["reason"]
    assert reason.startswith(f"{NAMES[cli]} could not reach its API: {UNREACHABLE[cli]}")
    assert "without progress" in reason
    assert result["output"].startswith(f"[Kernel] {reason}")
    assert '{"type"' not in result["output"]  # a summary, not the raw JSONL stream
    assert result["output_path"] in result["output"]
    assert result["version"]  # recorded with the delegation


@pytest.mark.parametrize(
    ("cli", "error"),
    [
        ("claude_code", "API Error: Unable to connect to API (ConnectionRefused) (3 retries)"),
        ("codex", "unexpected status 529 <unknown status code>: simulated 529"),
        ("gemini", "[API Error: exception TypeError: fetch failed sending request] (3 retries)"),
    ],
)
async def test_a_cli_that_gives_up_is_summarised_for_the_model(
    cli: str,
    error: str,
    bin_dir: dict[str, Path],
    make_config: ConfigFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("STANDIN_MODE", "unreachable")
    monkeypatch.setenv("STANDIN_RETRIES", "3")
    config = make_config(cli_section(cli, command=str(bin_dir[cli])))

    result = await delegator_for(config).delegate("say hello", cli=cli, conversation="c")

    assert result["ok"] is False and result["exit_code"] == 1
    assert result["reason"].startswith(f"{NAMES[cli]} could not reach its API: ")
    assert error in result["reason"]
    assert '"subtype"' not in result["output"] and '"type"' not in result["output"]


async def test_gemini_exit_0_with_an_error_result_is_not_ok_and_says_why(
    bin_dir: dict[str, Path], make_config: ConfigFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STANDIN_MODE", "unreachable")
    monkeypatch.setenv("STANDIN_RETRIES", "2")
    monkeypatch.setenv("STANDIN_EXIT", "0")
    config = make_config(cli_section("gemini", command=str(bin_dir["gemini"])))

    result = await delegator_for(config).delegate("say hello", cli="gemini", conversation="c")

    assert result["ok"] is False and result["exit_code"] == 0
    assert "exited with code 0, but its completion event reported a failure" in result["reason"]


async def test_progress_after_retries_clears_the_trouble_and_the_run_completes(
    bin_dir: dict[str, Path], make_config: ConfigFactory
) -> None:
    """A retry that succeeds is not the end: real progress resets the no-progress clock."""
    from kernel.delegate.formats import ClaudeStream

    stream = ClaudeStream()
    retry = '{"type":"system","subtype":"api_retry","attempt":2,"max_retries":10,'
    retry += '"retry_delay_ms":1160.2,"error_status":529,"error":"overloaded"}'
    assert stream.feed(retry) == []  # trouble, not progress
    assert stream.trouble is not None
    assert (stream.trouble.error, stream.trouble.attempt, stream.trouble.max_attempts) == (
        "HTTP 529 overloaded",
        2,
        10,
    )
    text = '{"type":"assistant","message":{"content":[{"type":"text","text":"Working."}]}}'
    assert stream.feed(text) == ["Working."]


async def test_an_api_that_recovers_is_not_ended_and_leaves_no_trouble_behind(
    bin_dir: dict[str, Path], make_config: ConfigFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STANDIN_MODE", "retry_then_ok")
    config = make_config(cli_section("claude_code", command=str(bin_dir["claude_code"])))
    delegator = delegator_for(config)

    result = await delegator.delegate("say hello", conversation="c")

    assert result["ok"] is True and result["reason"] is None
    assert result["output"] == "Done: say hello"
    latest = delegator.latest("c")
    assert latest is not None and latest.outcome == "ok" and latest.trouble is None
