"""``kernel check``: validate the configuration and reach every configured part.

One line per part: ``ok``, ``warn`` (Kernel runs, but this part will not work) or
``fail`` (Kernel cannot do its job: it exits non-zero). Each non-ok line says how to
fix it. Nothing here changes state: the provider gets one tiny request, Telegram one
``getMe``, each MCP server one connection, the titles model one tiny request, speech to
text a fifth of a second of silence, text to speech one word, the data directory one
temporary file. The programs on PATH (the coding CLIs, ffmpeg) are
:mod:`kernel.check.programs`'; the line and the report :mod:`kernel.check.line`'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import socket
import sqlite3
import urllib.request
import wave
from collections.abc import Awaitable, Callable
from datetime import UTC, date, datetime
from urllib.parse import urlsplit

from kernel.check.embeddings import PART, embeddings
from kernel.check.line import CheckLine, Status
from kernel.check.line import report as report
from kernel.check.programs import _clis, _ffmpeg
from kernel.config import Config, parse_ref, read_overlay
from kernel.config.privilege import stored_guarded
from kernel.config.sidecar_key import sidecar_key
from kernel.core.errors import ConfigError, KernelError
from kernel.core.fileio import os_cause, probe_writable
from kernel.core.i18n import set_language, t
from kernel.core.messages import Message, TextBlock
from kernel.core.provider import DEFAULT_MAX_TOKENS, ChatRequest, Completion, Provider
from kernel.plugins import default_plugins
from kernel.providers.retirement import retirement_notices
from kernel.providers.sdk import SDKProvider
from kernel.store.trouble import unwritable_file


async def run_checks(config: Config, *, today: date | None = None) -> list[CheckLine]:
    """Every check, the slow ones concurrently, each bounded by ``general.check_timeout``;
    ``today`` (default: the UTC date) decides which models are near their end of life.
    The report is worded in the configured language."""
    set_language(config.general.language)
    seconds = config.general.check_timeout
    lines = [CheckLine("config", "ok", t("check.config_ok", path=config.path))]
    lines += [CheckLine("config", "warn", w) for w in config.warnings]
    today = today or datetime.now(UTC).date()
    for notice in retirement_notices(config, today):
        lines.append(CheckLine(f"model {notice.model}", "warn", notice.describe()))
    lines += unpriced(config)
    lines += routing(config)
    stored = stored_guarded(await asyncio.to_thread(read_overlay, config.runtime_path))
    if stored:  # loaders kept in runtime.toml: maybe set by anyone, before issue 33
        lines.append(CheckLine("envs", "warn", t("priv.stored", names=", ".join(stored))))
    lines.append(await asyncio.to_thread(_data_dir, config))
    lines += await asyncio.to_thread(sidecar, config)
    lines.append(await asyncio.to_thread(_fts5))
    if config.backup.enabled:
        lines.append(await asyncio.to_thread(backup_line, config, datetime.now(UTC)))
    probes: list[tuple[str, Callable[[], Awaitable[CheckLine]]]] = []
    for name, provider in config.providers.items():
        if provider.enabled:
            probes.append((f"provider {name}", lambda n=name: _provider(config, n)))  # type: ignore[misc]
    probes.append(("telegram", lambda: _telegram(config)))
    if config.titles is not None:
        probes.append(("titles", lambda: _titles(config)))
    if config.stt is not None:
        probes.append(("stt", lambda: _stt(config)))
    if config.tts is not None:
        probes.append(("tts", lambda: _tts(config)))
    if config.memory.embeddings is not None:
        probes.append((PART, lambda: embeddings(config)))
    results = await asyncio.gather(*(_bounded(part, probe, seconds) for part, probe in probes))
    lines += results
    lines += await _mcp(config)
    lines += await asyncio.to_thread(_clis, config)
    lines.append(await asyncio.to_thread(_ffmpeg, config))
    if config.browser.enabled:
        lines.append(await asyncio.to_thread(_browser, config))
    return lines


def backup_line(config: Config, now: datetime) -> CheckLine:
    """The last good backup's age (issue 40): a warning past two days, or with none."""
    from kernel.backup.rotation import last_good
    from kernel.backup.schedule import STALE, age_words

    folder = config.backups_dir
    last = last_good(folder)
    if last is None:
        return CheckLine("backup", "warn", t("check.backup_none", path=folder))
    age = (now - last.taken).total_seconds()
    words = age_words(age)
    if age > STALE:
        return CheckLine("backup", "warn", t("check.backup_old", age=words, path=last.path))
    return CheckLine("backup", "ok", t("check.backup_ok", age=words, path=last.path))


