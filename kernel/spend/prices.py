"""What a call costs: the configured price of a model, a call's cost from its usage,
and a call's worst case before it is made. Unknown is ``None``, never a guess."""

from __future__ import annotations

from kernel.config import Config, ModelPrice
from kernel.core.provider import ChatRequest
from kernel.core.usage import Usage, estimate_request_tokens

PER = 1_000_000  # prices are per million tokens
DEFAULT_OUTPUT = 4096  # a call's output ceiling when neither request nor provider sets one
TITLES = "titles"  # the provider name of the titles model (kernel.providers)


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


def worst_case(price: ModelPrice | None, request: ChatRequest, max_tokens: int) -> float | None:
    """The most ``request`` can cost: its estimated input, all of it at the dearer of
    the input and cache-write prices, and ``max_tokens`` of output. None: no price."""
    if price is None:
        return None
    fresh = estimate_request_tokens(
        f"{request.system}\n{request.context}", request.messages, request.tools
    )
    dearest = max(price.input, price.cache_write or 0.0)
    return (fresh * dearest + max_tokens * price.output) / PER


def money(value: float, currency: str) -> str:
    """``$0.42`` for US dollars, ``0.42 CNY`` otherwise; small sums keep four places."""
    places = 4 if 0 < abs(value) < 0.01 else 2
    amount = f"{value:.{places}f}"
    return f"${amount}" if currency.upper() == "USD" else f"{amount} {currency}"
