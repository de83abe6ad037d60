"""``kernel cron list/create/update/delete/pause/resume/run/state`` and
``kernel channels list/types/get/set`` (seed 000's CLI), against the running sidecar."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import IO, Any
from urllib.parse import quote

from kernel.client.http import Sidecar, SidecarError
from kernel.client.verbs import EXIT_REFUSED, print_json, table, verb
from kernel.core.i18n import t


def register(sub: Any) -> None:
    cron = sub.add_parser("cron", help="scheduled jobs (running Kernel)")
    verbs = cron.add_subparsers(dest="verb", required=True)
    verb(verbs, "list", cron_list, "list jobs with their next run")
    p = verb(verbs, "create", cron_create, "create a job")
    _spec_arguments(p, create=True)
    p = verb(verbs, "update", cron_update, "change a job (only what is given)")
    p.add_argument("job_id")
    _spec_arguments(p, create=False)
    for name, handler, help_text in (
        ("delete", cron_delete, "delete a job"),
        ("pause", cron_pause, "pause a job"),
        ("resume", cron_resume, "resume a paused job"),
        ("run", cron_run, "run a job now"),
        ("state", cron_state, "show a job's state"),
    ):
        verb(verbs, name, handler, help_text).add_argument("job_id")

    channels = sub.add_parser("channels", help="channel settings (running Kernel)")
    verbs = channels.add_subparsers(dest="verb", required=True)
    verb(verbs, "list", channels_list, "every channel's settings (secrets masked)")
    verb(verbs, "types", channels_types, "channel types and their fields")
    verb(verbs, "get", channels_get, "one channel's settings").add_argument("name")
    p = verb(verbs, "set", channels_set, "change settings: name key=value …")
    p.add_argument("name")
    p.add_argument("pairs", nargs="+", metavar="key=value")


def _spec_arguments(p: argparse.ArgumentParser, *, create: bool) -> None:
    p.add_argument("--name", required=create)
    when = p.add_mutually_exclusive_group(required=create)
    when.add_argument("--cron", help='five cron fields, e.g. "0 9 * * 1"')
    when.add_argument("--every", help="a fixed interval, e.g. 30m, 2h, 1d")
    when.add_argument("--at", help="once, local time YYYY-MM-DDTHH:MM")
    task = p.add_mutually_exclusive_group(required=create)
    task.add_argument("--text", help="the prompt run at each time")
    task.add_argument("--workflow", type=Path, help="a JSON file with the workflow")
    p.add_argument("--channel", help="telegram (default), webhook, qq or console")
    p.add_argument("--target", help="the channel's user/target id")
    p.add_argument("--session-id")
    on_off = p.add_mutually_exclusive_group()
    on_off.add_argument("--enable", dest="enabled", action="store_true", default=None)
    on_off.add_argument("--disable", dest="enabled", action="store_false")
    if create:
        p.add_argument("--id", help="the job's id (default: generated)")


def _spec(args: argparse.Namespace) -> dict[str, Any]:
    body: dict[str, Any] = {}
    if getattr(args, "id", None):
        body["id"] = args.id
    if args.name:
        body["name"] = args.name
    if args.cron:
        body["schedule"] = {"type": "cron", "cron": args.cron}
    elif args.every:
        body["schedule"] = {"type": "interval", "every": args.every}
    elif args.at:
        body["schedule"] = {"type": "once", "at": args.at}
    if args.text:
        body["text"] = args.text
        body["task_type"] = "text"
    elif args.workflow:
        try:
            body["workflow"] = json.loads(args.workflow.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            detail = getattr(exc, "strerror", None) or str(exc)
            message = t("client.bad_workflow", detail=detail)
            raise SidecarError(400, "invalid_request", message) from None
        body["task_type"] = "workflow"
    if args.channel or args.target or args.session_id:
        target = {k: v for k, v in (("user_id", args.target), ("session_id", args.session_id)) if v}
        body["dispatch"] = {"target": target} | ({"channel": args.channel} if args.channel else {})
    if args.enabled is not None:
        body["enabled"] = args.enabled
    return body


def _job_path(job_id: str, tail: str = "") -> str:
    return f"/cron/jobs/{quote(job_id, safe='')}{tail}"


def _when(value: str | None) -> str:
    return value[:16].replace("T", " ") if value else "-"


def _schedule(schedule: dict[str, Any]) -> str:
    kind = schedule.get("type")
    if kind == "cron":
        return str(schedule.get("cron"))
    if kind == "interval":
        return f"every {schedule.get('every')}"
    return f"at {str(schedule.get('at', '')).replace('T', ' ')}"


def _status(job: dict[str, Any]) -> str:
    state = job["state"]
    if state["running"]:
        return t("client.cron_running")
    if state["paused"]:
        return t("client.cron_paused")
    if not job["enabled"]:
        return t("client.cron_disabled")
    return t("client.cron_enabled")


def cron_list(sidecar: Sidecar, args: argparse.Namespace, out: IO[str]) -> int:
    data = sidecar.call("GET", "/cron/jobs")
    if args.json:
        return print_json(data, out)
    rows = [
        [
            job["id"],
            _status(job),
            _schedule(job["schedule"]),
            _when(job["state"]["next_run_at"]),
            job["state"]["last_status"] or "-",
            job["dispatch"]["channel"],
            job["name"],
        ]
        for job in data["jobs"]
    ]
    keys = ("id", "status", "schedule", "next", "last", "channel", "name")
    table([t(f"client.col.{k}") for k in keys], rows, out)
    return 0


def _show(job: dict[str, Any], out: IO[str], key: str) -> int:
    next_run = _when(job["state"]["next_run_at"])
    out.write(t(key, id=job["id"], name=job["name"], next=next_run) + "\n")
    return 0


def cron_create(sidecar: Sidecar, args: argparse.Namespace, out: IO[str]) -> int:
    job = sidecar.call("POST", "/cron/jobs", _spec(args))
    return print_json(job, out) if args.json else _show(job, out, "client.cron_created")


def cron_update(sidecar: Sidecar, args: argparse.Namespace, out: IO[str]) -> int:
    job = sidecar.call("PUT", _job_path(args.job_id), _spec(args))
    return print_json(job, out) if args.json else _show(job, out, "client.cron_updated")


def cron_delete(sidecar: Sidecar, args: argparse.Namespace, out: IO[str]) -> int:
    data = sidecar.call("DELETE", _job_path(args.job_id))
    if args.json:
        return print_json(data, out)
    out.write(t("client.cron_deleted", id=args.job_id) + "\n")
    return 0


def cron_pause(sidecar: Sidecar, args: argparse.Namespace, out: IO[str]) -> int:
    job = sidecar.call("POST", _job_path(args.job_id, "/pause"))
    return print_json(job, out) if args.json else _show(job, out, "client.cron_paused_now")


def cron_resume(sidecar: Sidecar, args: argparse.Namespace, out: IO[str]) -> int:
    job = sidecar.call("POST", _job_path(args.job_id, "/resume"))
    return print_json(job, out) if args.json else _show(job, out, "client.cron_resumed")


def cron_run(sidecar: Sidecar, args: argparse.Namespace, out: IO[str]) -> int:
    data = sidecar.call("POST", _job_path(args.job_id, "/run"))
    if args.json:
        return print_json(data, out)
    out.write(t("client.cron_started", id=data["id"]) + "\n")
    return 0


def cron_state(sidecar: Sidecar, args: argparse.Namespace, out: IO[str]) -> int:
    state = sidecar.call("GET", _job_path(args.job_id, "/state"))
    if args.json:
        return print_json(state, out)
    for key in ("next_run_at", "last_run_at", "last_status", "last_result", "last_error"):
        value = state.get(key)
        shown = " ".join(str(value).split()) if value is not None else "-"
        out.write(f"{key}: {shown}\n")
    out.write(f"run_count: {state['run_count']}\n")
    if state.get("paused"):
        out.write("paused: true\n")
    return EXIT_REFUSED if state.get("last_status") == "failed" else 0


def _settings(data: dict[str, Any], out: IO[str]) -> None:
    for key, value in data.items():
        shown = ", ".join(value) if isinstance(value, list) else value
        if isinstance(value, bool):
            shown = "true" if value else "false"
        out.write(f"  {key} = {shown}\n")


def channels_list(sidecar: Sidecar, args: argparse.Namespace, out: IO[str]) -> int:
    data = sidecar.call("GET", "/config/channels")
    if args.json:
        return print_json(data, out)
    for name, settings in data["channels"].items():
        out.write(f"{name}:\n")
        _settings(settings, out)
    return 0


def channels_types(sidecar: Sidecar, args: argparse.Namespace, out: IO[str]) -> int:
    data = sidecar.call("GET", "/config/channels/types")
    if args.json:
        return print_json(data, out)
    for kind in data["types"]:
        fields = ", ".join(f["name"] + ("*" if f["secret"] else "") for f in kind["fields"])
        out.write(f"{kind['name']}: {kind['description']}\n  {fields}\n")
    return 0


def channels_get(sidecar: Sidecar, args: argparse.Namespace, out: IO[str]) -> int:
    data = sidecar.call("GET", f"/config/channels/{quote(args.name, safe='')}")
    if args.json:
        return print_json(data, out)
    out.write(f"{args.name}:\n")
    _settings(data, out)
    return 0


def _value(kind: str, text: str, key: str) -> Any:
    if kind == "boolean":
        if text.lower() not in ("true", "false"):
            raise SidecarError(400, "invalid_request", t("client.bad_value", key=key, kind=kind))
        return text.lower() == "true"
    if kind in ("integer", "number"):
        try:
            return int(text) if kind == "integer" else float(text)
        except ValueError:
            raise SidecarError(
                400, "invalid_request", t("client.bad_value", key=key, kind=kind)
            ) from None
    if kind == "array":
        return [v.strip() for v in text.split(",") if v.strip()]
    return text


def channels_set(sidecar: Sidecar, args: argparse.Namespace, out: IO[str]) -> int:
    types = sidecar.call("GET", "/config/channels/types")["types"]
    fields = next((k["fields"] for k in types if k["name"] == args.name), None)
    kinds = {f["name"]: f["type"] for f in fields or []}
    body: dict[str, Any] = {}
    for pair in args.pairs:
        key, sep, text = pair.partition("=")
        if not sep or not key:
            raise SidecarError(400, "invalid_request", t("client.bad_pair", pair=pair))
        if text == "-":
            import sys

            text = sys.stdin.readline().rstrip("\n")
        body[key] = _value(kinds.get(key, "string"), text, key)
    data = sidecar.call("PUT", f"/config/channels/{quote(args.name, safe='')}", body)
    if args.json:
        return print_json(data, out)
    out.write(t("client.channel_saved", name=args.name) + "\n")
    _settings(data, out)
    return 0
