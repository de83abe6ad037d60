"""``kernel chats|models|env …``: seed 000's CLI verbs, talking to the running sidecar
(``kernel skills|workspace …`` are in :mod:`kernel.client.files`, ``kernel
personas|projects …`` in :mod:`kernel.client.profiles`, ``kernel cron|channels …``
in :mod:`kernel.client.cron`, ``kernel usage`` in :mod:`kernel.client.usage`, ``kernel
routing …`` in :mod:`kernel.client.routing`, ``kernel mcp …`` in :mod:`kernel.client.mcp`).

Human-readable tables by default, the sidecar's JSON with ``--json``. Exit codes: 0 done,
1 the sidecar refused (its message is printed), 2 bad usage, 3 Kernel is not running.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import IO, Any
from urllib.parse import quote, urlencode

from kernel.client import cron, files, mcp, profiles, routing, usage
from kernel.client.http import Sidecar, SidecarError, SidecarUnreachable, sidecar_from
from kernel.client.verbs import (
    EXIT_REFUSED,
    EXIT_UNREACHABLE,
    Handler,
    clip,
    print_json,
    stdin_if_dash,
    table,
    verb,
)
from kernel.commands.terminal import render
from kernel.core.clock import shown
from kernel.core.errors import ConfigError
from kernel.core.events import ModelRetrying, ModelSwitched
from kernel.core.i18n import t


def register(sub: Any) -> None:
    """Add the client verbs to ``kernel``'s subcommands."""
    chats = sub.add_parser("chats", help="list/create/get/delete/send chats (running Kernel)")
    verbs = chats.add_subparsers(dest="verb", required=True)
    p = verb(verbs, "list", chats_list, "list chats")
    p.add_argument("--user", help="only this user_id")
    p.add_argument("--channel", help="only this channel")
    p.add_argument("--limit", type=int, default=50)
    p = verb(verbs, "create", chats_create, "create a chat")
    p.add_argument("--session-id")
    p.add_argument("--user")
    p.add_argument("--channel")
    p.add_argument("--name")
    p = verb(verbs, "get", chats_get, "show a chat and its recent messages")
    p.add_argument("chat_id")
    p.add_argument("--rounds", type=int, default=20)
    p = verb(verbs, "delete", chats_delete, "delete chats")
    p.add_argument("chat_ids", nargs="+", metavar="chat_id")
    p = verb(verbs, "send", chats_send, "send a message and print the reply as it forms")
    p.add_argument("text", nargs="+")
    p.add_argument("--chat", help="chat id (default: chat-default)")
    p.add_argument("--session-id")
    p.add_argument("--user")
    p.add_argument("--channel")
    p.add_argument("--no-stream", action="store_true", help="wait for the whole reply")

    models = sub.add_parser("models", help="providers, models, the active model (running Kernel)")
    verbs = models.add_subparsers(dest="verb", required=True)
    verb(verbs, "list", models_list, "list providers and models")
    p = verb(verbs, "config", models_config, "change or add a provider (kept in runtime.toml)")
    p.add_argument("provider")
    p.add_argument("--type", help="claude, openai_compat, or a type a plugin adds")
    on_off = p.add_mutually_exclusive_group()
    on_off.add_argument("--enable", dest="enabled", action="store_true", default=None)
    on_off.add_argument("--disable", dest="enabled", action="store_false")
    p.add_argument("--api-key", help='the key, or "-" to read it from stdin')
    p.add_argument("--base-url")
    p.add_argument("--models", help="comma-separated model names")
    p.add_argument("--default-model")
    p.add_argument("--alias", action="append", default=[], metavar="NAME=MODEL")
    p.add_argument("--max-tokens", type=int)
    verb(verbs, "active-get", models_active_get, "show the active provider and model")
    p = verb(verbs, "active-set", models_active_set, "switch the active provider/model")
    p.add_argument("provider")
    p.add_argument("model", nargs="?")

    env = sub.add_parser("env", help="environment variables for tools and CLIs (running Kernel)")
    verbs = env.add_subparsers(dest="verb", required=True)
    verb(verbs, "list", env_list, "list variables (secrets masked)")
    p = verb(verbs, "set", env_set, "set a variable")
    p.add_argument("key")
    p.add_argument("value", help='the value, or "-" to read it from stdin')
    p = verb(verbs, "delete", env_delete, "delete a variable")
    p.add_argument("key")

    files.register(sub)
    profiles.register(sub)
    cron.register(sub)
    usage.register(sub)
    routing.register(sub)
    mcp.register(sub)


