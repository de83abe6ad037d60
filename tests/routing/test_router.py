"""Which models a turn tries, in order: rules, precedence, fallback chains, reasoning,
stickiness and health — on configurations loaded the way Kernel loads them."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernel.config import Config, load_config
from kernel.routing import Facts, Health, Route, Router
from tests.routing.test_health import Clock

PROVIDERS = """
[providers.main]
type = "claude"
api_base = "http://127.0.0.1:1"
api_key = "sk-main-0123456789abcdef"
max_tokens = 8192
default_model = "model-a"
models = ["model-a", "model-b", "model-v"]
aliases = { big = "model-b" }
[providers.spare]
type = "openai_compat"
api_base = "http://127.0.0.1:2/v1"
api_key = "sk-spare-0123456789abcdef"
default_model = "gpt-a"
models = ["gpt-a", "gpt-b"]
[providers.deep]
type = "openai_compat"
api_base = "http://127.0.0.1:3/v1"
api_key = "sk-deep-0123456789abcdef"
default_model = "r1"
models = ["r1"]
capabilities = ["stream", "tool_call", "reasoning"]
[providers.off]
type = "openai_compat"
api_base = "http://127.0.0.1:4/v1"
default_model = "cheap"
models = ["cheap"]
"""
ENV = {"KERNEL_LANGUAGE": "en"}
ACTIVE = ("main", "model-a")


def configure(
    tmp_path: Path, extra: str = "", *, general: str = "", providers: str = PROVIDERS
) -> Config:
    """``general``: lines added to [general]; ``extra``: tables after the providers."""
    path = tmp_path / "config.toml"
    text = f'[general]\ndefault_provider = "main"\n{general}{providers}{extra}'
    path.write_text(text, encoding="utf-8")
    return load_config(path, env=ENV, require_telegram=False)


def router(
    tmp_path: Path,
    extra: str = "",
    *,
    general: str = "",
    providers: str = PROVIDERS,
    clock: Clock | None = None,
) -> Router:
    config = configure(tmp_path, extra, general=general, providers=providers)
    return Router(config, Health(config.routing, clock=clock or Clock()))


def models(route: Route) -> list[str]:
    return [str(c) for c in route.candidates]


RULES = """
[[routing.rules]]
name = "qq guests"
channel = ["qq"]
primary = "spare:gpt-b"
[[routing.rules]]
name = "photos"
image = true
primary = "main:model-v"
[[routing.rules]]
name = "deploys"
pattern = "Deploy|部署"
primary = "deep"
[[routing.rules]]
name = "small talk"
max_input_tokens = 100
primary = "spare:gpt-a"
[[routing.rules]]
name = "long"
min_input_tokens = 50000
primary = "main:big"
[[routing.rules]]
name = "digest"
cron_job = ["digest", "weekly"]
primary = "spare"
[[routing.rules]]
name = "coding"
skill = ["code-review"]
primary = "deep:r1"
"""


@pytest.mark.parametrize(
    ("facts", "rule", "primary"),
    [
        (Facts("qq", "hi", input_tokens=500), "qq guests", "spare:gpt-b"),
        (Facts("telegram", "what is this", image=True, input_tokens=500), "photos", "main:model-v"),
        (Facts("telegram", "Deploy it now", input_tokens=500), "deploys", "deep:r1"),
        (Facts("telegram", "帮我部署一下", input_tokens=500), "deploys", "deep:r1"),
        (Facts("telegram", "hi", input_tokens=100), "small talk", "spare:gpt-a"),
        (Facts("telegram", "hi", input_tokens=50_000), "long", "main:model-b"),
        (Facts("cron", "run", job_id="weekly", input_tokens=500), "digest", "spare:gpt-a"),
        (
            Facts("console", "look", skills=("x", "code-review"), input_tokens=500),
            "coding",
            "deep:r1",
        ),
    ],
)
def test_a_rule_is_chosen_by_each_kind_of_condition(
    tmp_path: Path, facts: Facts, rule: str, primary: str
) -> None:
    route = router(tmp_path, RULES).route(facts, active=ACTIVE)
    assert (route.why, route.rule, str(route.primary)) == ("rule", rule, primary)


@pytest.mark.parametrize(
    "facts",
    [
        Facts("telegram", "deploy it now", input_tokens=500),  # the pattern's case as written
        Facts("telegram", "hi", input_tokens=101),  # above small talk, below long
        Facts("telegram", "hi", input_tokens=49_999),
        Facts("telegram", "hi", image=False, input_tokens=500),
        Facts("cron", "run", job_id="daily", input_tokens=500),
        Facts("console", "look", skills=("code",), input_tokens=500),
    ],
)
def test_no_rule_matching_means_the_active_model(tmp_path: Path, facts: Facts) -> None:
    route = router(tmp_path, RULES).route(facts, active=ACTIVE)
    assert (route.why, route.rule, str(route.primary)) == ("default", "", "main:model-a")


def test_the_first_matching_rule_wins_and_every_condition_must_hold(tmp_path: Path) -> None:
    rules = """
