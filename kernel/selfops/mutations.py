"""Two-phase configuration changes (seed 000 "SelfOps 契约"): preview, then apply.

``preview`` works out what a change would do without doing it: the files or settings
it touches, a unified diff, a summary per target, checks (whitelist, structure,
sensitive fields, risk) and whether it needs ``allow_sensitive``. It returns a one-time
``mutation_id`` and a ``confirm_hash``, valid for five minutes. ``apply`` must bring both
back with the same ``allow_sensitive``; it refuses a change touching secrets unless that
was allowed, and a change whose target was modified since the preview (its content hash
is compared under the lock that also guards the write).

Targets:

- ``workspace_file``: text files in the folder of config.toml, only ``SOUL.md`` (and the
  configured ``general.soul``), ``prompts/**`` and ``skills/**``; operations ``replace``
  (whole content) and ``text_rewrite`` (search → replace). Written as one change.
- ``provider_config``: the ``[providers]`` section of ``data/runtime.toml``; operations
  ``merge`` (a table merged in; ``null`` removes a key) and ``replace`` (a dotted path set
  to a value, ``null`` removes it). Validated as a whole configuration and applied live
  through :class:`kernel.runtime.Runtime`.
- ``active_llm``: the active provider and model, the same setting ``/models/active``,
  ``/provider`` and ``/model`` change.

Each preview and each apply (refused ones too) is recorded in the audit trail
(:mod:`kernel.selfops.recording`).
"""

from __future__ import annotations

import asyncio
import copy
import difflib
import hashlib
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import tomli_w

from kernel.agent.agent import Agent, SelectionError
from kernel.audit import AuditLog
from kernel.audit import kinds as audit_kinds
from kernel.config import Config, unknown_keys
from kernel.config.privilege import config_changes, strings_of
from kernel.core.errors import CodedError, ConfigError, SelfOpsError, WorkspaceError
from kernel.core.i18n import t
from kernel.runtime import Overlay, Runtime, changed_keys
from kernel.selfops import recording
from kernel.selfops.sensitive import added_sensitive, mask_lines, masked, sensitive_keys
from kernel.workspace.files import Parts, Workspace, parts_of