def run(args: argparse.Namespace, out: IO[str] | None = None, err: IO[str] | None = None) -> int:
    out, err = out or sys.stdout, err or sys.stderr
    try:
        sidecar = sidecar_from()
        if sidecar is None:
            raise SidecarUnreachable(t("client.no_address"))
        handler: Handler = args.client
        return handler(sidecar, args, out)
    except SidecarUnreachable as exc:
        print(f"kernel: {exc}", file=err)
        return EXIT_UNREACHABLE
    except SidecarError as exc:
        print(f"kernel: {exc} ({exc.code})", file=err)
        return EXIT_REFUSED
    except ConfigError as exc:
        print(f"kernel: {exc}", file=err)
        return 2
    except OSError as exc:  # a local file to send or to write
        print(f"kernel: {t('client.local_file', path=exc.filename, detail=exc.strerror)}", file=err)
        return 2


# ---------------------------------------------------------------------- chats


def chats_list(sidecar: Sidecar, args: argparse.Namespace, out: IO[str]) -> int:
    query = {"limit": args.limit}
    query |= {k: v for k, v in (("user_id", args.user), ("channel", args.channel)) if v}
    data = sidecar.call("GET", "/chats?" + urlencode(query))
    if args.json:
        return print_json(data, out)
    zone = sidecar.zone()
    rows = [
        [
            c["id"],
            c["channel"],
            c["user_id"] or "-",
            c["session_id"],
            c["message_count"],
            shown(c["updated_at"], zone),
            clip(c["name"], 40),
        ]
        for c in data["chats"]
    ]
    headers = [t(f"client.col.{k}") for k in ("id", "channel", "user", "session", "msgs")]
    table([*headers, t("client.col.updated"), t("client.col.name")], rows, out)
    out.write(t("client.total", shown=len(rows), total=data["total"]) + "\n")
    return 0


def _key_fields(args: argparse.Namespace) -> dict[str, str]:
    pairs = (("session_id", args.session_id), ("user_id", args.user), ("channel", args.channel))
    return {k: v for k, v in pairs if v}


def chats_create(sidecar: Sidecar, args: argparse.Namespace, out: IO[str]) -> int:
    body: dict[str, Any] = _key_fields(args)
    if args.name:
        body["name"] = args.name
    chat = sidecar.call("POST", "/chats", body)
    if args.json:
        return print_json(chat, out)
    where = f"{chat['channel']}/{chat['user_id']}/{chat['session_id']}"
    out.write(t("client.chat_created", id=chat["id"], where=where) + "\n")
    return 0


def chats_get(sidecar: Sidecar, args: argparse.Namespace, out: IO[str]) -> int:
    chat = sidecar.call("GET", f"/chats/{quote(args.chat_id, safe='')}?rounds={args.rounds}")
    if args.json:
        return print_json(chat, out)
    where = f"{chat['channel']}/{chat['user_id']}/{chat['session_id']}"
    out.write(f"{chat['id']}  {where}  {chat['name'] or t('session.untitled')}\n")
    for message in chat["messages"]:
        mark = t("client.failed_mark") if message.get("failed") else ""
        for block in message["content"]:
            text = block.get("text") or block.get("content") or f"[{block.get('type')}]"
            out.write(f"{message['role']}{mark}: {text}\n")
    return 0