def _browser(config: Config) -> CheckLine:
    """The browser tools' Playwright and Chromium (issue 38), when [browser] enabled: a
    warning when either is missing (Kernel runs; the tools answer with the same words),
    as for a coding CLI or ffmpeg that is not there."""
    from kernel import browser

    status, words = browser.check(config)
    return CheckLine("browser", "ok" if status == "ok" else "warn", words)


async def _bounded(
    part: str, probe: Callable[[], Awaitable[CheckLine]], seconds: float
) -> CheckLine:
    try:
        return await asyncio.wait_for(probe(), seconds)
    except TimeoutError:
        return CheckLine(part, "fail", t("check.timeout", seconds=f"{seconds:g}"))


def unpriced(config: Config) -> list[CheckLine]:
    """With a budget set, each enabled provider's models (and the titles model) without
    a price, one line per provider: their calls cost an unknown amount, which no limit
    can stop. Without a budget, nothing to say."""
    budget = config.budget
    if not (budget.daily or budget.monthly or budget.cron_job_daily):
        return []
    lines: list[CheckLine] = []
    for name, provider in config.providers.items():
        if not provider.enabled:
            continue
        models = dict.fromkeys([provider.default_model, *provider.models])
        missing = [m for m in models if m and m not in provider.prices]
        if missing:
            text = t("check.unpriced", models=", ".join(missing), table=f"providers.{name}")
            lines.append(CheckLine(f"prices {name}", "warn", text))
        # Claude calls read and write the cache Kernel marks; OpenAI-compatible ones read
        # what the server cached by itself.
        claude = provider.type == "claude"
        partial = [
            m
            for m, p in provider.prices.items()
            if m in models and (p.cache_read is None or (claude and p.cache_write is None))
        ]
        if partial:
            text = t("check.no_cache_price", models=", ".join(partial), table=f"providers.{name}")
            lines.append(CheckLine(f"cache prices {name}", "warn", text))
        if provider.max_tokens is None:
            text = t("check.no_ceiling", name=name, assumed=DEFAULT_MAX_TOKENS)
            lines.append(CheckLine(f"ceiling {name}", "warn", text))
    titles = config.titles
    if titles is not None and titles.model and titles.model not in titles.prices:
        text = t("check.unpriced", models=titles.model, table="titles")
        lines.append(CheckLine("prices titles", "warn", text))
    if not lines:
        lines.append(CheckLine("budget", "ok", t("check.budget_ok")))
    return lines


def _chains(config: Config) -> list[tuple[str, str, list[str]]]:
    """(part, key, references) of every fallback chain and rule that can be used: the
    chains of providers switched off or without a key are never followed."""
    found = [("fallbacks general", "general.fallbacks", list(config.general.fallbacks))]
    for name, provider in config.providers.items():
        if not provider.enabled:
            continue
        prefix = f"providers.{name}"
        found.append((f"fallbacks {name}", f"{prefix}.fallbacks", provider.fallbacks or []))
        for model, options in provider.model_options.items():
            key = f"{prefix}.model_options.{model}.fallbacks"
            found.append((f"fallbacks {name}:{model}", key, options.fallbacks or []))
    for index, rule in enumerate(config.routing.rules):
        refs = ([rule.primary] if rule.primary else []) + (rule.fallbacks or [])
        found.append((f"rule {rule.name}", f"routing.rules[{index}]", refs))
    return [chain for chain in found if chain[2]]


