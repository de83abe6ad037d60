"""What can run a program or send a stored secret elsewhere, and who may change it (issue 33).

One rule, written once, for every route, verb and SelfOps operation that changes the
configuration while Kernel runs. A change is *privileged* when it:

- sets an environment variable that changes how programs load, what they run or where
  they connect (:func:`env_family`), or any other that does not hold a credential
  (:func:`guarded_env`: programs read more than any list names); the ``envs`` every
  coding CLI and stdio MCP server inherits;
- adds or changes a program Kernel starts: a stdio MCP server (command, args, env,
  cwd), a coding CLI's command or args, a name a CLI's own ``env`` sets as ``envs``
  is judged (:func:`guarded_env`);
- moves a stored secret: a provider's ``api_base`` (or a new provider) while it holds
  keys or secret headers the request did not give itself, the QQ channel's
  ``api_base``/``token_url`` while it holds ``client_secret``, an HTTP MCP server whose
  headers or URL pull ``${VAR}`` values out of Kernel's environment.

Who may (:meth:`PrivilegeGate.authorize`):

- the owner (Telegram commands, Kernel itself): always;
- the sidecar's API key: loaders and commands, yes; a moved secret only with that
  secret given again in the same request (then nothing stored moves and the change is
  not privileged at all) or the owner's confirmation in Telegram;
- a web-console session: only through the owner's confirmation in Telegram (buttons,
  the change in words, ``gateway.confirm_timeout``); no Telegram, a denial or a
  timeout: refused, saying so;
- a keyless caller (``gateway.auth = "none"``): refused.

Every refusal is ``privilege_required`` (403) naming the field and the fix.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from kernel.config.channels import QQChannelConfig
from kernel.config.mcp import MCPServerConfig
from kernel.config.providers import ProviderConfig
from kernel.config.secrets import PUBLIC_HEADERS, is_sensitive
from kernel.core.asks import AskOutcome, AskRegistry, Question
from kernel.core.delivery import ChannelRegistry, ask_owner
from kernel.core.errors import CodedError
from kernel.core.i18n import t
from kernel.core.redact import mask_secret

if TYPE_CHECKING:
    from kernel.config.model import Config

log = logging.getLogger(__name__)

CODE = "privilege_required"
Kind = Literal["loader", "command", "destination"]
SHOWN = 300  # characters of one value in the owner's question
SHOWN_CHANGES = 12  # changes listed in one question
MAX_OPEN = 3  # confirmations waiting at once: more would flood the owner's chat

# --------------------------------------------------------------------- environment names
#
# Names are matched case-insensitively (Windows reads them so, and proxies are read in
# both cases). Each family says why it is here:
#
# loaders — the dynamic loader and language runtimes load or run code named by these
# before the program's own first line: LD_* (glibc: LD_PRELOAD, LD_LIBRARY_PATH,
# LD_AUDIT), DYLD_* (macOS), PYTHON* (PYTHONPATH → sitecustomize.py, PYTHONSTARTUP,
# PYTHONHOME), NODE_* (NODE_OPTIONS --require, NODE_PATH), PERL5OPT/PERL5LIB/PERLLIB/
# PERL5DB, RUBYOPT/RUBYLIB, JAVA_TOOL_OPTIONS/_JAVA_OPTIONS/JDK_JAVA_OPTIONS (-javaagent),
# CLASSPATH, LUA_* (LUA_INIT runs code), PHPRC/PHP_INI_SCAN_DIR (auto_prepend_file),
# DOTNET_STARTUP_HOOKS, CORECLR_*, GCONV_PATH (glibc's iconv modules);
# shells — a shell runs these at start or around every command: BASH_ENV, ENV,
# SHELLOPTS, BASHOPTS, PS4 (xtrace expands it), PROMPT_COMMAND, BASH_FUNC_* (exported
# functions), SHELL (the CLIs' own command tool runs through it);
# what is found — PATH decides which `claude`, `npx` or `git` runs (the delegator looks
# the CLI up on it); HOME, XDG_CONFIG_HOME/XDG_CONFIG_DIRS/XDG_DATA_HOME/XDG_DATA_DIRS
# decide which ~/.claude, ~/.codex, ~/.gemini, ~/.gitconfig, ~/.npmrc are read;
# the CLIs' own homes — CLAUDE_CONFIG_DIR (settings.json: hooks run commands),
# CLAUDE_CODE_* (CLAUDE_CODE_SHELL_PREFIX wraps every command), CODEX_HOME (config.toml:
# mcp_servers, notify), GEMINI_CLI_* (system settings: hooks, mcpServers);
# programs other programs start — GIT_* (GIT_SSH, GIT_SSH_COMMAND, GIT_EXEC_PATH,
# GIT_CONFIG_* → core.fsmonitor, GIT_ASKPASS, GIT_EDITOR, GIT_PAGER, GIT_EXTERNAL_DIFF),
# SSH_ASKPASS, EDITOR, VISUAL, PAGER;
# package installers — `npx`/`uvx` MCP servers fetch code by these: NPM_CONFIG_*
# (registry, script-shell, node-options), PIP_* (index URLs), UV_* (index URLs, python).
#
# destinations — where a key goes: *_BASE_URL, *_API_BASE, *_BASE, *_ENDPOINT,
# *_API_URL (ANTHROPIC_BASE_URL, OPENAI_BASE_URL, AZURE_OPENAI_ENDPOINT… a CLI sends the
# key it holds there); HTTP_PROXY, HTTPS_PROXY, ALL_PROXY, FTP_PROXY (every request
# through a chosen host); SSL_CERT_FILE, SSL_CERT_DIR, REQUESTS_CA_BUNDLE,
# CURL_CA_BUNDLE, GRPC_DEFAULT_SSL_ROOTS_FILE_PATH (a trusted CA lets that host read
# TLS); HOSTALIASES (glibc resolves names through a chosen file).

_LOADER_PREFIXES = (
    "LD_",
    "DYLD_",
    "PYTHON",
    "NODE_",
    "PERL5",
    "LUA_",
    "CORECLR_",
    "BASH_FUNC_",
    "CLAUDE_CODE_",
    "GEMINI_CLI_",
    "GIT_",
    "NPM_CONFIG_",
    "PIP_",
    "UV_",
    "XDG_CONFIG_",
    "XDG_DATA_",
)
_LOADER_NAMES = frozenset(
    {
        "PERLLIB",
        "RUBYOPT",
        "RUBYLIB",
        "JAVA_TOOL_OPTIONS",
        "_JAVA_OPTIONS",
        "JDK_JAVA_OPTIONS",
        "CLASSPATH",
        "PHPRC",
        "PHP_INI_SCAN_DIR",
        "DOTNET_STARTUP_HOOKS",
        "GCONV_PATH",
        "BASH_ENV",
        "ENV",
        "SHELLOPTS",
        "BASHOPTS",
        "PS4",
        "PROMPT_COMMAND",
        "SHELL",
        "PATH",
        "HOME",
        "CLAUDE_CONFIG_DIR",
        "CODEX_HOME",
        "SSH_ASKPASS",
        "EDITOR",
        "VISUAL",
        "PAGER",
        "OPENSSL_CONF",
        "OPENSSL_MODULES",
        "ZDOTDIR",
        "LESSOPEN",
        "LESSCLOSE",
        "BROWSER",
        "GOFLAGS",
        "GLIBC_TUNABLES",
    }
)
_DESTINATION_SUFFIXES = ("_BASE_URL", "_API_BASE", "_BASE", "_ENDPOINT", "_API_URL")
_DESTINATION_NAMES = frozenset(
    {
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "FTP_PROXY",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "REQUESTS_CA_BUNDLE",
        "CURL_CA_BUNDLE",
        "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH",
        "HOSTALIASES",
    }
)


def env_family(name: str) -> Kind | None:
    """``loader`` or ``destination`` for a name the rule guards (any case), else None."""
    upper = name.upper()
    if upper in _LOADER_NAMES or upper.startswith(_LOADER_PREFIXES):
        return "loader"
    if upper in _DESTINATION_NAMES or upper.endswith(_DESTINATION_SUFFIXES):
        return "destination"
    return None


def guarded_env(name: str) -> Kind | None:
    """What setting ``name`` can do, as the rule judges it: its family when
    :func:`env_family` names one; else "loader" for every name that is not a
    credential's. The families are what is known to load code or move a key, but
    programs read far more (OPENSSL_CONF loads a library into every TLS user, ZDOTDIR
    runs a file in every zsh): only a name that holds a secret to hand a tool
    (``*_KEY``, ``*_TOKEN`` …, :func:`is_sensitive`) is free for a caller without the
    key. The key's holder may set any of them."""
    family = env_family(name)
    if family is not None:
        return family
    return None if is_sensitive(name) else "loader"