[[routing.rules]]
name = "qq photos"
channel = ["qq"]
image = true
primary = "deep"
[[routing.rules]]
name = "any photo"
image = true
primary = "spare:gpt-b"
[[routing.rules]]
name = "also photos"
image = true
primary = "main:model-v"
"""
    r = router(tmp_path, rules)
    assert r.route(Facts("qq", image=True), active=ACTIVE).rule == "qq photos"
    assert r.route(Facts("telegram", image=True), active=ACTIVE).rule == "any photo"
    assert r.route(Facts("qq"), active=ACTIVE).why == "default"


def test_a_case_insensitive_pattern_says_so_and_matches_anywhere(tmp_path: Path) -> None:
    r = router(tmp_path, '[[routing.rules]]\nname = "i"\npattern = "(?i)\\\\bprove\\\\b"\n')
    assert r.route(Facts("telegram", "Can you PROVE it?"), active=ACTIVE).rule == "i"
    assert r.route(Facts("telegram", "improve it"), active=ACTIVE).why == "default"


def test_a_rule_without_primary_keeps_the_active_model(tmp_path: Path) -> None:
    r = router(tmp_path, '[[routing.rules]]\nname = "think"\npattern = "why"\nreasoning = "high"\n')
    route = r.route(Facts("telegram", "why?"), active=("main", "model-b"))
    assert (route.why, route.rule, str(route.primary), route.primary.reasoning) == (
        "rule",
        "think",
        "main:model-b",
        "high",
    )


def test_precedence_session_then_owner_then_rule_then_active(tmp_path: Path) -> None:
    r = router(tmp_path, RULES)
    facts = Facts("qq", "hi", input_tokens=500)
    session, owner = ("deep", "r1"), ("main", "model-b")
    route = r.route(facts, active=ACTIVE, override=session, owner=owner)
    assert (route.why, str(route.primary), route.rule) == ("session", "deep:r1", "")
    route = r.route(facts, active=ACTIVE, owner=owner)
    assert (route.why, str(route.primary), route.rule) == ("owner", "main:model-b", "")
    route = r.route(facts, active=ACTIVE)
    assert (route.why, str(route.primary)) == ("rule", "spare:gpt-b")
    route = r.route(Facts("telegram", "hi", input_tokens=500), active=ACTIVE)
    assert (route.why, str(route.primary)) == ("default", "main:model-a")


GENERAL_CHAIN = 'fallbacks = ["spare:gpt-b", "main"]\n'
OPTIONS_CHAIN = '[providers.main.model_options.model-b]\nfallbacks = ["deep", "spare"]\n'
DEEP_CHAIN = PROVIDERS.replace(
    'capabilities = ["stream", "tool_call", "reasoning"]\n',
    'capabilities = ["stream", "tool_call", "reasoning"]\n'
    'fallbacks = ["main:big", "deep:r1", "spare:gpt-a"]\n',
)


def chains_router(tmp_path: Path, rules: str = "") -> Router:
    return router(tmp_path, OPTIONS_CHAIN + rules, general=GENERAL_CHAIN, providers=DEEP_CHAIN)


def test_fallbacks_come_from_model_options_then_provider_then_general(tmp_path: Path) -> None:
    r = chains_router(tmp_path)
    # model_options of main:model-b
    assert models(r.route(Facts("telegram"), active=("main", "model-b"))) == [
        "main:model-b",
        "deep:r1",
        "spare:gpt-a",
    ]
    # the provider's own (deep), deduped: deep:r1 is already the primary
    assert models(r.route(Facts("telegram"), active=("deep", "r1"))) == [
        "deep:r1",
        "main:model-b",
        "spare:gpt-a",
    ]
    # general.fallbacks for a model and provider naming none; "main" is main:model-a
    assert models(r.route(Facts("telegram"), active=("main", "model-a"))) == [
        "main:model-a",
        "spare:gpt-b",
    ]
    assert models(r.route(Facts("telegram"), active=("spare", "gpt-a"))) == [
        "spare:gpt-a",
        "spare:gpt-b",
        "main:model-a",
    ]


def test_a_rules_fallbacks_replace_the_chain_and_an_empty_list_means_none(tmp_path: Path) -> None:
    rules = """