def routing(config: Config) -> list[CheckLine]:
    """Each fallback chain and rule naming a provider that cannot be called (no key, or
    switched off), one warning each: Kernel skips it, so the chain is shorter than it
    reads. Nothing configured, nothing to say."""
    chains = _chains(config)
    lines: list[CheckLine] = []
    for part, key, refs in chains:
        disabled = [ref for ref in refs if not config.providers[parse_ref(ref)[0]].enabled]
        if not disabled:
            continue
        names = list(dict.fromkeys(parse_ref(ref)[0] for ref in disabled))
        envs = ", ".join(config.providers[n].env_key for n in names)
        text = t(
            "check.ref_disabled",
            key=key,
            refs=", ".join(disabled),
            names=", ".join(names),
            envs=envs,
        )
        lines.append(CheckLine(part, "warn", text))
    lines += _over_budget(config)
    rules = len(config.routing.rules)
    fallback_chains = sum(1 for _, key, _ in chains if not key.startswith("routing."))
    if (rules or fallback_chains) and not lines:
        text = t("check.routing_ok", chains=fallback_chains, rules=rules)
        lines.append(CheckLine("routing", "ok", text))
    return lines


def _over_budget(config: Config) -> list[CheckLine]:
    """A rule's thinking budget goes to every model of its chain whose provider declares
    reasoning (the load checked it against the rule's primary only): a Claude fallback
    whose max_tokens is not above it would refuse the call, and a refused request is
    not failed over."""
    from kernel.routing import Health, Router

    router = Router(config, Health(config.routing))
    lines: list[CheckLine] = []
    for index, rule in enumerate(config.routing.rules):
        budget = rule.reasoning
        if not isinstance(budget, int):
            continue
        name, model = parse_ref(rule.primary or config.general.default_provider)
        primary = config.providers[name]
        model = (primary.resolve(model) or model) if model else primary.default_model
        if rule.fallbacks is not None:
            chain = [parse_ref(ref) for ref in rule.fallbacks]
        else:
            chain = router.fallbacks_of(name, model)
        over = [
            provider
            for provider in dict.fromkeys(p for p, _ in [(name, model), *chain])
            if config.providers[provider].declares("reasoning")
            and (ceiling := config.providers[provider].max_tokens) is not None
            and budget >= ceiling
        ]
        if over:
            key = f"routing.rules[{index}].reasoning"
            text = t("check.budget_over_fallback", key=key, budget=budget, names=", ".join(over))
            lines.append(CheckLine(f"rule {rule.name}", "warn", text))
    return lines


def _keys(count: int) -> str:
    """`` (N keys)`` for a provider with several keys, else nothing."""
    return t("check.keys", count=count) if count > 1 else ""


def _data_dir(config: Config) -> CheckLine:
    """The folder takes a real write (a full disk refuses it), and the database files
    already there can be written: Kernel's start refuses otherwise."""
    try:
        config.data_dir.mkdir(parents=True, exist_ok=True)
        refused = probe_writable(config.data_dir)
    except OSError as exc:
        refused = exc
    if refused is not None:
        detail = t("check.data_dir_bad", path=config.data_dir, detail=os_cause(refused))
        return CheckLine("data_dir", "fail", detail)
    refused = unwritable_file(config.db_path)
    if refused is not None:
        path, cause = refused.filename, os_cause(refused)
        return CheckLine("data_dir", "fail", t("startup.storage_file", path=path, detail=cause))
    return CheckLine("data_dir", "ok", t("check.data_dir_ok", path=config.data_dir))


def sidecar(config: Config) -> list[CheckLine]:
    """The sidecar's authentication, when something is wrong with it: keyless by
    ``auth = "none"`` (a warning), or a key file Kernel would refuse at start."""
    gateway = config.gateway
    if not gateway.enabled:
        return []
    if gateway.auth == "none":
        return [CheckLine("gateway", "warn", t("config.warn_keyless"))]
    try:
        sidecar_key(gateway, config.data_dir)
    except ConfigError as exc:
        return [CheckLine("gateway", "fail", str(exc))]
    return []


def _fts5() -> CheckLine:
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute("CREATE VIRTUAL TABLE probe USING fts5(x)")
    except sqlite3.OperationalError:
        return CheckLine("memory search", "warn", t("check.fts5_missing"))
    finally:
        conn.close()
    return CheckLine("memory search", "ok", t("check.fts5_ok", version=sqlite3.sqlite_version))