# ------------------------------------------------------------------------ the changes


@dataclass(frozen=True, slots=True)
class Privileged:
    """One privileged change: ``field`` as the caller names it (``envs.LD_PRELOAD``,
    ``providers.anthropic.base_url``), what it can do, what would change in the owner's
    words, and how a refused caller may still make it."""

    field: str
    kind: Kind
    words: str
    fix: str
    key_may: bool = True  # False: a stored secret moves; the API key alone is not enough


def _shown(value: str) -> str:
    """``value`` on one line; a longer one than ``SHOWN`` as its start, its end and its
    length (harmless flags first would otherwise hide what a cut tail adds)."""
    value = value.replace("\n", "⏎")
    if len(value) <= SHOWN:
        return value
    half = SHOWN // 2
    return t("priv.cut", start=value[:half], end=value[-half:], count=len(value))


def env_changes(
    current: Mapping[str, str], new: Mapping[str, str], table: str = "envs"
) -> list[Privileged]:
    """The guarded names ``new`` sets to a value other than the one in effect (a value
    put back as it is, or a name removed, is no change: removing falls back to
    config.toml's or the process's own). ``table``: where they are set (``envs``, or a
    CLI's own ``cli.<name>.env``)."""
    found = []
    for name, value in new.items():
        kind = guarded_env(name)
        if kind is None or current.get(name) == value:
            continue
        shown = mask_secret(value) if is_sensitive(name) else _shown(value)
        found.append(
            Privileged(
                f"{table}.{name}",
                kind,
                t("priv.words.env", name=name, value=shown),
                t("priv.fix.env", name=name)
                if table == "envs"
                else t("priv.fix.cli_env", table=table.removesuffix(".env")),
            )
        )
    return found


