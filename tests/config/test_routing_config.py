"""Issue 17 configuration: fallbacks, reasoning, model_options, [[routing.rules]] and
api_keys — every refusal names the key and the fix, every key stays secret, and the
example's commented rules are a configuration that loads."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kernel.config import Config, load_config, parse_ref
from kernel.config.secrets import masked_view, secrets_of
from kernel.core.errors import ConfigError
from kernel.core.redact import redact_text
from kernel.routing import Facts, Health, Router

REPO = Path(__file__).resolve().parents[2]
KEY = "sk-ant-0123456789abcdef"
ENV = {"KERNEL_PROVIDER_ANTHROPIC_API_KEY": KEY, "KERNEL_LANGUAGE": "en"}
CLAUDE = (
    '[providers.anthropic]\ntype = "claude"\nmax_tokens = 4096\n'
    'default_model = "claude-a"\nmodels = ["claude-a", "claude-b"]\n'
    'aliases = { fast = "claude-b" }\n'
)
LOCAL = (
    '[providers.local]\ntype = "openai_compat"\napi_base = "http://127.0.0.1:1/v1"\n'
    'api_key = "sk-local-0123456789abcdef"\ndefault_model = "qwen"\nmodels = ["qwen", "llama"]\n'
)


def load(tmp_path: Path, text: str, env: dict[str, str] | None = None) -> Config:
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    return load_config(path, env=env or ENV, require_telegram=False)


def refused(tmp_path: Path, text: str, env: dict[str, str] | None = None) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load(tmp_path, text, env)
    message = str(info.value)
    assert "\n" not in message and info.value.key is not None
    assert message.startswith(info.value.key)  # the key comes first
    for value in (env or ENV).values():
        if value.startswith("sk-"):
            assert value not in message
    return info.value


# ----- references --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("section", "key"),
    [
        ('[general]\nfallbacks = ["{ref}"]\n', "general.fallbacks[0]"),
        ('[providers.local]\nfallbacks = ["local", "{ref}"]\n', "providers.local.fallbacks[1]"),
        (
            '[providers.anthropic.model_options.claude-b]\nfallbacks = ["{ref}"]\n',
            "providers.anthropic.model_options.claude-b.fallbacks[0]",
        ),
        ('[[routing.rules]]\nname = "r"\nprimary = "{ref}"\n', "routing.rules[0].primary"),
        (
            '[[routing.rules]]\nname = "r"\nfallbacks = ["local:qwen", "{ref}"]\n',
            "routing.rules[0].fallbacks[1]",
        ),
    ],
)
def test_a_reference_to_an_unknown_provider_or_model_is_refused_naming_the_fix(
    tmp_path: Path, section: str, key: str
) -> None:
    def text(ref: str) -> str:
        # LOCAL's own table is written once, whichever section adds to it.
        extra = section.format(ref=ref)
        if extra.startswith("[providers.local]"):
            return CLAUDE + LOCAL + extra.split("\n", 1)[1]
        return CLAUDE + LOCAL + extra

    error = refused(tmp_path, text("nowhere:qwen"))
    assert error.key == key
    assert "'nowhere:qwen'" in str(error) and "anthropic, local" in str(error)
    assert "provider:model" in str(error)  # how a reference is written

    error = refused(tmp_path, text("local:gpt-9"))
    assert error.key == key
    assert "'local:gpt-9'" in str(error) and "qwen, llama" in str(error)

    for ok in ("anthropic:fast", "anthropic", "local:llama", " local : qwen "):
        load(tmp_path, text(ok))  # an alias, a provider's default model, spaces


def test_a_model_options_table_must_name_one_of_the_providers_models(tmp_path: Path) -> None:
    error = refused(
        tmp_path, CLAUDE + '[providers.anthropic.model_options.zz]\nreasoning = "low"\n'
    )
    assert error.key == "providers.anthropic.model_options.zz"
    assert "claude-a, claude-b" in str(error)


def test_a_model_options_table_named_after_an_alias_is_refused_naming_the_model(
    tmp_path: Path,
) -> None:
    # The router looks a model's options up by its own name: under an alias they would
    # silently never apply.
    error = refused(
        tmp_path, CLAUDE + '[providers.anthropic.model_options.fast]\nreasoning = "low"\n'
    )
    assert error.key == "providers.anthropic.model_options.fast"
    assert 'model_options."claude-b"' in str(error) and "alias" in str(error)


def test_references_split_at_the_first_colon() -> None:
    assert parse_ref("ollama:qwen2.5:7b") == ("ollama", "qwen2.5:7b")
    assert parse_ref("local") == ("local", "")


# ----- reasoning ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "key"),
    [
        ('reasoning = "high"\n', "providers.local.reasoning"),
        (
            "[providers.local.model_options.llama]\nreasoning = 2048\n",
            "providers.local.model_options.llama.reasoning",
        ),
    ],
)
def test_reasoning_on_an_openai_compatible_provider_needs_the_capability(
    tmp_path: Path, extra: str, key: str
) -> None:
    error = refused(tmp_path, CLAUDE + LOCAL + extra)
    assert error.key == key
    assert 'add "reasoning" to providers.local.capabilities' in str(error)
    listed = 'capabilities = ["stream", "tool_call", "reasoning"]\n'
    config = load(tmp_path, CLAUDE + LOCAL + listed + extra)
    local = config.providers["local"]
    assert local.declares("reasoning")
    assert local.reasoning == "high" or local.model_options["llama"].reasoning == 2048


def test_a_rules_reasoning_is_checked_against_its_primarys_provider(tmp_path: Path) -> None:
    rule = '[[routing.rules]]\nname = "deep"\nprimary = "local:qwen"\nreasoning = "medium"\n'
    error = refused(tmp_path, CLAUDE + LOCAL + rule)
    assert error.key == "routing.rules[0].reasoning" and "providers.local.capabilities" in str(
        error
    )
    # Without a primary the rule keeps the usual model: the default provider is checked.
    text = CLAUDE + LOCAL + '[general]\ndefault_provider = "local"\n'
    no_primary = '[[routing.rules]]\nname = "deep"\nreasoning = "medium"\n'
    assert refused(tmp_path, text + no_primary).key == "routing.rules[0].reasoning"
    load(tmp_path, CLAUDE + LOCAL + no_primary)  # the default provider is claude


def test_claude_declares_reasoning_by_default_and_off_needs_nothing(tmp_path: Path) -> None:
    config = load(tmp_path, CLAUDE + 'reasoning = "high"\n' + LOCAL + 'reasoning = "off"\n')
    assert config.providers["anthropic"].reasoning == "high"
    assert config.providers["local"].reasoning == "off"
    narrowed = CLAUDE + 'capabilities = ["stream", "tool_call"]\nreasoning = "low"\n'
    assert refused(tmp_path, narrowed).key == "providers.anthropic.reasoning"


def test_a_thinking_budget_stays_below_max_tokens(tmp_path: Path) -> None:
    error = refused(tmp_path, CLAUDE + "reasoning = 4096\n")
    assert error.key == "providers.anthropic.reasoning"
    assert "providers.anthropic.max_tokens (4096)" in str(error) and "lower the budget" in str(
        error
    )
    options = "[providers.anthropic.model_options.claude-b]\nreasoning = 9000\n"
    assert (
        refused(tmp_path, CLAUDE + options).key
        == "providers.anthropic.model_options.claude-b.reasoning"
    )
    assert load(tmp_path, CLAUDE + "reasoning = 4095\n").providers["anthropic"].reasoning == 4095


@pytest.mark.parametrize("value", ["512", '"max"', "true", "1.5"])
def test_a_reasoning_value_of_no_known_form_names_every_form(tmp_path: Path, value: str) -> None:
    error = refused(tmp_path, f'[[routing.rules]]\nname = "r"\nreasoning = {value}\n')
    assert error.key == "routing.rules[0].reasoning"
    assert '"off", "low", "medium", "high" or a token budget of at least 1024' in str(error)


# ----- rules -------------------------------------------------------------------------------


@pytest.mark.parametrize("pattern", [r"(a)\\1", "a(?=b)", "(?<!x)y", "(?<name>a)\\\\k<name>"])
def test_a_pattern_re2_cannot_run_in_linear_time_is_refused(
    tmp_path: Path, pattern: str, capfd: pytest.CaptureFixture[str]
) -> None:
    error = refused(tmp_path, f'[[routing.rules]]\nname = "r"\npattern = "{pattern}"\n')
    assert error.key == "routing.rules[0].pattern"
    message = str(error)
    assert "RE2" in message and "backreferences and lookaround" in message
    assert "b'" not in message  # RE2's reason as text, not a bytes repr
    # RE2 itself prints nothing: a refusal is the one line the owner sees.
    out, err = capfd.readouterr()
    assert out == "" and err == ""


def test_a_pattern_too_long_or_a_nameless_rule_is_refused(tmp_path: Path) -> None:
    error = refused(tmp_path, f'[[routing.rules]]\nname = "r"\npattern = "{"a" * 501}"\n')
    assert error.key == "routing.rules[0].pattern" and "at most 500 characters" in str(error)
    error = refused(tmp_path, '[[routing.rules]]\nchannel = ["telegram"]\n')
    assert error.key == "routing.rules[0].name" and "is required" in str(error)
    assert "telegram" not in str(error)  # not the whole table printed back
    error = refused(tmp_path, '[[routing.rules]]\nname = ""\n')
    assert error.key == "routing.rules[0].name" and "non-empty" in str(error)


def test_max_input_tokens_below_min_is_refused(tmp_path: Path) -> None:
    rules = (
        '[[routing.rules]]\nname = "a"\nmin_input_tokens = 10\n'
        '[[routing.rules]]\nname = "b"\nmin_input_tokens = 100\nmax_input_tokens = 50\n'
    )
    error = refused(tmp_path, rules)
    assert error.key == "routing.rules[1].max_input_tokens"
    assert "min_input_tokens" in str(error) and "0 for no bound" in str(error)
    ok = load(
        tmp_path, '[[routing.rules]]\nname = "a"\nmin_input_tokens = 9\nmax_input_tokens = 9\n'
    )
    assert ok.routing.rules[0].max_input_tokens == 9


@pytest.mark.parametrize(
    ("text", "key", "words"),
    [
        ("[routing]\nrules = [1]\n", "routing.rules[0]", "must be table"),
        ('[routing]\nrules = ["r"]\n', "routing.rules[0]", "must be table"),
        ("[routing]\nrules = 1\n", "routing.rules", "must be array"),
        ('[general]\nfallbacks = "local:qwen"\n', "general.fallbacks", "must be list"),
        ("[general]\nfallbacks = [1]\n", "general.fallbacks", "list of strings"),
        (
            '[providers.local]\nfallbacks = "anthropic"\n',
            "providers.local.fallbacks",
            "must be list",
        ),
        (
            '[[routing.rules]]\nname = "r"\nchannel = "qq"\n',
            "routing.rules[0].channel",
            "must be list",
        ),
        (
            '[[routing.rules]]\nname = "r"\ncron_job = "d"\n',
            "routing.rules[0].cron_job",
            "must be list",
        ),
        ('[[routing.rules]]\nname = "r"\nskill = "s"\n', "routing.rules[0].skill", "must be list"),
        (
            '[[routing.rules]]\nname = "r"\nimage = "yes"\n',
            "routing.rules[0].image",
            "must be bool",
        ),
        ('[[routing.rules]]\nname = "r"\nfallbacks = "x"\n', "routing.rules[0].fallbacks", "list"),
        ("[routing]\nbreaker_failures = 0\n", "routing.breaker_failures", "positive"),
        ("[routing]\nbreaker_cooldown = 0\n", "routing.breaker_cooldown", "positive"),
        ("[routing]\nsticky_minutes = -1\n", "routing.sticky_minutes", "≥ 0"),
        ('[routing]\ndecisions_days = "30"\n', "routing.decisions_days", "must be int"),
    ],
)
def test_wrong_shapes_are_one_line_refusals(
    tmp_path: Path, text: str, key: str, words: str
) -> None:
    if text.startswith("[providers.local]"):
        text = LOCAL + text.split("\n", 1)[1]
    error = refused(tmp_path, CLAUDE + text)
    assert error.key == key and words in str(error), str(error)
    assert "config.toml" in str(error)  # where to fix it


# ----- several keys ------------------------------------------------------------------------

KEYS = ["sk-ant-second-0123456789", "sk-ant-third-abcdefghij"]


def test_api_keys_from_the_file_and_the_environment_are_appended_and_deduped(
    tmp_path: Path,
) -> None:
    text = CLAUDE + f'api_keys = ["{KEYS[0]}", "{KEY}"]\n'
    env = {**ENV, "KERNEL_PROVIDER_ANTHROPIC_API_KEYS": f" {KEYS[1]} ,{KEYS[0]},, "}
    config = load(tmp_path, text, env)
    anthropic = config.providers["anthropic"]
    assert anthropic.api_key == KEY
    assert anthropic.keys == [KEY, KEYS[0], KEYS[1]]  # api_key first, each once
    assert anthropic.enabled
    found = secrets_of(config)
    assert {KEY, *KEYS} <= set(found)
    view = masked_view(anthropic)
    assert view["api_keys"] and all("…" in k or set(k) == {"*"} for k in view["api_keys"])
    assert not any(secret in repr(view) for secret in (KEY, *KEYS))
    line = f"calling with {KEYS[1]} after {KEYS[0]} was rate-limited"
    redacted = redact_text(line, found)
    assert KEYS[0] not in redacted and KEYS[1] not in redacted


def test_api_keys_alone_enable_a_provider(tmp_path: Path) -> None:
    text = CLAUDE + LOCAL.replace('api_key = "sk-local-0123456789abcdef"\n', "")
    env = {**ENV, "KERNEL_PROVIDER_LOCAL_API_KEYS": "k-one-0123456789,k-two-0123456789"}
    config = load(tmp_path, text, env)
    assert config.providers["local"].keys == ["k-one-0123456789", "k-two-0123456789"]
    assert "local" in config.enabled_providers
    assert not any("KERNEL_PROVIDER_LOCAL_API_KEY" in w for w in config.warnings)


def test_no_key_appears_in_a_refusal(tmp_path: Path) -> None:
    text = CLAUDE + f'api_keys = ["{KEYS[0]}", 5]\n'
    error = refused(tmp_path, text)
    assert error.key == "providers.anthropic.api_keys" and "list of strings" in str(error)
    assert KEYS[0] not in str(error) and KEYS[0][4:-4] not in str(error)
    error = refused(tmp_path, CLAUDE + f'api_keys = "{KEYS[0]}"\n')
    assert KEYS[0] not in str(error) and KEYS[0][4:-4] not in str(error)
    # A later refusal in a file holding several keys names none of them.
    text = CLAUDE + f'api_keys = ["{KEYS[0]}"]\n[general]\nfallbacks = ["x"]\n'
    env = {**ENV, "KERNEL_PROVIDER_ANTHROPIC_API_KEYS": KEYS[1]}
    error = refused(tmp_path, text, env)
    assert not any(k in str(error) for k in (KEY, *KEYS))


# ----- the example -------------------------------------------------------------------------


def _uncommented(example: str, start: str) -> str:
    """The commented block of the example that begins with the ``start`` line, as TOML."""
    lines = example.splitlines()
    first = lines.index(start)
    out: list[str] = []
    for line in lines[first:]:
        if not line.startswith("#"):
            break
        if line.startswith("#   ") or line.startswith("#  "):
            continue  # a continued comment
        out.append(line[2:] if line.startswith("# ") else "")
    return "\n".join(out) + "\n"


def test_the_examples_commented_rules_load_and_route_as_described(tmp_path: Path) -> None:
    example = (REPO / "config.example.toml").read_text(encoding="utf-8")
    rules = _uncommented(example, "# [[routing.rules]]")
    options = _uncommented(example, "# [providers.anthropic.model_options.claude-opus-5-5]")
    text = example + "\n" + rules
    # [providers.anthropic] is a real table of the example: its options go inside it.
    text = text.replace("\n[providers.openai]\n", "\n" + options + "\n[providers.openai]\n", 1)
    env = {**ENV, "KERNEL_PROVIDER_OPENAI_API_KEY": "sk-openai-0123456789abcdef"}
    config = load(tmp_path, text, env)
    assert [r.name for r in config.routing.rules] == [
        "photos",
        "think hard",
        "nightly digest",
        "long documents",
    ]
    router = Router(config, Health(config.routing))
    active = ("anthropic", "claude-sonnet-5-5")

    def chosen(facts: Facts) -> list[str]:
        return [str(c) for c in router.route(facts, active=active).candidates]

    assert chosen(Facts("telegram", "look", image=True)) == [
        "anthropic:claude-opus-5-5",
        "openai:gpt-5.5",
    ]
    thinking = router.route(Facts("telegram", "Please PROVE it"), active=active)
    assert (thinking.rule, thinking.primary.reasoning) == ("think hard", "high")
    # The opus model's own fallbacks follow it (the rule names none).
    assert [str(c) for c in thinking.candidates] == [
        "anthropic:claude-opus-5-5",
        "anthropic:claude-sonnet-5-5",
        "openai:gpt-5.5",
    ]
    assert chosen(Facts("cron", "digest", job_id="digest"))[0] == "openai:gpt-5.4-mini"
    assert chosen(Facts("telegram", "x", input_tokens=200_000)) == ["anthropic:claude-sonnet-5-5"]
    assert router.route(Facts("telegram", "hello"), active=active).why == "default"
    assert re.search(r"KERNEL_PROVIDER_<NAME>_API_KEYS", example)


def test_the_readmes_resilience_example_loads_and_routes_as_it_says(tmp_path: Path) -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    marker = "<!-- resilience example: tests/config/test_routing_config.py loads it -->\n```toml\n"
    text = readme.split(marker, 1)[1].split("```", 1)[0]
    env = {
        **ENV,
        "KERNEL_PROVIDER_ANTHROPIC_API_KEYS": "sk-ant-third",
        "KERNEL_PROVIDER_OPENAI_API_KEY": "sk-openai-0123456789",
        "KERNEL_PROVIDER_DEEPSEEK_API_KEY": "sk-deepseek-0123456789",
    }
    config = load(tmp_path, text, env)
    assert config.providers["anthropic"].keys == [KEY, "sk-ant-second", "sk-ant-third"]
    router = Router(config, Health(config.routing))
    active = ("anthropic", "claude-sonnet-5-5")

    def route(facts: Facts) -> list[tuple[str, str | int | None]]:
        return [(str(c), c.reasoning) for c in router.route(facts, active=active).candidates]

    assert route(Facts("telegram", "what is this?", image=True)) == [
        ("anthropic:claude-opus-5-5", 8000),
        ("openai:gpt-5.5", None),
        ("deepseek:deepseek-chat", None),
    ]
    assert route(Facts("telegram", "Think hard about this")) == [
        ("openai:gpt-5.5", "high"),
        ("deepseek:deepseek-chat", None),  # no reasoning capability listed
    ]
    assert route(Facts("cron", "go", job_id="digest"))[0] == ("openai:gpt-5.4-mini", None)
    assert route(Facts("telegram", "hello")) == [
        ("anthropic:claude-sonnet-5-5", None),
        ("openai:gpt-5.5", None),
        ("deepseek:deepseek-chat", None),
    ]