def chats_delete(sidecar: Sidecar, args: argparse.Namespace, out: IO[str]) -> int:
    ids: list[str] = args.chat_ids
    if len(ids) == 1:
        data = sidecar.call("DELETE", f"/chats/{quote(ids[0], safe='')}")
        deleted, missing = 1, []
    else:
        data = sidecar.call("POST", "/chats/batch-delete", {"chat_ids": ids})
        deleted, missing = data["deleted"], data["missing"]
    if args.json:
        return print_json(data, out)
    out.write(t("client.deleted", n=deleted) + "\n")
    if missing:
        out.write(t("client.missing", ids=", ".join(missing)) + "\n")
        return EXIT_REFUSED
    return 0


def chats_send(sidecar: Sidecar, args: argparse.Namespace, out: IO[str]) -> int:
    body: dict[str, Any] = _key_fields(args)
    if args.chat:
        chat = sidecar.call("GET", f"/chats/{quote(args.chat, safe='')}?rounds=0")
        body = {k: chat[k] for k in ("session_id", "user_id", "channel")}
    text = " ".join(args.text)
    body["input"] = [
        {"role": "user", "type": "message", "content": [{"type": "text", "text": text}]}
    ]
    if args.no_stream or args.json:
        data = sidecar.call("POST", "/agent/process", {**body, "stream": False})
        if args.json:
            return print_json(data, out)
        out.write(data["reply"] + "\n")
        return 0
    return show_stream(sidecar.stream("/agent/process", {**body, "stream": True}), out)


def show_stream(
    events: Any,
    out: IO[str],
    err: IO[str] | None = None,
    answer: Callable[[dict[str, Any]], None] | None = None,
) -> int:
    """Print a turn's events as they arrive: deltas inline, tools on their own lines;
    an ``ask_user`` question goes to ``answer`` (which asks the person at the terminal)."""
    err = err or sys.stderr
    open_line = streamed = failed = False

    def end_line() -> None:
        nonlocal open_line
        if open_line:
            out.write("\n")
            open_line = False

    for event in events:
        kind = event.get("type")
        if kind == "assistant_delta":
            out.write(event["delta"])
            out.flush()
            streamed = True
            open_line = not event["delta"].endswith("\n")
        elif kind == "tool_call":
            call = event["tool_call"]
            args = clip(json.dumps(call.get("arguments", {}), ensure_ascii=False), 80)
            end_line()
            out.write(t("console.tool_call", name=call["name"], args=args) + "\n")
        elif kind == "tool_result":
            result = event["tool_result"]
            key = "console.tool_result_ok" if result["ok"] else "console.tool_result_err"
            out.write(t(key, summary=clip(result["summary"], 100)) + "\n")
        elif kind == "model_switch":  # a failover: said once, on its own line
            switch = event["switch"]
            end_line()
            line = ModelSwitched(0, switch["from"], switch["to"], switch["reason"]).describe()
            out.write(line + "\n")
        elif kind == "model_retry":  # a retry of the model's call: on its own line
            retry = event["retry"]
            end_line()
            words = ModelRetrying(0, retry["model"], retry["attempt"], retry["of"], retry["reason"])
            out.write(words.describe() + "\n")
        elif kind == "ask_user" and answer is not None:
            end_line()
            answer(event["ask"])
        elif kind == "command":  # a command of the terminal chat: answered without a model
            end_line()
            if shown := render(event["command"]):
                out.write(shown + "\n")
        elif kind == "completed":
            end_line()
            if event.get("cancelled"):
                out.write(f"[{t('turn.cancelled')}]\n")
            elif not streamed and event.get("reply"):  # /new, a direct tool call
                out.write(event["reply"] + "\n")
        elif kind == "error":
            failed = True
            end_line()
            err.write(t("console.error", message=event["meta"]["message"]) + "\n")
            err.flush()
    out.flush()
    return EXIT_REFUSED if failed else 0


# ---------------------------------------------------------------------- models


