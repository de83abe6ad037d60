"""``/mcp/servers``: MCP servers listed, added, removed and restarted while Kernel runs.

A server added here is kept in ``data/runtime.toml`` ``[[mcp.servers]]``, which is merged
by name over config.toml's (:func:`kernel.config.mcp.merge_servers`), so it is there
again after a restart; it is connected at once and its tools are offered from the next
model call. Only servers added here can be removed here: one of config.toml is refused
by name (remove it there), as ``DELETE /envs/{key}`` refuses a variable of config.toml.
Any server can be restarted.

A definition is read by the model of ``[[mcp.servers]]`` (:class:`MCPServerConfig`),
with the checks the loader makes across keys; a refusal names the field. Adding a
``stdio`` server runs a command on this machine, and an HTTP server whose headers read
``${VAR}`` sends values of Kernel's environment: both need the sidecar's API key, or from
the web console the owner's confirmation in Telegram (:mod:`kernel.config.privilege`;
403 ``privilege_required`` otherwise). No tool of the model and no guest
channel (QQ, webhook) reaches these routes.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Annotated, Any, Literal
from urllib.parse import urlsplit, urlunsplit

from aiohttp import web
from pydantic import ConfigDict, Field, ValidationError, model_validator

from kernel.config import MCPServerConfig
from kernel.config.mcp import server_problem, unset_reference
from kernel.config.schema import toml_keys
from kernel.config.secrets import masked_view
from kernel.core.i18n import t
from kernel.core.redact import REDACTED, redact_text
from kernel.gateway.api import Param, Router, deps_of, invalid, json_response, refusal
from kernel.gateway.apikey import caller_of
from kernel.gateway.schema import BodyModel, Shape, field_of, problem
from kernel.mcp.manager import ServerStatus, runtime_names

if TYPE_CHECKING:
    from kernel.gateway.deps import GatewayDeps

router = Router("mcp", "MCP servers added, removed and restarted while Kernel runs")

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")  # a path part and a log file's name
DEFINITION_LIMIT = 64 * 1024  # bytes of one definition as JSON: runtime.toml stays small
TYPES = ("http", "stdio")
SERVER = Param("name", "path", str, "the server's name", required=True)


def _described(key: str) -> str:
    return str(MCPServerConfig.model_fields[key].description)


Positive = Annotated[float, Field(gt=0)]


class MCPServerBody(BodyModel):
    """a ``[[mcp.servers]]`` table: read by that model (MCPServerConfig) itself, with the
    checks the loader makes across keys; only its keys"""

    model_config = ConfigDict(strict=True, extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _as_the_config_reads_it(cls, data: Any) -> Any:
        return checked(data) if isinstance(data, dict) else data

    name: Annotated[str, Field(pattern=f"^{NAME.pattern}$", description=_described("name"))]
    type: Literal["http", "stdio"] | None = Field(None, description=_described("type"))
    url: str | None = Field(None, description=_described("url"))
    headers: dict[str, str] | None = Field(None, description=_described("headers"))
    command: str | None = Field(None, description=_described("command"))
    args: list[str] | None = Field(None, description=_described("args"))
    env: dict[str, str] | None = Field(None, description=_described("env"))
    cwd: str | None = Field(None, description="stdio: working directory (from config.toml's)")
    enabled: bool | None = Field(None, description=_described("enabled"))
    connect_timeout: Positive | None = Field(None, description=_described("connect_timeout"))
    timeout: Positive | None = Field(None, description=_described("timeout"))


class MCPServerInfo(Shape):
    name: str
    type: str
    source: Literal["config", "runtime"]
    enabled: bool
    state: Literal["connected", "connecting", "failed", "disabled"]
    tools: int
    skipped: dict[str, str]
    last_error: str
    url: str
    headers: dict[str, str]
    command: str
    args: list[str]
    env: dict[str, str]
    cwd: str | None
    connect_timeout: float
    timeout: float


class MCPServerList(Shape):
    servers: list[MCPServerInfo]


class MCPServerDeleted(Shape):
    deleted: bool
    name: str


def server_info(deps: GatewayDeps, status: ServerStatus, added: list[str]) -> dict[str, Any]:
    """One server as the routes show it: its definition (header and env values masked),
    where it is defined, and its state."""
    server = deps.mcp.server(status.name)
    view = masked_view(server) if server is not None else {}
    if isinstance(view.get("url"), str):
        view["url"] = shown_url(view["url"])
    return {
        **view,
        "name": status.name,
        "type": status.type,
        "source": "runtime" if status.name in added else "config",
        "state": status.state,
        "tools": status.tools,
        "skipped": status.skipped,
        "last_error": status.last_error,
    }


def shown_url(url: str) -> str:
    """A server's address as GET shows it: no user or password, token-like query
    values masked (as the log redactor masks them)."""
    try:
        parts = urlsplit(url)
        if parts.username is not None or parts.password is not None:
            host = parts.hostname or ""
            netloc = f"***@{host}" + (f":{parts.port}" if parts.port else "")
            url = urlunsplit(parts._replace(netloc=netloc))
    except ValueError:
        return REDACTED
    return redact_text(url, ())


async def _added(deps: GatewayDeps) -> list[str]:
    return runtime_names(await deps.runtime.overlay())


@router.get(
    "/mcp/servers",
    summary="Every MCP server: definition (secrets masked), state, tools offered and not",
    response=MCPServerList,
)
async def list_servers(request: web.Request) -> web.Response:
    deps = deps_of(request)
    added = await _added(deps)
    servers = [server_info(deps, status, added) for status in deps.mcp.status()]
    return json_response({"servers": servers})


@router.post(
    "/mcp/servers",
    summary="Add an MCP server (kept in data/runtime.toml); answers after its first "
    "connect attempt. A stdio server (or ${VAR} headers) needs the API key, or from the "
    "console the owner's confirmation in Telegram.",
    body=MCPServerBody,
    response=MCPServerInfo,
    status=201,
    errors=(403, 409, 503),
)
async def add_server(request: web.Request, body: MCPServerBody) -> web.Response:
    deps = deps_of(request)
    table = definition(body, deps)
    status = await deps.mcp.add(deps.runtime, table, caller=caller_of(request))
    return json_response(server_info(deps, status, [status.name]), status=201)


@router.delete(
    "/mcp/servers/{name}",
    summary="Remove an MCP server added at run time: session closed, tools withdrawn",
    params=(SERVER,),
    response=MCPServerDeleted,
    errors=(404, 409, 503),
)
async def remove_server(request: web.Request) -> web.Response:
    deps = deps_of(request)
    name = request.match_info["name"]
    await deps.mcp.remove(deps.runtime, name)
    return json_response({"deleted": True, "name": name})


@router.post(
    "/mcp/servers/{name}/restart",
    summary="Reconnect an MCP server (a stdio server's process is started again)",
    params=(SERVER,),
    response=MCPServerInfo,
    errors=(404, 503),
)
async def restart_server(request: web.Request) -> web.Response:
    deps = deps_of(request)
    status = await deps.mcp.restart(request.match_info["name"])
    return json_response(server_info(deps, status, await _added(deps)))


def checked(data: dict[str, Any]) -> dict[str, Any]:
    """The body as a ``[[mcp.servers]]`` table, checked as the loader checks one (and
    stricter: known keys only, a name fit for a path, no NUL or line break)."""
    data = {key: value for key, value in data.items() if value is not None}
    keys = toml_keys(MCPServerConfig)
    unknown = next((key for key in data if key not in keys), None)
    if unknown is not None:
        field = unknown[:64]
        raise invalid(t("gw.mcp_field", field=field, fields=", ".join(keys)), field=field)
    name = data.get("name")
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise invalid(t("gw.mcp_name"), field="name")
    if len(json.dumps(data)) > DEFINITION_LIMIT:
        text = t("gw.mcp_too_large", limit=DEFINITION_LIMIT)
        raise refusal("request_too_large", text, {"limit": DEFINITION_LIMIT})
    _check_values(data)
    try:
        server = MCPServerConfig.model_validate(data)
    except ValidationError as exc:
        message, field = _problem(exc)
        raise invalid(message, field=field) from None
    wrong = server_problem(server)
    if wrong is not None:
        raise invalid(t(wrong[1], key=wrong[0]), field=wrong[0])
    return data


def definition(body: MCPServerBody, deps: GatewayDeps) -> dict[str, Any]:
    """The table to keep: the body as given, its ``${VAR}`` references set in Kernel's
    environment."""
    data = body.model_dump(exclude_unset=True)
    unset = unset_reference(MCPServerConfig.model_validate(data), deps.config.source_env)
    if unset is not None:
        field, variable = unset
        raise invalid(t("gw.mcp_env_unset", field=field, var=variable), field=field)
    return data


def _check_values(data: dict[str, Any]) -> None:
    """What the model would take but Kernel must not: a type outside the two, a table
    of anything but strings, a NUL (or a line break in a header)."""
    kind = data.get("type", "http")
    if kind not in TYPES:
        raise invalid(t("gw.bad_field", field="type", expected='"http" or "stdio"'), field="type")
    for key in ("headers", "env"):
        table = data.get(key, {})
        strings = isinstance(table, dict) and all(isinstance(v, str) for v in table.values())
        if not strings:
            raise invalid(t("gw.bad_field", field=key, expected="an object of strings"), field=key)
        for name, value in table.items():
            field = f"{key}.{name[:64]}"
            if _bad_text(name, key) or _bad_text(value, key):
                raise invalid(t("gw.mcp_bad_text", field=field), field=field)
    args = data.get("args", [])
    for i, arg in enumerate(args if isinstance(args, list) else []):
        if isinstance(arg, str) and "\0" in arg:
            raise invalid(t("gw.mcp_bad_text", field=f"args[{i}]"), field=f"args[{i}]")
    for key in ("name", "url", "command", "cwd"):
        value = data.get(key)
        if isinstance(value, str) and _bad_text(value, key):
            raise invalid(t("gw.mcp_bad_text", field=key), field=key)


def _bad_text(value: str, key: str) -> bool:
    # Line breaks are refused where they would split a line (headers, names, URLs, paths).
    return "\0" in value or (key != "env" and ("\n" in value or "\r" in value))


def _problem(exc: ValidationError) -> tuple[str, str]:
    """The sidecar's wording, with the kinds the config model adds worded too."""
    error = exc.errors(include_url=False)[0]
    field = field_of(error["loc"])
    if field in ("connect_timeout", "timeout"):
        return t("gw.bad_field", field=field, expected="a number above 0"), field
    return problem(exc)