[[routing.rules]]
name = "own chain"
channel = ["qq"]
primary = "main:big"
fallbacks = ["spare:gpt-a", "main:model-b", "spare"]
[[routing.rules]]
name = "alone"
channel = ["console"]
primary = "main:big"
fallbacks = []
[[routing.rules]]
name = "primary's chain"
channel = ["cron"]
primary = "main:big"
"""
    r = chains_router(tmp_path, rules)
    assert models(r.route(Facts("qq"), active=ACTIVE)) == ["main:model-b", "spare:gpt-a"]
    assert models(r.route(Facts("console"), active=ACTIVE)) == ["main:model-b"]
    assert models(r.route(Facts("cron"), active=ACTIVE)) == [
        "main:model-b",
        "deep:r1",
        "spare:gpt-a",
    ]


def test_a_disabled_provider_is_skipped_with_disabled(tmp_path: Path) -> None:
    r = router(tmp_path, general='fallbacks = ["off:cheap", "spare"]\n')
    route = r.route(Facts("telegram"), active=ACTIVE)
    assert models(route) == ["main:model-a", "spare:gpt-a"]
    assert route.skipped == [("off:cheap", "disabled")]
    # A primary switched off since: its chain answers (general's, deduped).
    route = r.route(Facts("telegram"), active=ACTIVE, override=("off", "cheap"))
    assert route.why == "session" and route.skipped == [("off:cheap", "disabled")]
    assert models(route) == ["spare:gpt-a"]


# ----- reasoning -------------------------------------------------------------------------


def test_reasoning_from_the_rule_then_the_model_then_the_provider(tmp_path: Path) -> None:
    extra = """