TTL = timedelta(minutes=5)
MAX_PENDING = 64
LIMIT_SETTING = "selfops_max_bytes"  # [gateway]: the largest file a preview may produce
FILE_TARGET = "workspace_file"
PROVIDERS_TARGET = "provider_config"
ACTIVE_TARGET = "active_llm"
TARGETS = (FILE_TARGET, PROVIDERS_TARGET, ACTIVE_TARGET)
WHITELIST = ("SOUL.md", "prompts/**", "skills/**")
Clock = Callable[[], datetime]


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _stable(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _bad(message: str, **details: Any) -> SelfOpsError:
    return SelfOpsError("invalid_request", message, details)


@dataclass(slots=True)
class _Doc:
    """A target's text before and after (``before`` None: the file is new)."""

    path: str
    before: str | None
    after: str
    parts: Parts = ()

    @property
    def base_hash(self) -> str:
        return _hash(self.before) if self.before is not None else ""


@dataclass(slots=True)
class Pending:
    id: str
    target: str
    expires: datetime
    allow_sensitive: bool
    requires_sensitive: bool
    docs: list[_Doc]
    confirm_hash: str = ""
    providers: dict[str, Any] | None = None  # the new [providers] of runtime.toml
    active: tuple[str, str] | None = None
    base_hash: str = ""  # of the state the preview was made from
    sensitive: list[str] = field(default_factory=list)
    keys: list[str] = field(default_factory=list)  # the settings' dotted names it changes
    given: set[str] = field(default_factory=set)  # the strings its operations carry
    privileged: list[str] = field(default_factory=list)  # fields the privilege rule guards


class Mutations:
    """Pending previews (in memory, five minutes each) and their application."""

    def __init__(
        self,
        config: Config,
        runtime: Runtime,
        agent: Agent,
        *,
        clock: Clock | None = None,
        lock: asyncio.Lock | None = None,
        audit: AuditLog | None = None,
    ) -> None:
        """``lock``: the one the sidecar's workspace writes take (the folders may overlap)."""
        self.config = config
        self.audit = audit
        self.runtime = runtime
        self.agent = agent
        self.clock: Clock = clock or (lambda: datetime.now(UTC))
        self.files = Workspace(
            config.base_dir,
            protected=[config.path, config.data_dir],
            allow_hard_links=config.gateway.allow_hard_links,
            lock=lock,
        )
        self._pending: dict[str, Pending] = {}
        self._lock = asyncio.Lock()  # one apply at a time

    # ----- preview ---------------------------------------------------------------------

    async def preview(
        self, target: str, operations: list[Any], allow_sensitive: bool = False, actor: str = "api"
    ) -> dict[str, Any]:
        target = "workspace_file" if target == "file" else target
        if target not in TARGETS:
            raise _bad(t("selfops.bad_target", targets=", ".join(TARGETS)), field="target")
        if not operations:
            raise _bad(t("selfops.no_operations"), field="operations")
        ops = [_operation(op, i) for i, op in enumerate(operations)]
        now = self.clock()
        pending = Pending(uuid.uuid4().hex, target, now + TTL, allow_sensitive, False, [])
        if target == FILE_TARGET:
            await self._prepare_files(pending, ops)
        elif target == PROVIDERS_TARGET:
            await self._prepare_providers(pending, ops)
        else:
            self._prepare_active(pending, ops)
        pending.requires_sensitive = bool(pending.sensitive)
        result = await asyncio.to_thread(self._finish, pending)
        self._remember(pending, now)
        kind = audit_kinds.SELFOPS_PREVIEW
        await recording.record(self.audit, kind, actor, pending.id, pending, "previewed")
        return result

    def _finish(self, pending: Pending) -> dict[str, Any]:
        """The confirm hash and the preview's JSON (diffs): in a worker thread."""
        pending.confirm_hash = _hash(
            _stable(
                {
                    "id": pending.id,
                    "target": pending.target,
                    "base": pending.base_hash,
                    "after": [_hash(d.after) for d in pending.docs],
                    "allow_sensitive": pending.allow_sensitive,
                    "requires_sensitive_allow": pending.requires_sensitive,
                }
            )
        )
        return self._preview_json(pending)

    def _remember(self, pending: Pending, now: datetime) -> None:
        # Expired previews are kept one more TTL, so applying one says "expired".
        for key, old in list(self._pending.items()):
            if old.expires + TTL < now:
                del self._pending[key]
        while len(self._pending) >= MAX_PENDING:
            del self._pending[next(iter(self._pending))]
        self._pending[pending.id] = pending

    def _preview_json(self, p: Pending) -> dict[str, Any]:
        summary = []
        chunks = []
        for doc in p.docs:
            before = doc.before if doc.before is not None else ""
            diff = _unified(doc.path, before, doc.after, new=doc.before is None)
            added = sum(1 for line in diff if line.startswith("+") and not line.startswith("+++"))
            removed = sum(1 for line in diff if line.startswith("-") and not line.startswith("---"))
            chunks.extend(diff)
            summary.append(
                {
                    "target": p.target,
                    "path": doc.path,
                    "changed": before != doc.after or doc.before is None,
                    "created": doc.before is None,
                    "before_hash": doc.base_hash,
                    "after_hash": _hash(doc.after),
                    "added_lines": added,
                    "removed_lines": removed,
                }
            )
        changed = any(s["changed"] for s in summary)
        risk = "high" if p.requires_sensitive else "medium" if changed else "low"
        return {
            "mutation_id": p.id,
            "target": p.target,
            "confirm_hash": p.confirm_hash,
            "expires_at": p.expires.isoformat(timespec="seconds"),
            "ttl_seconds": int(TTL.total_seconds()),
            "checks": {
                "path_whitelist_passed": True,
                "structure_valid": True,
                "risk_level": risk,
                "sensitive_fields": list(p.sensitive),
                "privileged_fields": list(p.privileged),
                "denied_paths": [],
            },
            "diff_summary": summary,
            "unified_diff": "\n".join(chunks),
            "requires_sensitive_allow": p.requires_sensitive,
            "allow_sensitive": p.allow_sensitive,
        }

    # workspace_file

    def _allowed(self, parts: Parts) -> bool:
        if (
            parts == ("SOUL.md",)
            or self.config.base_dir.joinpath(*parts) == self.config.general.soul
        ):
            return True  # the configured general.soul, wherever under the folder it is
        return len(parts) > 1 and parts[0] in ("prompts", "skills")

    def _file_parts(self, path: str) -> Parts:
        try:
            parts = parts_of(path)
        except WorkspaceError as exc:
            raise _path_denied(path, str(exc)) from None
        if not self._allowed(parts) or self.files.is_protected(parts):
            raise _path_denied(path, t("selfops.whitelist", paths=", ".join(WHITELIST)))
        return parts

    async def _read_text(self, parts: Parts) -> str | None:
        try:
            data = await self.files.read("/".join(parts))
        except WorkspaceError as exc:
            if exc.code == "not_found":
                return None
            raise _path_denied("/".join(parts), str(exc)) from None
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise _bad(t("selfops.not_text", path="/".join(parts))) from None

    async def _prepare_files(self, pending: Pending, ops: list[dict[str, Any]]) -> None:
        docs: dict[str, _Doc] = {}
        limit = self.config.gateway.selfops_max_bytes
        for index, op in enumerate(ops):
            path = _text(op, "path", index)
            parts = self._file_parts(path)
            key = "/".join(parts)
            if key not in docs:
                current = await self._read_text(parts)
                docs[key] = _Doc(key, current, current or "", parts)
            doc = docs[key]
            kind = op["kind"]
            if kind == "replace":
                value = op.get("value")
                if not isinstance(value, str):
                    raise _bad(t("selfops.op_field", index=index, field="value", kind="string"))
                doc.after = value
            elif kind == "text_rewrite":
                search = _text(op, "search", index)
                replace = op.get("replace", "")
                if not isinstance(replace, str):
                    raise _bad(t("selfops.op_field", index=index, field="replace", kind="string"))
                count = doc.after.count(search)
                if not count:
                    raise _bad(t("selfops.search_missing", index=index, path=key))
                # Refused before it is built: a short search with a long replace multiplies.
                if len(doc.after) + count * (len(replace) - len(search)) > limit:
                    raise self._too_large(key)
                doc.after = doc.after.replace(search, replace)
            else:
                raise _bad(t("selfops.bad_kind", index=index, kinds="replace, text_rewrite"))
            if len(doc.after) > limit or len(doc.after.encode("utf-8")) > limit:
                raise self._too_large(key)
        pending.docs = list(docs.values())
        # Hashing, the sensitive-field scan (and the diff, in preview) are CPU work on up to
        # selfops_max_bytes per file: off the event loop.
        await asyncio.to_thread(_scan_files, pending)

    def _too_large(self, path: str) -> SelfOpsError:
        limit = self.config.gateway.selfops_max_bytes
        setting = f"gateway.{LIMIT_SETTING}"
        message = t("selfops.too_large", path=path, limit=limit, setting=LIMIT_SETTING)
        return _bad(message, path=path, limit=limit, setting=setting)

    # provider_config

    async def _prepare_providers(self, pending: Pending, ops: list[dict[str, Any]]) -> None:
        overlay = await self.runtime.overlay()
        before = copy.deepcopy(overlay.get("providers", {}))
        if not isinstance(before, dict):
            before = {}
        after = copy.deepcopy(before)
        touched: list[tuple[str, Any]] = []  # (dotted path, value) the operations set
        for index, op in enumerate(ops):
            kind = op["kind"]
            if kind == "merge":
                value = op.get("value")
                if not isinstance(value, dict):
                    raise _bad(t("selfops.op_field", index=index, field="value", kind="object"))
                _merge(after, value)
                touched.append(("", value))
            elif kind == "replace":
                path = _text(op, "path", index)
                keys = path.split(".")
                if any(not k for k in keys):
                    raise _bad(t("selfops.bad_dotted", index=index, path=path))
                _set(after, keys, op.get("value"), index)
                touched.append((path, op.get("value")))
            else:
                raise _bad(t("selfops.bad_kind", index=index, kinds="merge, replace"))
        unknown = [k for k in unknown_keys({"providers": after}) if k.startswith("providers.")]
        if unknown:
            raise SelfOpsError(
                "invalid_request",
                t("selfops.unknown_keys", keys=", ".join(unknown)),
                {"target": PROVIDERS_TARGET, "unknown": unknown},
            )
        candidate = copy.deepcopy(overlay)
        if after:
            candidate["providers"] = after
        else:
            candidate.pop("providers", None)
        try:
            tomli_w.dumps(candidate)
            fresh = await self.runtime.validate(candidate)
        except (ConfigError, TypeError, ValueError) as exc:
            raise SelfOpsError("invalid_request", str(exc), {"target": PROVIDERS_TARGET}) from None
        # A keyed provider moved: checked again, with the caller, when it is applied.
        pending.given = strings_of([value for _, value in touched])
        found = config_changes(self.config, fresh, pending.given)
        pending.privileged = [c.field for c in found]
        where = _relative_name(self.config)
        shown_before = _toml({"providers": masked(before)}) if before else ""
        shown_after = _toml({"providers": masked(after)}) if after else ""
        pending.docs = [_Doc(where, shown_before, shown_after)]
        pending.providers = after
        pending.base_hash = _hash(_stable(before))
        pending.keys = changed_keys({"providers": before}, {"providers": after})
        fields: list[str] = []
        for path, value in touched:
            for name in sensitive_keys(value, path):
                if name not in fields:
                    fields.append(name)
        pending.sensitive = fields

    # active_llm

    def _active_doc(self) -> str:
        selection = self.agent.selection
        return f'provider_id = "{selection.provider_name}"\nmodel = "{selection.model}"\n'

    def _prepare_active(self, pending: Pending, ops: list[dict[str, Any]]) -> None:
        chosen: tuple[str, str] | None = None
        for index, op in enumerate(ops):
            if op["kind"] != "replace":
                raise _bad(t("selfops.bad_kind", index=index, kinds="replace"))
            value = op.get("value")
            if not isinstance(value, dict) or not isinstance(value.get("provider_id"), str):
                raise _bad(
                    t("selfops.op_field", index=index, field="value.provider_id", kind="string")
                )
            model = value.get("model")
            if model is not None and not isinstance(model, str):
                raise _bad(t("selfops.op_field", index=index, field="value.model", kind="string"))
            try:
                chosen = self.agent.selection.check_model(value["provider_id"], model or None)
            except SelectionError as exc:
                raise _bad(str(exc), field="value") from None
        assert chosen is not None
        before = self._active_doc()
        after = f'provider_id = "{chosen[0]}"\nmodel = "{chosen[1]}"\n'
        pending.docs = [_Doc(ACTIVE_TARGET, before, after)]
        pending.active = chosen
        pending.base_hash = _hash(before)

    # ----- apply -----------------------------------------------------------------------

    async def apply(
        self,
        mutation_id: str,
        confirm_hash: str,
        allow_sensitive: bool = False,
        actor: str = "api",
        caller: str = "owner",
    ) -> dict[str, Any]:
        """Make a previewed change (SelfOpsError names a refusal); recorded either way.
        ``caller``: who asks, for the privilege rule (``key``, ``console``, ``keyless``:
        the sidecar's callers; ``owner``: Kernel itself)."""
        pending = self._pending.get(mutation_id)
        kind = audit_kinds.SELFOPS_APPLY
        try:
            result = await self._apply(pending, mutation_id, confirm_hash, allow_sensitive, caller)
        except CodedError as exc:
            await recording.record(self.audit, kind, actor, mutation_id, pending, exc.code)
            raise
        await recording.record(self.audit, kind, actor, mutation_id, pending, "applied")
        return result

    async def _apply(
        self,
        pending: Pending | None,
        mutation_id: str,
        confirm_hash: str,
        allow_sensitive: bool,
        caller: str,
    ) -> dict[str, Any]:
        if pending is None:
            raise SelfOpsError(
                "mutation_not_found", t("selfops.not_found"), {"mutation_id": mutation_id}
            )
        if self.clock() > pending.expires:
            del self._pending[mutation_id]
            raise SelfOpsError(
                "mutation_expired", t("selfops.expired"), {"mutation_id": mutation_id}
            )
        if confirm_hash != pending.confirm_hash:
            raise SelfOpsError("mutation_hash_mismatch", t("selfops.hash_mismatch"))
        if allow_sensitive != pending.allow_sensitive:
            raise SelfOpsError(
                "mutation_sensitive_denied",
                t("selfops.allow_differs", preview=str(pending.allow_sensitive).lower()),
                {"allow_sensitive": pending.allow_sensitive},
            )
        if pending.requires_sensitive and not allow_sensitive:
            raise SelfOpsError(
                "mutation_sensitive_denied",
                t("selfops.sensitive", fields=", ".join(pending.sensitive)),
                {"sensitive_fields": pending.sensitive},
            )
        async with self._lock:
            if self._pending.pop(mutation_id, None) is None:  # applied meanwhile
                raise SelfOpsError("mutation_not_found", t("selfops.not_found"))
            if pending.target == FILE_TARGET:
                await self._apply_files(pending)
            elif pending.target == PROVIDERS_TARGET:
                await self._apply_providers(pending, caller)
            else:
                await self._apply_active(pending)
        return {
            "applied": True,
            "mutation_id": pending.id,
            "target": pending.target,
            "applied_targets": [d.path for d in pending.docs],
        }

    async def _apply_files(self, pending: Pending) -> None:
        for doc in pending.docs:
            self._file_parts(doc.path)  # the whitelist, again: never trust a stored path alone
        planned: list[tuple[Parts, Callable[[Any], None] | None]] = [
            (d.parts, _writer(d.after)) for d in pending.docs
        ]

        def compare_and_commit() -> None:
            # Under the lock /workspace writes take: what was compared is what is replaced.
            for doc in pending.docs:
                current = self.files.read_now(doc.parts)
                expected = doc.before.encode("utf-8") if doc.before is not None else None
                if current != expected:
                    raise _conflict(doc.path)
            self.files.commit(planned)

        try:
            await self.files.locked(compare_and_commit)
        except WorkspaceError as exc:
            raise SelfOpsError(
                "mutation_apply_conflict", str(exc), {"target": FILE_TARGET}
            ) from None

    async def _apply_providers(self, pending: Pending, caller: str) -> None:
        after = pending.providers or {}

        def expect(current: Overlay) -> None:
            section = current.get("providers", {})
            if _hash(_stable(section if isinstance(section, dict) else {})) != pending.base_hash:
                raise _conflict(pending.docs[0].path)

        def change(overlay: Overlay) -> None:
            if after:
                overlay["providers"] = copy.deepcopy(after)
            else:
                overlay.pop("providers", None)

        try:
            await self.runtime.update(change, expect=expect, caller=caller, given=pending.given)
        except ConfigError as exc:  # valid at preview, not with what changed since
            raise SelfOpsError("mutation_apply_conflict", str(exc)) from None

    async def _apply_active(self, pending: Pending) -> None:
        assert pending.active is not None
        if _hash(self._active_doc()) != pending.base_hash:
            raise _conflict(ACTIVE_TARGET)
        provider, model = pending.active
        try:
            self.agent.selection.check_model(provider, model)
        except SelectionError as exc:
            raise SelfOpsError("mutation_apply_conflict", str(exc)) from None

        async def switch() -> None:
            await self.agent.selection.set_provider(provider)
            await self.agent.selection.set_model(model)

        await asyncio.shield(switch())


# ----- helpers ---------------------------------------------------------------------------


def _operation(op: Any, index: int) -> dict[str, Any]:
    if not isinstance(op, dict) or not isinstance(op.get("kind"), str):
        raise _bad(t("selfops.op_field", index=index, field="kind", kind="string"))
    return op


def _text(op: dict[str, Any], key: str, index: int) -> str:
    value = op.get(key)
    if not isinstance(value, str) or not value:
        raise _bad(t("selfops.op_field", index=index, field=key, kind="non-empty string"))
    return value


def _path_denied(path: str, why: str) -> SelfOpsError:
    shown = path[:200]
    return SelfOpsError(
        "mutation_path_denied",
        t("selfops.path_denied", path=shown, why=why),
        {"denied_paths": [shown], "allowed": list(WHITELIST)},
    )


def _conflict(path: str) -> SelfOpsError:
    return SelfOpsError("mutation_apply_conflict", t("selfops.conflict", path=path), {"path": path})


def _writer(text: str) -> Callable[[Any], None]:
    data = text.encode("utf-8")

    def write(fh: Any) -> None:
        fh.write(data)

    return write


def _unified(path: str, before: str, after: str, *, new: bool) -> list[str]:
    return [
        line.rstrip("\n")
        for line in difflib.unified_diff(
            mask_lines(before).splitlines(keepends=True),
            mask_lines(after).splitlines(keepends=True),
            fromfile="/dev/null" if new else f"a/{path}",
            tofile=f"b/{path}",
        )
    ]


def _scan_files(pending: Pending) -> None:
    """The base hash and the sensitive names the files' new lines hold (a worker's job)."""
    pending.base_hash = _hash(_stable({d.path: d.base_hash for d in pending.docs}))
    fields: list[str] = []
    for doc in pending.docs:
        for name in added_sensitive(doc.before or "", doc.after):
            if name not in fields:
                fields.append(name)
    pending.sensitive = fields


def _merge(target: dict[str, Any], patch: dict[str, Any]) -> None:
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        else:
            target[key] = copy.deepcopy(value)


def _set(target: dict[str, Any], keys: list[str], value: Any, index: int) -> None:
    node = target
    for key in keys[:-1]:
        child = node.setdefault(key, {})
        if not isinstance(child, dict):
            raise _bad(t("selfops.bad_dotted", index=index, path=".".join(keys)))
        node = child
    if value is None:
        node.pop(keys[-1], None)
    else:
        node[keys[-1]] = copy.deepcopy(value)


def _toml(data: dict[str, Any]) -> str:
    return tomli_w.dumps(data)


def _relative_name(config: Config) -> str:
    try:
        return str(config.runtime_path.relative_to(config.base_dir))
    except ValueError:
        return str(config.runtime_path)