def provider_secrets(provider: ProviderConfig) -> list[str]:
    """What a provider sends with every request: its keys and its secret headers."""
    headers = [v for k, v in provider.headers.items() if k.lower() not in PUBLIC_HEADERS]
    return [s for s in (*provider.keys, *headers) if s]


def provider_moves(
    name: str,
    before: ProviderConfig | None,
    after: ProviderConfig,
    given: Collection[str],
    field: str = "base_url",
) -> list[Privileged]:
    """A provider's address changed (or a new one) while it holds a secret ``given``
    (the request's own values) does not hold: a stored secret would go there."""
    if before is not None and before.api_base == after.api_base:
        return []
    kept = [s for s in provider_secrets(after) if s not in given]
    if not kept:
        return []
    old = before.api_base if before is not None else "-"
    return [
        Privileged(
            f"providers.{name}.{field}",
            "destination",
            t("priv.words.provider", name=name, url=_shown(after.api_base), old=_shown(old)),
            t("priv.fix.provider", name=name, field=field),
            key_may=False,
        )
    ]


def server_changes(
    before: MCPServerConfig | None, after: MCPServerConfig, given: Collection[str] = ()
) -> list[Privileged]:
    """A stdio server added or its program changed; an HTTP server added or changed
    whose headers hold values the request did not give (``${VAR}``, filled from
    Kernel's environment)."""
    field = f"mcp.servers.{after.name}"
    if after.type == "stdio":
        old = before if before is not None and before.type == "stdio" else None
        program = (after.command, after.args, after.env, after.cwd)
        if old is not None and (old.command, old.args, old.env, old.cwd) == program:
            return []
        line = _shown(" ".join([after.command, *after.args]))
        return [
            Privileged(
                f"{field}.command",
                "command",
                t("priv.words.command", name=after.name, command=line),
                t("priv.fix.command"),
            )
        ]
    if before is not None and (before.url, before.headers) == (after.url, after.headers):
        return []
    if all(v in given or not v for v in after.headers.values()):
        return []
    return [
        Privileged(
            f"{field}.headers",
            "destination",
            t("priv.words.mcp_refs", name=after.name, url=_shown(after.url)),
            t("priv.fix.mcp_refs"),
        )
    ]


