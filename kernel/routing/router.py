"""Which models a turn's calls go to, in order (issue 17).

:meth:`Router.route` makes the turn's :class:`Route` once, before its first call:

1. the *primary*: the session's own override (set through SelfOps), else, in the
   owner's own chat, the model the owner chose with ``/model`` or ``/provider``, else
   the first ``[[routing.rules]]`` entry whose conditions all hold (:class:`Facts`:
   channel, cron job, skill, image, a pattern in the owner's words, the estimated input
   size), else the active choice;
2. its *fallbacks*: the rule's, else the model's ``model_options`` fallbacks, else its
   provider's ``fallbacks``, else ``general.fallbacks``; disabled providers left out;
3. each candidate's *reasoning*: the rule's (where the provider declares reasoning),
   else the model's, else its provider's;
4. *stickiness*: a session that failed over lately starts on the model that answered;
5. *health*: providers whose key was refused are left out; open circuits are skipped,
   unless every candidate is open (then all are tried: better a slow answer than none).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from kernel.config import Config, ProviderConfig, RoutingRule, compile_pattern, parse_ref
from kernel.core.surrogates import retried_mended
from kernel.routing.health import Health

Why = Literal["session", "persona", "agent", "owner", "rule", "default"]


@dataclass(frozen=True, slots=True)
class Facts:
    """What a rule may match on, for one turn."""

    channel: str
    text: str = ""  # the owner's own words (attached files' contents left out)
    image: bool = False
    job_id: str = ""
    skills: tuple[str, ...] = ()
    input_tokens: int = 0  # the first request's estimated input
    session_id: int | None = None
    persona: str = ""  # the chat's persona ("" none)


@dataclass(frozen=True, slots=True)
class Choice:
    """A persona's or sub-agent's own model and reasoning (issue 18): its model wins
    over the owner's pick and the rules; its reasoning applies to every candidate whose
    provider declares reasoning. ``why``: "persona" or "agent"."""

    ref: str = ""  # "provider:model"; "" the usual choice
    reasoning: str | int | None = None
    why: Why = "persona"


@dataclass(frozen=True, slots=True)
class Candidate:
    provider: str
    model: str
    reasoning: str | int | None = None

    def __str__(self) -> str:
        return f"{self.provider}:{self.model}"


@dataclass(slots=True)
class Route:
    """The models to try, in order. ``forced``: every candidate's circuit is open, so
    they are tried anyway; ``skipped``: (model, why) left out (``disabled``,
    ``key_refused``, ``circuit_open``); ``detour``: (the primary, why) when the primary
    itself was left out for its health, so that the owner is told who answers instead."""

    candidates: list[Candidate]
    why: Why
    rule: str = ""
    sticky: bool = False
    forced: bool = False
    skipped: list[tuple[str, str]] = field(default_factory=list)
    detour: tuple[str, str] | None = None

    @property
    def primary(self) -> Candidate:
        return self.candidates[0]


class Router:
    def __init__(self, config: Config, health: Health) -> None:
        self.config = config
        self.health = health
        self._patterns: dict[str, Any] = {}  # pattern → compiled (RE2)

    def route(
        self,
        facts: Facts,
        *,
        active: tuple[str, str],
        override: tuple[str, str] | None = None,
        owner: tuple[str, str] | None = None,
        choice: Choice | None = None,
    ) -> Route:
        """``active``: the active (provider, model); ``override``: the session's own;
        ``owner``: the owner's explicit /model choice, given only for the owner's chat;
        ``choice``: the chat's persona's (or a sub-agent's) model and reasoning."""
        rule: RoutingRule | None = None
        why: Why
        if choice is not None and choice.reasoning is not None:
            # The profile's reasoning, applied as a rule's would be (declared providers only).
            rule = RoutingRule.model_validate({"name": choice.why, "reasoning": choice.reasoning})
        if override is not None:
            primary, why = override, "session"
        elif choice is not None and choice.ref:
            primary, why = self._resolve(choice.ref), choice.why
        elif owner is not None:
            primary, why = owner, "owner"
        elif (matched := self.match(facts)) is not None:
            primary = self._resolve(matched.primary) if matched.primary else active
            why = "rule"
            if rule is None or matched.reasoning is not None:
                rule = matched
            else:  # the profile's reasoning over the rule's choice of models
                rule = matched.model_copy(update={"reasoning": rule.reasoning})
        else:
            primary, why = active, "default"
        if why == "rule" and rule is not None and rule.fallbacks is not None:
            chain = [self._resolve(ref) for ref in rule.fallbacks]
        else:
            chain = self.fallbacks_of(*primary)
        route = Route([], why, rule.name if rule is not None and why == "rule" else "")
        seen: set[tuple[str, str]] = set()
        refs = [primary, *chain]
        # The active model closes a rule's (or a profile's) chain when none of its models
        # can be called (a provider without a key, switched off since): better it than
        # no answer.
        last_resort = why in ("rule", "persona", "agent") and active not in refs
        for provider, model in [*refs, active] if last_resort else refs:
            if last_resort and (provider, model) == active and route.candidates:
                break  # the rule's own models can be called
            if (provider, model) in seen:
                continue
            seen.add((provider, model))
            pcfg = self.config.providers.get(provider)
            if pcfg is None or not pcfg.enabled:
                route.skipped.append((f"{provider}:{model}", "disabled"))
                continue
            reasoning = self.reasoning_of(pcfg, model, rule)
            route.candidates.append(Candidate(provider, model, reasoning))
        self._prefer_sticky(route, facts.session_id)
        first = route.candidates[0] if route.candidates else None
        self._leave_out_unhealthy(route)
        if not route.candidates and last_resort and active not in seen:
            # Every model of the rule's is refused or off: the active one, if it can be.
            pcfg = self.config.providers.get(active[0])
            if pcfg is not None and pcfg.enabled and self.health.usable(active[0]):
                reasoning = self.reasoning_of(pcfg, active[1], rule)
                route.candidates.append(Candidate(active[0], active[1], reasoning))
        if first is not None and (not route.candidates or route.candidates[0] != first):
            left_out = [w for m, w in route.skipped if m == str(first)]
            if left_out and route.candidates:
                route.detour = (str(first), left_out[0])
        return route

    def match(self, facts: Facts) -> RoutingRule | None:
        """The first rule whose every condition set holds."""
        for rule in self.config.routing.rules:
            if self._matches(rule, facts):
                return rule
        return None

    def _matches(self, rule: RoutingRule, facts: Facts) -> bool:
        if rule.channel and facts.channel not in rule.channel:
            return False
        if rule.cron_job and facts.job_id not in rule.cron_job:
            return False
        if rule.skill and not set(rule.skill) & set(facts.skills):
            return False
        if rule.image is not None and rule.image != facts.image:
            return False
        if rule.persona and facts.persona not in rule.persona:
            return False
        if facts.input_tokens < rule.min_input_tokens:
            return False
        if rule.max_input_tokens and facts.input_tokens > rule.max_input_tokens:
            return False
        if rule.pattern:
            compiled = self._patterns.get(rule.pattern)
            if compiled is None:
                compiled = self._patterns[rule.pattern] = compile_pattern(rule.pattern)
            if retried_mended(compiled.search, facts.text) is None:
                return False
        return True

    def _resolve(self, ref: str) -> tuple[str, str]:
        """(provider, model) of a reference the configuration checked at load."""
        name, model = parse_ref(ref)
        pcfg = self.config.providers.get(name)
        if pcfg is None:
            return name, model
        return name, (pcfg.resolve(model) or model) if model else pcfg.default_model

    def fallbacks_of(self, provider: str, model: str) -> list[tuple[str, str]]:
        pcfg = self.config.providers.get(provider)
        refs: list[str] | None = None
        if pcfg is not None:
            options = pcfg.model_options.get(model)
            refs = options.fallbacks if options is not None else None
            if refs is None:
                refs = pcfg.fallbacks
        if refs is None:
            refs = self.config.general.fallbacks
        return [self._resolve(ref) for ref in refs]

    @staticmethod
    def reasoning_of(
        pcfg: ProviderConfig, model: str, rule: RoutingRule | None = None
    ) -> str | int | None:
        if not pcfg.declares("reasoning"):
            return None
        if rule is not None and rule.reasoning is not None:
            return rule.reasoning
        options = pcfg.model_options.get(model)
        if options is not None and options.reasoning is not None:
            return options.reasoning
        return pcfg.reasoning

    def _prefer_sticky(self, route: Route, session_id: int | None) -> None:
        sticky = self.health.sticky(session_id)
        if sticky is None:
            return
        for index, candidate in enumerate(route.candidates):
            if (candidate.provider, candidate.model) == (sticky.provider, sticky.model):
                if index > 0:
                    route.candidates.insert(0, route.candidates.pop(index))
                    route.sticky = True
                return
        self.health.unstick(session_id)  # no longer among this turn's models

    def _leave_out_unhealthy(self, route: Route) -> None:
        usable: list[Candidate] = []
        for candidate in route.candidates:
            if self.health.usable(candidate.provider):
                usable.append(candidate)
            else:
                route.skipped.append((str(candidate), "key_refused"))
        closed = [c for c in usable if self.health.state(c.provider) != "open"]
        if closed:
            route.skipped += [(str(c), "circuit_open") for c in usable if c not in closed]
            route.candidates = closed
        else:
            route.candidates, route.forced = usable, bool(usable)
