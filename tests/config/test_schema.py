"""The schema is the one declaration: the example documents exactly its keys, refusals
and env overrides come from it, and its secret markers agree with the secret-name rule."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from kernel.config import SCHEMA, load_config, unknown_keys
from kernel.config.providers import provider_env_key
from kernel.config.schema import Env, Secret, marker, toml_keys
from kernel.config.secrets import child_env, header_names_of, secret_fields, secrets_of
from kernel.config.tree import Node, schema_keys
from kernel.core.errors import ConfigError
from kernel.core.i18n import set_language
from kernel.core.redact import is_secret_name

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = (REPO / "config.example.toml").read_text(encoding="utf-8")
ENV = {"KERNEL_PROVIDER_ANTHROPIC_API_KEY": "sk-ant-0123456789abcdef", "KERNEL_LANGUAGE": "en"}
HEADER = re.compile(r"^#?\s*\[\[?([A-Za-z0-9_.*-]+)\]\]?\s*(#.*)?$")
ASSIGNED = re.compile(r"^#?\s*([A-Za-z_][A-Za-z0-9_]*)\s*=")
LISTED = re.compile(r"^#\s+([a-z_]+)(?:,\s*([a-z_]+))?\s{2,}\S")  # "#   key   what it does"


def _pattern(table: str) -> str:
    """The schema's table path as the example writes it: [providers.anthropic] is one of
    ``providers.*``, [[mcp.servers]] is ``mcp.servers[]`` (and [[routing.rules]]
    ``routing.rules[]``)."""
    parts = table.split(".")
    if parts[0] in ("providers", "titles") and "prices" in parts[1:3]:
        return f"{parts[0]}{'.*' if parts[0] == 'providers' else ''}.prices.*"
    if parts[0] == "providers" and parts[2:3] == ["model_options"]:
        return "providers.*.model_options.*"
    for section in ("providers", "cli", "tools"):
        if table.startswith(f"{section}."):
            return f"{section}.*"
    return {"mcp.servers": "mcp.servers[]", "routing.rules": "routing.rules[]"}.get(table, table)


def example_blocks() -> dict[str, set[str]]:
    """Table → the keys the example shows for it, written (``key =``, commented or not)
    after its header, or listed in the comment block just before it."""
    blocks: dict[str, set[str]] = {}
    pending: set[str] = set()  # keys listed in the comments since the last setting
    current: str | None = None  # the last header, commented or not
    real: str | None = None  # the last table TOML itself sees
    for line in EXAMPLE.splitlines():
        header = HEADER.match(line)
        if header:
            current = _pattern(header.group(1))
            real = real if line.startswith("#") else current
            blocks.setdefault(current, set()).update(pending)
            # A table of its own ([gateway.model_aliases]) documents its parent's key;
            # one entry of a table of tables ([providers.x.model_options.m]) its table's.
            parent, _, key = current.rpartition(".")
            if key == "*":
                parent, _, key = parent.rpartition(".")
            blocks.setdefault(parent, set()).add(key)
            pending = set()
            continue
        listed = LISTED.match(line)
        assigned = ASSIGNED.match(line)
        if listed:
            pending.update(k for k in listed.groups() if k)
        if assigned and line.startswith("#"):
            pending.add(assigned.group(1))
        table = current if line.startswith("#") else real
        if table is not None and assigned:
            blocks[table].add(assigned.group(1))
        if not line.startswith("#") and line.strip():
            pending = set()
    return blocks


def test_every_schema_key_is_documented_in_the_example() -> None:
    blocks = example_blocks()
    missing = [
        f"{table}.{key}" for table, key, _ in schema_keys() if key not in blocks.get(table, set())
    ]
    assert missing == []


def test_the_example_holds_no_key_the_schema_does_not_read() -> None:
    assert unknown_keys(tomllib.loads(EXAMPLE)) == []
    known = {table for table, _, _ in schema_keys()} | {"envs", "gateway.model_aliases"}
    headers = [_pattern(m.group(1)) for m in map(HEADER.match, EXAMPLE.splitlines()) if m]
    assert [h for h in headers if h not in known] == []
    # Commented settings in a section's block are keys of that section too.
    readable = {(table, key) for table, key, _ in schema_keys()}
    current = None
    for line in EXAMPLE.splitlines():
        if header := HEADER.match(line):
            current = _pattern(header.group(1))
        elif (m := re.match(r"^# ?([a-z_]+) = ", line)) and current not in (None, "envs"):
            assert (current, m.group(1)) in readable or current == "gateway.model_aliases", line


def _fields() -> list[tuple[str, str, Node]]:
    return [(t, k, n) for t, k, n in schema_keys() if n.model is not None]


def test_every_env_override_is_named_in_the_example() -> None:
    for _, key, node in _fields():
        assert node.model is not None
        field = node.model.model_fields[toml_keys(node.model)[key]]
        override = marker(field, Env)
        if override is not None:
            assert override.variable("anthropic") in EXAMPLE, key
    assert provider_env_key("anthropic") in EXAMPLE


def test_secret_markers_and_the_secret_name_rule_agree() -> None:
    """A key the free-text rule calls secret is marked secret in the schema, and a key
    marked as a secret value has a secret's name (a proxy URL, which may carry a
    password, is the one exception: ``proxy`` in free text is no secret)."""
    for table, key, node in _fields():
        assert node.model is not None
        marks = secret_fields(node.model)
        if is_secret_name(key):
            assert key in marks, f"{table}.{key}"
        mark: Secret | None = marks.get(key)
        if mark is not None and mark.kind == "value" and key != "proxy":
            assert is_secret_name(key), f"{table}.{key}"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("text", "key", "words"),
    [
        ("[telegram]\npoll_timeout = 0\n", "telegram.poll_timeout", "positive number"),
        ("[telegram]\nstream = 1\n", "telegram.stream", "must be bool"),
        ("[general]\nretention_days = -1\n", "general.retention_days", "int ≥ 0"),
        ("[cron]\nmisfire_grace_seconds = -1\n", "cron.misfire_grace_seconds", "number ≥ 0"),
        ("[cron]\nmax_jobs = 2.5\n", "cron.max_jobs", "must be int"),
        ("[gateway]\nport = 70000\n", "gateway.port", "int 0-65535"),
        ("[gateway]\nallowed_origins = [1]\n", "gateway.allowed_origins", "list of strings"),
        ("[gateway]\nmodel_aliases = 3\n", "gateway.model_aliases", "must be table"),
        ('[channels.qq]\ntarget_type = "x"\n', "channels.qq.target_type", "c2c / group"),
        ('[channels.webhook]\nurl = "ftp://x"\n', "channels.webhook.url", "http(s) URL"),
        ("[channels]\nqq = 1\n", "channels.qq", "must be table"),
        ('[tools.x]\napproval = "yes"\n', "tools.x.approval", "must be bool"),
        ('[mcp]\nsampling = "always"\n', "mcp.sampling", "off / ask / auto"),
        ("[mcp]\nservers = [{ timeout = 0 }]\n", "mcp.servers[0].timeout", "positive number"),
        ('[cli.codex]\ntimeout = "long"\n', "cli.codex.timeout", "must be float"),
        ('[providers.anthropic]\ncapabilities = ["stream", "x"]\n', "", "got 'x'"),
        ("[telegram]\nallowed_user = 'me'\n", "telegram.allowed_user", "must be int"),
    ],
)
def test_schema_errors_become_one_line_refusals(
    tmp_path: Path, text: str, key: str, words: str
) -> None:
    base = '[providers.anthropic]\ntype = "claude"\nmax_tokens = 10\ndefault_model = "m"\n'
    if text.startswith("[providers.anthropic]"):
        text = base + text.split("\n", 1)[1]
        key = "providers.anthropic.capabilities"
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, text), env=ENV, require_telegram=False)
    message = str(info.value)
    assert info.value.key == key and message.startswith(key)
    assert words in message and "\n" not in message and "config.toml" in message


def test_a_secret_in_the_wrong_shape_is_never_printed_back(tmp_path: Path) -> None:
    for text in ("[telegram]\ntoken = 12345678901234567\n", "[gateway]\napi_key = 98765432109\n"):
        with pytest.raises(ConfigError) as info:
            load_config(write(tmp_path, text), env=ENV, require_telegram=False)
        assert "12345678901234567" not in str(info.value)
        assert "98765432109" not in str(info.value)


def test_env_overrides_come_from_the_schema(tmp_path: Path) -> None:
    env = {
        **ENV,
        "KERNEL_GATEWAY_API_KEY": "gw-key-0123456789abcdef",
        "KERNEL_WEBHOOK_SECRET": "whsec-0123456789abcdef",
        "KERNEL_TITLES_API_KEY": "titles-0123456789abcdef",
        "KERNEL_DISABLED_TOOLS": "a, b",
        "KERNEL_TELEGRAM_ALLOWED_USER": "42",
    }
    text = '[general]\ndisabled_tools = ["z"]\n[titles]\nmodel = "tiny"\n'
    config = load_config(write(tmp_path, text), env=env, require_telegram=False)
    assert config.gateway.api_key == env["KERNEL_GATEWAY_API_KEY"]
    assert config.channels.webhook.secret == env["KERNEL_WEBHOOK_SECRET"]
    assert config.titles is not None and config.titles.api_key == env["KERNEL_TITLES_API_KEY"]
    assert config.general.disabled_tools == ["z", "a", "b"]
    assert config.telegram.allowed_user == 42
    found = set(secrets_of(config))
    for name in ("KERNEL_GATEWAY_API_KEY", "KERNEL_WEBHOOK_SECRET", "KERNEL_TITLES_API_KEY"):
        assert env[name] in found
    assert "42" not in found  # the owner's id is kept out of refusals, not masked in logs


def test_unknown_sections_and_keys_are_named(tmp_path: Path) -> None:
    set_language("en")
    raw = {
        "telegarm": {},
        "channels": {"sms": {}, "qq": {"app_idd": "1"}},
        "mcp": {"servers": [{"name": "a", "urll": "x"}]},
        "providers": {"p": {"enabled": False, "switched_off": True}},
        "envs": {"ANYTHING": "goes"},
    }
    assert unknown_keys(raw) == [
        "telegarm",
        "channels.sms",
        "channels.qq.app_idd",
        "mcp.servers[0].urll",
        "providers.p.switched_off",
    ]
    assert SCHEMA.tables["envs"].free


def test_secrets_come_from_the_markers(tmp_path: Path) -> None:
    text = (
        "[providers.anthropic]\n"
        'type = "claude"\nmax_tokens = 10\ndefault_model = "m"\n'
        'headers = { "X-Relay" = "relay-0123456789abcdef", "User-Agent" = "Kernel" }\n'
        '[tts]\ntype = "edge"\nproxy = "http://user:pw-0123456789@proxy:8080"\n'
        '[envs]\nDB_PASSWORD = "pw-abcdefghijklmnop"\nREGION = "eu"\n'
    )
    config = load_config(write(tmp_path, text), env=ENV, require_telegram=False)
    found = set(secrets_of(config))
    assert {"relay-0123456789abcdef", "pw-abcdefghijklmnop", ENV[next(iter(ENV))]} <= found
    assert "http://user:pw-0123456789@proxy:8080" in found
    assert "Kernel" not in found and "eu" not in found
    assert header_names_of(config) == ["X-Relay"]


def test_child_processes_never_inherit_kernels_own_variables() -> None:
    base = {"PATH": "/bin", "KERNEL_TELEGRAM_TOKEN": "1:x", "KERNEL_GATEWAY_API_KEY": "k"}
    assert child_env({"GH_TOKEN": "ghp_1"}, base) == {"PATH": "/bin", "GH_TOKEN": "ghp_1"}


def test_the_language_choices_are_the_catalogues_languages() -> None:
    from kernel.config import GeneralConfig
    from kernel.config.schema import choices_of
    from kernel.core.i18n import LANGUAGES

    assert choices_of(GeneralConfig.model_fields["language"].annotation) == LANGUAGES