[providers.main.model_options.model-b]
reasoning = 4000
fallbacks = ["deep", "spare", "main:model-a"]
[[routing.rules]]
name = "hard"
pattern = "hard"
primary = "main:big"
reasoning = "high"
"""
    low = PROVIDERS.replace("max_tokens = 8192\n", 'max_tokens = 8192\nreasoning = "low"\n')
    r = router(tmp_path, extra, providers=low)
    # The rule's level for every candidate whose provider declares reasoning; none for
    # spare (an openai_compat provider that does not list it).
    route = r.route(Facts("telegram", "a hard one"), active=ACTIVE)
    assert [(str(c), c.reasoning) for c in route.candidates] == [
        ("main:model-b", "high"),
        ("deep:r1", "high"),
        ("spare:gpt-a", None),
        ("main:model-a", "high"),
    ]
    # Without a rule: the model's own, else its provider's; deep sets none.
    route = r.route(Facts("telegram", "easy"), active=("main", "model-b"))
    assert [(str(c), c.reasoning) for c in route.candidates] == [
        ("main:model-b", 4000),
        ("deep:r1", None),
        ("spare:gpt-a", None),
        ("main:model-a", "low"),
    ]


# ----- stickiness and health -------------------------------------------------------------


def test_a_sticky_session_starts_on_the_model_that_answered_until_it_expires(
    tmp_path: Path,
) -> None:
    clock = Clock()
    extra = "[routing]\nsticky_minutes = 10\n"
    config = configure(tmp_path, extra, general='fallbacks = ["spare", "deep"]\n')
    health = Health(config.routing, clock=clock)
    r = Router(config, health)
    health.stick(5, "deep", "r1")
    route = r.route(Facts("telegram", session_id=5), active=ACTIVE)
    assert models(route) == ["deep:r1", "main:model-a", "spare:gpt-a"] and route.sticky
    other = r.route(Facts("telegram", session_id=6), active=ACTIVE)
    assert models(other) == ["main:model-a", "spare:gpt-a", "deep:r1"] and not other.sticky
    clock.now += 10 * 60
    route = r.route(Facts("telegram", session_id=5), active=ACTIVE)
    assert models(route) == ["main:model-a", "spare:gpt-a", "deep:r1"] and not route.sticky


def test_a_sticky_model_no_longer_among_the_candidates_is_forgotten(tmp_path: Path) -> None:
    config = configure(tmp_path, general='fallbacks = ["spare"]\n')
    health = Health(config.routing, clock=Clock())
    r = Router(config, health)
    health.stick(5, "deep", "r1")
    route = r.route(Facts("telegram", session_id=5), active=ACTIVE)
    assert models(route) == ["main:model-a", "spare:gpt-a"] and not route.sticky
    assert health.sticky(5) is None
    health.stick(5, "main", "model-a")  # already first: nothing moves
    route = r.route(Facts("telegram", session_id=5), active=ACTIVE)
    assert models(route) == ["main:model-a", "spare:gpt-a"] and not route.sticky


def _health_router(tmp_path: Path) -> tuple[Router, Health, Clock]:
    clock = Clock()
    extra = "[routing]\nbreaker_failures = 1\nbreaker_cooldown = 30\n"
    config = configure(tmp_path, extra, general='fallbacks = ["spare", "deep"]\n')
    health = Health(config.routing, clock=clock)
    return Router(config, health), health, clock


def test_a_refused_provider_is_left_out(tmp_path: Path) -> None:
    r, health, _ = _health_router(tmp_path)
    health.refused("main")
    route = r.route(Facts("telegram"), active=ACTIVE)
    assert models(route) == ["spare:gpt-a", "deep:r1"]
    assert route.skipped == [("main:model-a", "key_refused")] and not route.forced
    health.config_changed({"main"})
    assert models(r.route(Facts("telegram"), active=ACTIVE))[0] == "main:model-a"


def test_an_open_circuit_is_skipped_until_half_open(tmp_path: Path) -> None:
    r, health, clock = _health_router(tmp_path)
    health.failure("main", "overloaded")
    route = r.route(Facts("telegram"), active=ACTIVE)
    assert models(route) == ["spare:gpt-a", "deep:r1"]
    assert route.skipped == [("main:model-a", "circuit_open")] and not route.forced
    clock.now += 30
    route = r.route(Facts("telegram"), active=ACTIVE)
    assert models(route) == ["main:model-a", "spare:gpt-a", "deep:r1"]  # its probe may go


def test_all_open_means_all_are_tried_anyway(tmp_path: Path) -> None:
    r, health, _ = _health_router(tmp_path)
    for name in ("main", "spare", "deep"):
        health.failure(name, "overloaded")
    route = r.route(Facts("telegram"), active=ACTIVE)
    assert models(route) == ["main:model-a", "spare:gpt-a", "deep:r1"]
    assert route.forced and route.skipped == []
    health.refused("deep")
    route = r.route(Facts("telegram"), active=ACTIVE)
    assert models(route) == ["main:model-a", "spare:gpt-a"] and route.forced
    assert route.skipped == [("deep:r1", "key_refused")]
    for name in ("main", "spare"):
        health.refused(name)
    route = r.route(Facts("telegram"), active=ACTIVE)
    assert route.candidates == [] and not route.forced  # nobody left: the turn says so
