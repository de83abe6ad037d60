"""The circuit breaker, refused keys and sticky sessions, driven by an injected clock:
no test waits for a cool-down in wall time."""

from __future__ import annotations

from kernel.config import RoutingConfig
from kernel.routing import Health
from kernel.routing.health import MAX_STICKY


class Clock:
    """Monotonic seconds that move only when a test says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def health(failures: int = 3, cooldown: float = 60.0, sticky: float = 30.0) -> tuple[Health, Clock]:
    clock = Clock()
    config = RoutingConfig(
        breaker_failures=failures, breaker_cooldown=cooldown, sticky_minutes=sticky
    )
    return Health(config, clock=clock), clock


def test_a_provider_never_heard_of_is_closed() -> None:
    h, _ = health()
    assert h.state("main") == "closed" and h.allow("main") and h.usable("main")
    [state] = h.states(["main"])
    assert (state.provider, state.state, state.failures, state.retry_in, state.last_error) == (
        "main",
        "closed",
        0,
        0.0,
        "",
    )


def test_failures_below_the_threshold_keep_it_closed_and_a_success_resets_them() -> None:
    h, _ = health(failures=3)
    h.failure("main", "overloaded")
    h.failure("main", "rate_limited")
    assert h.state("main") == "closed" and h.allow("main")
    assert h.states(["main"])[0].failures == 2
    assert h.states(["main"])[0].last_error == "rate_limited"
    h.success("main")
    h.failure("main", "overloaded")
    h.failure("main", "overloaded")
    assert h.state("main") == "closed"  # in a row: the success started the count again


def test_at_the_threshold_it_opens_and_is_skipped_for_the_cooldown() -> None:
    h, clock = health(failures=3, cooldown=60)
    for _ in range(3):
        h.failure("main", "timeout")
    assert h.state("main") == "open"
    assert not h.allow("main") and not h.allow("main")
    assert h.usable("main")  # open is not unusable: the router may force it
    assert h.state("other") == "closed"  # one provider's circuit only
    clock.now += 59.9
    assert h.state("main") == "open" and not h.allow("main")


def test_retry_in_counts_down() -> None:
    h, clock = health(failures=1, cooldown=60)
    h.failure("main", "overloaded")
    assert h.states(["main"])[0].retry_in == 60
    clock.now += 45
    [state] = h.states(["main"])
    assert (state.state, state.retry_in, state.failures) == ("open", 15, 1)
    clock.now += 15
    [state] = h.states(["main"])
    assert (state.state, state.retry_in) == ("half_open", 0)


def test_after_the_cooldown_half_open_admits_exactly_one_probe() -> None:
    h, clock = health(failures=2, cooldown=10)
    h.failure("main", "overloaded")
    h.failure("main", "overloaded")
    clock.now += 10
    assert h.state("main") == "half_open"
    assert h.allow("main")  # the probe
    assert not h.allow("main") and not h.allow("main")  # others still skip it
    clock.now += 1000
    assert not h.allow("main")  # however long the probe takes


def test_a_probe_success_closes_the_circuit() -> None:
    h, clock = health(failures=2, cooldown=10)
    h.failure("main", "overloaded")
    h.failure("main", "overloaded")
    clock.now += 10
    assert h.allow("main")
    h.success("main")
    assert h.state("main") == "closed"
    assert h.allow("main") and h.allow("main")  # no longer one at a time
    [state] = h.states(["main"])
    assert (state.failures, state.last_error, state.retry_in) == (0, "", 0.0)


def test_a_probe_failure_reopens_for_a_new_cooldown() -> None:
    h, clock = health(failures=5, cooldown=10)
    for _ in range(5):
        h.failure("main", "overloaded")
    clock.now += 12
    assert h.allow("main")
    h.failure("main", "timeout")  # one failed probe is enough, whatever the threshold
    assert h.state("main") == "open"
    assert h.states(["main"])[0].retry_in == 10  # counted from the probe's failure
    clock.now += 9
    assert not h.allow("main")
    clock.now += 1
    assert h.allow("main") and not h.allow("main")  # the next single probe


def test_release_lets_the_next_call_probe() -> None:
    h, clock = health(failures=1, cooldown=10)
    h.failure("main", "overloaded")
    clock.now += 10
    assert h.allow("main") and not h.allow("main")
    h.release("main")  # the probe was cancelled: no verdict
    assert h.state("main") == "half_open"
    assert h.allow("main") and not h.allow("main")


def test_a_refused_key_is_unusable_until_the_configuration_changes() -> None:
    h, clock = health(failures=1, cooldown=10)
    h.refused("main")
    assert h.state("main") == "unusable"
    assert not h.usable("main") and not h.allow("main")
    clock.now += 10_000
    h.success("spare")
    assert h.state("main") == "unusable"  # time heals an open circuit, not a refused key
    [state] = h.states(["main"])
    assert (state.state, state.last_error, state.retry_in) == (
        "unusable",
        "provider_auth_failed",
        0.0,
    )
    h.config_changed({"spare"})
    assert h.state("main") == "unusable"
    h.config_changed({"main"})
    assert h.state("main") == "closed" and h.allow("main") and h.usable("main")


def test_a_refused_probe_frees_the_probe_slot_and_config_change_forgets_an_open_circuit() -> None:
    h, clock = health(failures=1, cooldown=10)
    h.failure("main", "overloaded")
    clock.now += 10
    assert h.allow("main")
    h.refused("main")
    assert h.state("main") == "unusable"
    h.config_changed({"main"})
    assert h.state("main") == "closed"
    h.failure("main", "overloaded")
    assert h.state("main") == "open"
    h.config_changed({"main"})  # a new key, a new address: try it at once
    assert h.state("main") == "closed" and h.states(["main"])[0].failures == 0


def test_states_lists_every_provider_asked_for_in_order() -> None:
    h, _ = health(failures=1)
    h.failure("b", "overloaded")
    h.refused("c")
    assert [(s.provider, s.state) for s in h.states(["a", "b", "c"])] == [
        ("a", "closed"),
        ("b", "open"),
        ("c", "unusable"),
    ]


def test_a_session_sticks_to_its_fallback_until_it_expires() -> None:
    h, clock = health(sticky=30)
    h.stick(7, "spare", "model-b")
    sticky = h.sticky(7)
    assert sticky is not None and (sticky.provider, sticky.model) == ("spare", "model-b")
    assert h.sticky(8) is None and h.sticky(None) is None
    clock.now += 30 * 60 - 1
    assert h.sticky(7) is not None
    clock.now += 1
    assert h.sticky(7) is None
    assert h.sticky(7) is None  # forgotten, not only hidden
    h.stick(7, "spare", "model-b")
    h.unstick(7)
    assert h.sticky(7) is None


def test_no_stickiness_when_it_is_switched_off_or_without_a_session() -> None:
    h, _ = health(sticky=0)
    h.stick(7, "spare", "model-b")
    assert h.sticky(7) is None
    h, _ = health()
    h.stick(None, "spare", "model-b")
    h.unstick(None)
    assert h.sticky(None) is None


def test_sessions_whose_stickiness_ended_are_forgotten_without_being_asked() -> None:
    """Issue 37: a session that failed over and never calls again is not kept."""
    h, clock = health(sticky=30)
    for session in range(200):
        h.stick(session, "spare", "model-b")
    assert len(h._sticky) == 200
    clock.now += 30 * 60
    h.stick(1000, "spare", "model-b")
    assert list(h._sticky) == [1000]
    sticky = h.sticky(1000)
    assert sticky is not None and (sticky.provider, sticky.model) == ("spare", "model-b")


def test_at_most_max_sticky_sessions_stick_the_first_to_stick_goes_first() -> None:
    h, _ = health(sticky=30)
    for session in range(MAX_STICKY + 50):
        h.stick(session, "spare", "model-b")
    assert len(h._sticky) == MAX_STICKY
    assert h.sticky(49) is None and h.sticky(50) is not None
    h.stick(50, "other", "model-c")  # sticks again: now the newest
    h.stick(MAX_STICKY + 50, "spare", "model-b")
    assert h.sticky(51) is None
    again = h.sticky(50)
    assert again is not None and again.provider == "other"
