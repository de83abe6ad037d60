"""``GET /config``: the configuration in effect for the console's settings page (issue
21), every secret masked wholly: a page shows that it is set, never a part of it."""

from __future__ import annotations

from kernel.core.redact import REDACTED
from tests.conftest import SECRET_KEY
from tests.gateway.conftest import API_KEY, SidecarFactory
from tests.mcp.conftest import mcp_toml
from tests.sim.anthropic_sim import AnthropicSim

TG_TOKEN = "123456789:AAE-telegram-token-secret-0123456789"
STT_KEY = "stt-key-ABCDEFGH0123456789"
QQ_SECRET = "qq-secret-ABCDEFGH01234567"
HOOK_SECRET = "hook-secret-ABCDEFGH012345"
HEADER_VALUE = "Bearer mcp-header-ABCDEFGH0123"
MCP_ENV = "mcp-env-value-ABCDEFGH0123"
ARG_TOKEN = "arg-token-ABCDEFGH01234567"
EQ_TOKEN = "eq-token-ABCDEFGH012345678"
URL_PASSWORD = "url-pass-ABCDEFGH0123"
ENV_SECRET = "env-secret-ABCDEFGH0123456"
SHORT = "short12"
GH_PAT = "ghp_0123456789abcdefABCDEF0123456789"  # by its shape, under any name
DEPLOY = "deploy-creds-ABCDEFGH0123"
AUTH_ARG = "auth-arg-ABCDEFGH01234567"
PAT_ARG = "pat-arg-ABCDEFGH012345678"
CREDS_ARG = "creds-arg-ABCDEFGH0123456"
HDR_VALUE = "hdrval-ABCDEFGH0123456789"
QUERY_AUTH = "query-auth-ABCDEFGH01234"
SECRETS = [
    GH_PAT,
    DEPLOY,
    AUTH_ARG,
    PAT_ARG,
    CREDS_ARG,
    HDR_VALUE,
    QUERY_AUTH,
    API_KEY,
    SECRET_KEY,
    TG_TOKEN,
    STT_KEY,
    QQ_SECRET,
    HOOK_SECRET,
    HEADER_VALUE,
    "mcp-header-ABCDEFGH0123",
    MCP_ENV,
    ARG_TOKEN,
    EQ_TOKEN,
    URL_PASSWORD,
    ENV_SECRET,
    SHORT,
]

EXTRA = f"""
[telegram]
token = "{TG_TOKEN}"
allowed_user = 424242

[stt]
api_key = "{STT_KEY}"

[channels.qq]
app_id = "1234"
client_secret = "{QQ_SECRET}"

[channels.webhook]
url = "https://hooks.example/k?token={URL_PASSWORD}"
secret = "{HOOK_SECRET}"

[envs]
GITHUB_TOKEN = "{ENV_SECRET}"
OTHER_PASSWORD = "{SHORT}"
PLAIN_NAME = "visible-value"
GH_PAT = "{GH_PAT}"
DEPLOY_CREDENTIALS = "{DEPLOY}"
SOME_NOTE = "use {GH_PAT} for the mirror"
SERVICE_URL = "https://svc.example/api?auth={QUERY_AUTH}"
""" + mcp_toml(
    [
        {
            "name": "remote",
            "type": "http",
            "url": f"https://user:{URL_PASSWORD}@mcp.example/mcp",
            "headers": {"Authorization": HEADER_VALUE},
            "enabled": False,
        },
        {
            "name": "local",
            "type": "stdio",
            "command": "some-server",
            "args": [
                "--token",
                ARG_TOKEN,
                f"--api-key={EQ_TOKEN}",
                "--auth",
                AUTH_ARG,
                f"--pat={PAT_ARG}",
                "--credentials",
                CREDS_ARG,
                f"X-Custom-Auth:{HDR_VALUE}",
                "--verbose",
            ],
            "env": {"SERVICE_CONFIG": MCP_ENV},
            "enabled": False,
        },
    ]
)


async def test_config_is_shown_with_every_secret_masked(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim, api_key=API_KEY, extra=EXTRA)
    status, data, response = await sc.call("GET", "/config")
    assert status == 200
    raw = await response.text()
    for secret in SECRETS:
        assert secret not in raw, secret
    sections = data["sections"]
    # Every table of the config tree is there, keys as in TOML.
    assert {"general", "gateway", "providers", "telegram", "mcp", "envs", "channels"} <= set(
        sections
    )
    assert sections["general"]["language"] == "en"
    assert sections["providers"]["main"]["default_model"] == "model-a"
    assert sections["providers"]["main"]["api_key"] == REDACTED
    assert sections["gateway"]["api_key"] == REDACTED  # not even 8 of its characters
    assert sections["telegram"]["token"] == REDACTED
    assert sections["telegram"]["allowed_user"] != 424242  # the owner's id is kept out too
    assert sections["stt"]["api_key"] == REDACTED
    assert sections["channels"]["qq"]["client_secret"] == REDACTED
    assert sections["channels"]["qq"]["app_id"] == "1234"
    assert sections["channels"]["webhook"]["secret"] == REDACTED
    envs = sections["envs"]
    assert envs["GITHUB_TOKEN"] == envs["OTHER_PASSWORD"] == envs["GH_PAT"] == REDACTED
    assert envs["DEPLOY_CREDENTIALS"] == REDACTED and envs["PLAIN_NAME"] == "visible-value"
    assert envs["SOME_NOTE"] == f"use {REDACTED} for the mirror"
    remote, local = sections["mcp"]["servers"]
    assert remote["headers"] == {"Authorization": REDACTED}
    assert remote["url"].endswith("@mcp.example/mcp") and remote["name"] == "remote"
    assert local["env"] == {"SERVICE_CONFIG": REDACTED}
    assert local["args"][0] == "--token" and local["args"][-1] == "--verbose"
    assert local["command"] == "some-server"


async def test_config_needs_the_key_and_is_documented(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim, api_key=API_KEY)
    status, data, _ = await sc.call("GET", "/config", headers={})
    assert status == 401 and API_KEY not in str(data)
    status, doc, _ = await sc.call("GET", "/openapi.json")
    assert "get" in doc["paths"]["/config"]
    status, _, _ = await sc.call("PUT", "/config", {"general": {}})
    assert status == 405  # read-only