def qq_moves(
    before: QQChannelConfig, after: QQChannelConfig, given: Collection[str]
) -> list[Privileged]:
    """The QQ API's or token endpoint's address changed while the bot secret (which
    the token request carries) stays the stored one."""
    moved = [f for f in ("token_url", "api_base") if getattr(before, f) != getattr(after, f)]
    if not moved or not after.client_secret or after.client_secret in given:
        return []
    return [
        Privileged(
            f"channels.qq.{f}",
            "destination",
            t("priv.words.qq", field=f, url=_shown(getattr(after, f))),
            t("priv.fix.qq"),
            key_may=False,
        )
        for f in moved
    ]


def config_changes(before: Config, after: Config, given: Collection[str] = ()) -> list[Privileged]:
    """Every privileged change between two whole configurations (``given``: the
    secrets the request gave itself)."""
    found = env_changes(before.envs, after.envs)
    for name, provider in after.providers.items():
        found += provider_moves(name, before.providers.get(name), provider, given, "api_base")
    servers = {s.name: s for s in before.mcp_servers}
    for server in after.mcp_servers:
        if server.enabled:
            found += server_changes(servers.get(server.name), server, given)
    found += qq_moves(before.channels.qq, after.channels.qq, given)
    for name, cli in after.cli.items():
        old = before.cli.get(name)
        found += env_changes(old.env if old else {}, cli.env, f"cli.{name}.env")
        if old is None or (old.command, old.args) != (cli.command, cli.args):
            line = _shown(" ".join([cli.command, *cli.args]))
            found.append(
                Privileged(
                    f"cli.{name}.command",
                    "command",
                    t("priv.words.cli", name=name, command=line),
                    t("priv.fix.cli"),
                )
            )
    return found


def strings_of(value: Any) -> set[str]:
    """Every string inside a request's value (what it gave itself, secrets included)."""
    if isinstance(value, str):
        return {value}
    if isinstance(value, dict):
        return set().union(*(strings_of(v) for v in value.values()))
    if isinstance(value, list | tuple):
        return set().union(*(strings_of(v) for v in value))
    return set()


def stored_guarded(overlay: Mapping[str, Any]) -> list[str]:
    """What ``data/runtime.toml`` sets that the rule guards: loader names in ``[envs]``,
    providers' ``api_base``, stdio MCP servers (start and ``kernel check`` name them:
    kept before issue 33, by anyone a keyless sidecar let in, they still take effect)."""
    envs = overlay.get("envs")
    found = sorted(str(k) for k in envs if env_family(str(k))) if isinstance(envs, dict) else []
    clis = overlay.get("cli")
    for name, table in (clis if isinstance(clis, dict) else {}).items():
        env = table.get("env") if isinstance(table, dict) else None
        if isinstance(env, dict):
            found += sorted(f"cli.{name}.env.{k}" for k in env if env_family(str(k)))
    providers = overlay.get("providers")
    for name, table in (providers if isinstance(providers, dict) else {}).items():
        if isinstance(table, dict) and "api_base" in table:
            found.append(f"providers.{name}.api_base")
    mcp = overlay.get("mcp")
    servers = mcp.get("servers") if isinstance(mcp, dict) else None
    for server in servers if isinstance(servers, list) else []:
        if isinstance(server, dict) and server.get("type") == "stdio":
            found.append(f"mcp.servers.{server.get('name')}")
    return found