def shown_url(url: str) -> str:
    """A configured base URL as a check line names it: without a user, password or query
    (where keys sometimes ride), never the key."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}{parts.path}" if parts.scheme else url


async def _connect_error(url: str, seconds: float) -> str | None:
    """Why a TCP connection to ``url``'s host cannot be opened within ``seconds``, or
    None. Done before the SDK is even imported (a few seconds on a small machine), so an
    unreachable endpoint is named at once. Through a proxy the SDK decides instead."""
    parts = urlsplit(url)
    host = parts.hostname
    proxied = {"http", "https", "all"} & set(urllib.request.getproxies())
    if not host or (proxied and not urllib.request.proxy_bypass(host)):
        return None
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
        async with asyncio.timeout(seconds):
            _, writer = await asyncio.open_connection(host, port)
    except TimeoutError:
        return t("check.no_connect_within", seconds=f"{seconds:g}")
    except socket.gaierror as exc:  # the name does not resolve
        return exc.strerror or type(exc).__name__
    except OSError as exc:  # asyncio's own text repeats the address: say what happened
        return os.strerror(exc.errno) if exc.errno else str(exc)[:200] or type(exc).__name__
    except ValueError as exc:  # a port out of range
        return type(exc).__name__
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return None


def _probe_build(factory: Callable[[], Provider], config: Config) -> Provider:
    """A provider for one probe: no retries (``_stream`` is one attempt) and the check's
    own short connect timeout, so an unreachable endpoint is named in seconds."""
    provider = factory()
    if isinstance(provider, SDKProvider):
        general = config.general
        provider.limit_time(general.check_timeout, general.check_connect_timeout)
    return provider


async def _ping(provider: Provider, model: str) -> None:
    """One tiny request, no retries: the answer's end, or the provider's error."""
    request = ChatRequest(
        model=model,
        system="Reply with one word.",
        messages=[Message("user", [TextBlock("ping")])],
        max_tokens=8,
    )
    async for event in provider._stream(request):
        if isinstance(event, Completion):
            return


async def _provider(config: Config, name: str) -> CheckLine:
    part = f"provider {name}"
    cfg = config.providers[name]
    is_default = name == config.general.default_provider
    status: Status = "fail" if is_default else "warn"
    error = await _connect_error(cfg.api_base, config.general.check_connect_timeout)
    if error is not None:
        key = f"providers.{name}.api_base"
        detail = t("check.unreachable", url=shown_url(cfg.api_base), error=error, key=key)
        return CheckLine(part, status, detail)
    try:
        provider = await asyncio.to_thread(
            _probe_build, lambda: default_plugins().create_provider(cfg), config
        )
    except Exception as exc:  # an SDK that cannot even be built
        return CheckLine(part, "fail" if is_default else "warn", type(exc).__name__)
    try:
        await _ping(provider, cfg.default_model)
    except KernelError as exc:
        fix = t("check.provider_fix", env=cfg.env_key)
        tried = t("check.provider_tried", url=shown_url(cfg.api_base))
        return CheckLine(part, status, f"{exc} ({tried}{_keys(len(cfg.keys))}) — {fix}")
    finally:
        with contextlib.suppress(Exception):
            await provider.aclose()
    url = shown_url(cfg.api_base)
    ok = t("check.provider_ok", model=cfg.default_model, url=url)
    return CheckLine(part, "ok", ok + _keys(len(cfg.keys)))


async def _telegram(config: Config) -> CheckLine:
    tg = config.telegram
    if not tg.token or tg.allowed_user <= 0:
        return CheckLine("telegram", "fail", t("config.missing_token"))
    from telegram import Bot
    from telegram.error import InvalidToken, TelegramError

    from kernel.telegram.mending import MendingRequest

    general = config.general
    request = MendingRequest(
        connect_timeout=general.check_connect_timeout, read_timeout=general.check_timeout
    )
    bot = Bot(
        tg.token,
        base_url=f"{tg.api_base}/bot",
        base_file_url=f"{tg.api_base}/file/bot",
        request=request,
    )
    try:
        async with bot:
            me = await bot.get_me()
    except InvalidToken:
        return CheckLine("telegram", "fail", t("tg.bad_token", api_base=tg.api_base))
    except TelegramError as exc:
        detail = t("check.telegram_unreachable", api_base=tg.api_base, kind=type(exc).__name__)
        return CheckLine("telegram", "fail", detail)
    topics = t("check.telegram_topics_on" if me.has_topics_enabled else "check.telegram_topics_off")
    return CheckLine("telegram", "ok", t("check.telegram_ok", bot=me.username or me.id) + topics)


async def _mcp(config: Config) -> list[CheckLine]:
    """Each server connected once by a throwaway manager (its own registry), then closed;
    a server that cannot connect within its connect_timeout is a warning: Kernel runs
    without it."""
    if not config.mcp_servers:
        return []
    from kernel.mcp import MCPManager
    from kernel.tools.registry import ToolRegistry

    manager = MCPManager(config, ToolRegistry())
    try:
        await manager.start()
        statuses = manager.status()
    finally:
        await manager.stop()
    lines = []
    for status in statuses:
        part = f"mcp {status.name}"
        if status.state == "connected":
            lines.append(CheckLine(part, "ok", t("check.mcp_ok", count=status.tools)))
        elif status.state == "disabled":
            lines.append(CheckLine(part, "ok", t("check.mcp_disabled")))
        else:
            error = status.last_error or status.state
            lines.append(CheckLine(part, "warn", t("check.mcp_failed", error=error)))
    return lines


async def _titles(config: Config) -> CheckLine:
    from kernel.providers import titles_provider_config

    assert config.titles is not None
    titles = config.titles
    error = await _connect_error(titles.api_base, config.general.check_connect_timeout)
    if error is not None:
        url = shown_url(titles.api_base)
        detail = t("check.unreachable", url=url, error=error, key="titles.api_base")
        return CheckLine("titles", "warn", detail)
    try:
        provider = await asyncio.to_thread(
            _probe_build,
            lambda: default_plugins().create_provider(titles_provider_config(titles)),
            config,
        )
        try:
            await _ping(provider, config.titles.model)
        finally:
            with contextlib.suppress(Exception):
                await provider.aclose()
    except KernelError as exc:
        tried = t("check.provider_tried", url=shown_url(titles.api_base))
        return CheckLine("titles", "warn", f"{exc} ({tried}) — {t('check.titles_fix')}")
    url = shown_url(titles.api_base)
    return CheckLine("titles", "ok", t("check.provider_ok", model=titles.model, url=url))


def _silent_wav() -> bytes:
    """A fifth of a second of silence: the smallest honest thing to transcribe."""
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(16000)
        out.writeframes(b"\0\0" * 3200)
    return buffer.getvalue()


async def _stt(config: Config) -> CheckLine:
    from kernel.voice.stt import Transcriber

    assert config.stt is not None
    transcriber = Transcriber(config.stt)
    try:
        await transcriber.transcribe(_silent_wav(), "check.wav", "audio/wav")
    except KernelError as exc:
        return CheckLine("stt", "warn", f"{exc} — {t('check.stt_fix')}")
    finally:
        await transcriber.aclose()
    return CheckLine("stt", "ok", t("check.stt_ok", model=config.stt.model))


async def _tts(config: Config) -> CheckLine:
    from kernel.voice.tts import Synthesizer, extra_missing

    assert config.tts is not None
    if missing := extra_missing(config.tts):  # nothing to try: say what to install
        return CheckLine("tts", "warn", missing)
    synthesizer = Synthesizer(config.tts)
    try:
        note = await synthesizer.synthesize("ok")
    except KernelError as exc:
        return CheckLine("tts", "warn", f"{exc} — {t('check.tts_fix')}")
    finally:
        await synthesizer.aclose()
    return CheckLine(
        "tts", "ok", t("check.tts_ok", kind=config.tts.type, seconds=f"{note.seconds:.1f}")
    )