def models_list(sidecar: Sidecar, args: argparse.Namespace, out: IO[str]) -> int:
    data = sidecar.call("GET", "/models/catalog")
    if args.json:
        return print_json(data, out)
    active = data["active_llm"]
    rows = []
    for p in data["providers"]:
        models = [
            ("*" if (p["id"], m) == (active["provider_id"], active["model"]) else "") + m
            for m in p["models"]
        ]
        aliases = ", ".join(f"{a}={m}" for a, m in p["aliases"].items())
        rows.append(
            [
                p["id"],
                p["type"],
                t("client.yes") if p["enabled"] else t("client.no"),
                p["api_key"] or "-",
                ", ".join(models),
                aliases or "-",
            ]
        )
    keys = ("provider", "type", "enabled", "key", "models", "aliases")
    table([t(f"client.col.{k}") for k in keys], rows, out)
    out.write(t("client.active", provider=active["provider_id"], model=active["model"]) + "\n")
    return 0


def models_config(sidecar: Sidecar, args: argparse.Namespace, out: IO[str]) -> int:
    body: dict[str, Any] = {}
    if args.type:
        body["type"] = args.type
    if args.enabled is not None:
        body["enabled"] = args.enabled
    if args.api_key is not None:
        body["api_key"] = stdin_if_dash(args.api_key)
    if args.base_url:
        body["base_url"] = args.base_url
    if args.models:
        body["models"] = [m.strip() for m in args.models.split(",") if m.strip()]
    if args.default_model:
        body["default_model"] = args.default_model
    if args.alias:
        aliases = {}
        for pair in args.alias:
            name, sep, model = pair.partition("=")
            if not sep or not name or not model:
                raise SidecarError(400, "invalid_request", t("client.bad_alias", pair=pair))
            aliases[name] = model
        body["aliases"] = aliases
    if args.max_tokens is not None:
        body["max_tokens"] = args.max_tokens
    data = sidecar.call("PUT", f"/models/{quote(args.provider, safe='')}/config", body)
    if args.json:
        return print_json(data, out)
    state = t("client.yes") if data["enabled"] else t("client.no")
    out.write(t("client.provider_saved", id=data["id"], enabled=state) + "\n")
    return 0


def models_active_get(sidecar: Sidecar, args: argparse.Namespace, out: IO[str]) -> int:
    data = sidecar.call("GET", "/models/active")
    if args.json:
        return print_json(data, out)
    out.write(f"{data['provider_id']} {data['model']}\n")
    return 0


def models_active_set(sidecar: Sidecar, args: argparse.Namespace, out: IO[str]) -> int:
    body = {"provider_id": args.provider}
    if args.model:
        body["model"] = args.model
    data = sidecar.call("PUT", "/models/active", body)
    if args.json:
        return print_json(data, out)
    out.write(t("client.active", provider=data["provider_id"], model=data["model"]) + "\n")
    return 0


# ---------------------------------------------------------------------- env


def env_list(sidecar: Sidecar, args: argparse.Namespace, out: IO[str]) -> int:
    data = sidecar.call("GET", "/envs")
    if args.json:
        return print_json(data, out)
    rows = [[e["key"], e["value"], e["source"]] for e in data["envs"]]
    table([t("client.col.key"), t("client.col.value"), t("client.col.source")], rows, out)
    return 0


def env_set(sidecar: Sidecar, args: argparse.Namespace, out: IO[str]) -> int:
    value = stdin_if_dash(args.value)
    data = sidecar.call("PUT", f"/envs/{quote(args.key, safe='')}", {"value": value})
    if args.json:
        return print_json(data, out)
    out.write(t("client.env_set", key=data["key"], value=data["value"]) + "\n")
    return 0


def env_delete(sidecar: Sidecar, args: argparse.Namespace, out: IO[str]) -> int:
    data = sidecar.call("DELETE", f"/envs/{quote(args.key, safe='')}")
    if args.json:
        return print_json(data, out)
    out.write(t("client.env_deleted", key=args.key) + "\n")
    return 0