# --------------------------------------------------------------------------- who may


def refusal(reason: str, changes: Sequence[Privileged], **words: Any) -> CodedError:
    """``privilege_required``: the fields, what they can do, why refused and the fix."""
    fields = ", ".join(c.field for c in changes)
    what = t(f"priv.what.{changes[0].kind}")
    message = t(f"priv.refused.{reason}", field=fields, what=what, fix=changes[0].fix, **words)
    return CodedError(CODE, message, {"fields": [c.field for c in changes], "reason": reason})


def _needs(caller: str, changes: Sequence[Privileged]) -> list[Privileged]:
    """What of ``changes`` the caller may not make by itself."""
    if caller == "owner":
        return []
    if caller == "key":
        return [c for c in changes if not c.key_may]
    return list(changes)


def within(
    caller: str, allowed: Sequence[Privileged], given: Collection[str]
) -> Callable[[Config, Config], None]:
    """A last check, as the change is made: nothing privileged beyond ``allowed`` (the
    configuration may have changed while the owner was asked)."""

    def check(before: Config, after: Config) -> None:
        late = [c for c in _needs(caller, config_changes(before, after, given)) if c not in allowed]
        if late:
            raise refusal("changed", late)

    return check


class PrivilegeGate:
    """Decides who may make a privileged change; asks the owner in Telegram when the
    rule says so (a question only Telegram can answer: the console's list of waiting
    questions does not show it)."""

    def __init__(
        self, asks: AskRegistry, registry: ChannelRegistry, timeout: Callable[[], float]
    ) -> None:
        self.asks = asks
        self.registry = registry
        self.timeout = timeout
        self._open = 0

    async def authorize(self, caller: str, changes: Sequence[Privileged]) -> None:
        """Return when ``caller`` may make ``changes``; else raise ``privilege_required``."""
        changes = _needs(caller, changes)
        if not changes:
            return
        if caller not in ("key", "console"):
            raise refusal("keyless", changes)
        if self._open >= MAX_OPEN:  # counted before any await: no race past the cap
            raise refusal("busy", changes, count=self._open)
        self._open += 1
        try:
            outcome = await self._confirm(caller, changes)
        finally:
            self._open -= 1
        if outcome == "allowed":
            log.info("privileged change confirmed by the owner: %d field(s)", len(changes))
            return
        log.warning("privileged change refused (%s): %d field(s)", outcome, len(changes))
        raise refusal(outcome, changes, seconds=self.timeout())

    async def _confirm(self, caller: str, changes: Sequence[Privileged]) -> str:
        lines = [f"• {c.words}" for c in changes[:SHOWN_CHANGES]]
        if len(changes) > SHOWN_CHANGES:
            lines.append(t("priv.more", count=len(changes) - SHOWN_CHANGES))
        who = t("priv.who.console" if caller == "console" else "priv.who.key")
        text = t("priv.ask", who=who, changes="\n".join(lines))
        options = [t("priv.allow"), t("priv.deny")]
        question = Question("privilege", text, options, kind="confirm", owner_only=True)
        answer = await ask_owner(
            self.asks, self.registry, question, self.timeout(), t("priv.label")
        )
        if answer.option == 0:
            return "allowed"
        if answer.option is not None:
            return "denied"
        return "timeout" if answer.outcome is AskOutcome.TIMEOUT else "unreachable"
