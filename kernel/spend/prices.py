"""What a call costs: the configured price of a model, a call's cost from its usage,
and a call's worst case before it is made. Unknown is ``None``, never a guess.

A budget still needs a figure for a call whose cost is unknown but bounded: the model
has a price, but not for the cache it used (:func:`bound_of`: cache reads at the input
price, cache writes at twice it, the dearest the APIs charge), or the provider reported
no usage at all (the call's worst case). The ledger keeps such a bound apart from the
cost (``cost_bound``): the budget counts it, the owner sees it as unknown."""

from __future__ import annotations

from kernel.config import Config, ModelPrice
from kernel.core.provider import ChatRequest
from kernel.core.usage import Usage, estimate_request_tokens

PER = 1_000_000  # prices are per million tokens
CACHE_WRITE_BOUND = 2.0  # a cache write costs at most twice the input (Anthropic, 1 h TTL)
TITLES = "titles"  # the provider name of the titles model (kernel.providers)
CLAUDE = "claude"  # the provider type whose calls write the prompt cache


def price_of(config: Config, provider: str, model: str) -> ModelPrice | None:
    """The price configured for ``model`` of ``provider`` (the titles model's under
    ``[titles.prices]``); None when there is none."""
    pcfg = config.providers.get(provider)
    if pcfg is not None:
        return pcfg.prices.get(model)
    if provider == TITLES and config.titles is not None:
        return config.titles.prices.get(model)
    return None


def cost_of(usage: Usage, price: ModelPrice | None) -> float | None:
    """The cost of ``usage`` at ``price``; None when a price it needs is unknown."""
    if price is None:
        return None
    if (usage.cache_read and price.cache_read is None) or (
        usage.cache_write and price.cache_write is None
    ):
        return None
    total = (
        usage.input * price.input
        + usage.output * price.output
        + usage.cache_read * (price.cache_read or 0.0)
        + usage.cache_write * (price.cache_write or 0.0)
    )
    return total / PER


def bound_of(usage: Usage, price: ModelPrice | None) -> float | None:
    """The most ``usage`` can have cost when a cache price is missing (cache reads at the
    input price, writes at :data:`CACHE_WRITE_BOUND` times it); None without a price."""
    if price is None:
        return None
    read = price.cache_read if price.cache_read is not None else price.input
    write = price.cache_write if price.cache_write is not None else CACHE_WRITE_BOUND * price.input
    total = (
        usage.input * price.input
        + usage.output * price.output
        + usage.cache_read * read
        + usage.cache_write * write
    )
    return total / PER


def writes_cache(config: Config, provider: str) -> bool:
    """Whether ``provider``'s calls may be billed for cache writes (Claude's are: Kernel
    marks its prompts; OpenAI-compatible caching is automatic and writes are free)."""
    pcfg = config.providers.get(provider)
    if pcfg is not None:
        return pcfg.type == CLAUDE
    return provider == TITLES and config.titles is not None and config.titles.type == CLAUDE


def worst_case(
    price: ModelPrice | None, request: ChatRequest, max_tokens: int, *, writes_cache: bool = True
) -> float | None:
    """The most ``request`` can cost: its estimated input, all of it at the dearer of
    the input and (``writes_cache``) cache-write prices, and ``max_tokens`` of output.
    None: no price."""
    if price is None:
        return None
    fresh = estimate_request_tokens(
        f"{request.system}\n{request.context}", request.messages, request.tools
    )
    write = price.cache_write if price.cache_write is not None else CACHE_WRITE_BOUND * price.input
    dearest = max(price.input, write) if writes_cache else price.input
    return (fresh * dearest + max_tokens * price.output) / PER


def money(value: float, currency: str, places: int | None = None) -> str:
    """``$0.42`` for US dollars, ``0.42 CNY`` otherwise; small sums keep four places."""
    if places is None:
        places = _places(value)
    amount = f"{value:.{places}f}"
    return f"${amount}" if currency.upper() == "USD" else f"{amount} {currency}"


def places_under(value: float, limit: float) -> int | None:
    """The decimal places :func:`money` needs for ``value`` not to read as ``limit``
    (or more) when it is under it ($0.097 beside $0.10); None: its own are enough."""
    if not value < limit or round(value, _places(value)) < limit:
        return None
    return next((p for p in range(3, 7) if round(value, p) < limit), 6)


def _places(value: float) -> int:
    return 4 if 0 < abs(value) < 0.01 else 2


def money_under(value: float, limit: float, currency: str) -> str:
    """``value`` as :func:`money` writes it beside ``limit``: a sum under the limit never
    reads as the limit itself ($0.097 beside $0.10, not $0.10)."""
    return money(value, currency, places_under(value, limit))


def share(value: float, limit: float) -> int:
    """``value`` as a whole percentage of ``limit``, from the unrounded figures; never
    100 while under the limit (99.6% is 99)."""
    if not limit:
        return 0
    percent = round(value / limit * 100)
    return min(percent, 99) if value < limit else percent
