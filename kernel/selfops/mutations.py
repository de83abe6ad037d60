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
(:mod:`kernel.selfops.recording`). A preview's state, hashes and JSON are
:mod:`kernel.selfops.pending`; reading a request's operations, :mod:`kernel.selfops.operations`.
"""

from __future__ import annotations

import asyncio
import copy
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import tomli_w

from kernel.agent import soul as soul_sections
from kernel.agent.agent import Agent, SelectionError
from kernel.audit import AuditLog
from kernel.audit import kinds as audit_kinds
from kernel.config import Config, unknown_keys
from kernel.config.privilege import config_changes, strings_of
from kernel.core.errors import CodedError, ConfigError, SelfOpsError, WorkspaceError
from kernel.core.i18n import t
from kernel.runtime import Overlay, Runtime, changed_keys
from kernel.selfops import recording
from kernel.selfops.operations import (
    WHITELIST,
    bad,
    conflict,
    merge,
    operation,
    path_denied,
    relative_name,
    set_path,
    text_of,
    toml,
    writer,
)
from kernel.selfops.pending import TTL, Doc, Pending, digest, seal, stable
from kernel.selfops.sensitive import added_sensitive, masked, sensitive_keys
from kernel.workspace.files import Parts, Workspace, parts_of

MAX_PENDING = 64
LIMIT_SETTING = "selfops_max_bytes"  # [gateway]: the largest file a preview may produce
FILE_TARGET = "workspace_file"
PROVIDERS_TARGET = "provider_config"
ACTIVE_TARGET = "active_llm"
TARGETS = (FILE_TARGET, PROVIDERS_TARGET, ACTIVE_TARGET)
Clock = Callable[[], datetime]


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
            raise bad(t("selfops.bad_target", targets=", ".join(TARGETS)), field="target")
        if not operations:
            raise bad(t("selfops.no_operations"), field="operations")
        ops = [operation(op, i) for i, op in enumerate(operations)]
        now = self.clock()
        pending = Pending(uuid.uuid4().hex, target, now + TTL, allow_sensitive, False, [])
        if target == FILE_TARGET:
            await self._prepare_files(pending, ops)
        elif target == PROVIDERS_TARGET:
            await self._prepare_providers(pending, ops)
        else:
            self._prepare_active(pending, ops)
        pending.requires_sensitive = bool(pending.sensitive)
        result = await asyncio.to_thread(seal, pending)
        self._remember(pending, now)
        kind = audit_kinds.SELFOPS_PREVIEW
        await recording.record(self.audit, kind, actor, pending.id, pending, "previewed")
        return result

    def _remember(self, pending: Pending, now: datetime) -> None:
        # Expired previews are kept one more TTL, so applying one says "expired".
        for key, old in list(self._pending.items()):
            if old.expires + TTL < now:
                del self._pending[key]
        while len(self._pending) >= MAX_PENDING:
            del self._pending[next(iter(self._pending))]
        self._pending[pending.id] = pending

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
            raise path_denied(path, str(exc)) from None
        if not self._allowed(parts) or self.files.is_protected(parts):
            raise path_denied(path, t("selfops.whitelist", paths=", ".join(WHITELIST)))
        return parts

    async def _read_text(self, parts: Parts) -> str | None:
        try:
            data = await self.files.read("/".join(parts))
        except WorkspaceError as exc:
            if exc.code == "not_found":
                return None
            raise path_denied("/".join(parts), str(exc)) from None
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise bad(t("selfops.not_text", path="/".join(parts))) from None

    async def _prepare_files(self, pending: Pending, ops: list[dict[str, Any]]) -> None:
        docs: dict[str, Doc] = {}
        limit = self.config.gateway.selfops_max_bytes
        for index, op in enumerate(ops):
            path = text_of(op, "path", index)
            parts = self._file_parts(path)
            key = "/".join(parts)
            if key not in docs:
                current = await self._read_text(parts)
                docs[key] = Doc(key, current, current or "", parts)
            doc = docs[key]
            kind = op["kind"]
            if kind == "replace":
                value = op.get("value")
                if not isinstance(value, str):
                    raise bad(t("selfops.op_field", index=index, field="value", kind="string"))
                doc.after = value
            elif kind == "text_rewrite":
                search = text_of(op, "search", index)
                replace = op.get("replace", "")
                if not isinstance(replace, str):
                    raise bad(t("selfops.op_field", index=index, field="replace", kind="string"))
                count = doc.after.count(search)
                if not count:
                    raise bad(t("selfops.search_missing", index=index, path=key))
                # Refused before it is built: a short search with a long replace multiplies.
                if len(doc.after) + count * (len(replace) - len(search)) > limit:
                    raise self._too_large(key)
                doc.after = doc.after.replace(search, replace)
            else:
                raise bad(t("selfops.bad_kind", index=index, kinds="replace, text_rewrite"))
            if len(doc.after) > limit or len(doc.after.encode("utf-8")) > limit:
                raise self._too_large(key)
        pending.docs = list(docs.values())
        self._check_soul(pending)
        # Hashing, the sensitive-field scan (and the diff, in preview) are CPU work on up to
        # selfops_max_bytes per file: off the event loop.
        await asyncio.to_thread(_scan_files, pending)

    def _check_soul(self, pending: Pending) -> None:
        """A change to SOUL.md that drops a tool's section (its rules): named in the
        preview, with what applies instead (Kernel's own wording)."""
        for doc in pending.docs:
            if self.config.base_dir.joinpath(*doc.parts) != self.config.general.soul:
                continue
            known = self.agent.tools.known()
            before = soul_sections.section_tools(doc.before or "", known)
            gone = sorted(before - soul_sections.section_tools(doc.after, known))
            if gone:
                pending.rules_removed = gone
                pending.warnings.append(
                    t("selfops.soul_rules_removed", path=doc.path, tools=", ".join(gone))
                )

    def _too_large(self, path: str) -> SelfOpsError:
        limit = self.config.gateway.selfops_max_bytes
        setting = f"gateway.{LIMIT_SETTING}"
        message = t("selfops.too_large", path=path, limit=limit, setting=LIMIT_SETTING)
        return bad(message, path=path, limit=limit, setting=setting)

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
                    raise bad(t("selfops.op_field", index=index, field="value", kind="object"))
                merge(after, value)
                touched.append(("", value))
            elif kind == "replace":
                path = text_of(op, "path", index)
                keys = path.split(".")
                if any(not k for k in keys):
                    raise bad(t("selfops.bad_dotted", index=index, path=path))
                set_path(after, keys, op.get("value"), index)
                touched.append((path, op.get("value")))
            else:
                raise bad(t("selfops.bad_kind", index=index, kinds="merge, replace"))
        # The keys the configuration's model reads (kernel.config.tree): no list of its own.
        model = type(self.config)
        unknown = [
            k for k in unknown_keys({"providers": after}, model) if k.startswith("providers.")
        ]
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
        where = relative_name(self.config)
        shown_before = toml({"providers": masked(before)}) if before else ""
        shown_after = toml({"providers": masked(after)}) if after else ""
        pending.docs = [Doc(where, shown_before, shown_after)]
        pending.providers = after
        pending.base_hash = digest(stable(before))
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
                raise bad(t("selfops.bad_kind", index=index, kinds="replace"))
            value = op.get("value")
            if not isinstance(value, dict) or not isinstance(value.get("provider_id"), str):
                raise bad(
                    t("selfops.op_field", index=index, field="value.provider_id", kind="string")
                )
            model = value.get("model")
            if model is not None and not isinstance(model, str):
                raise bad(t("selfops.op_field", index=index, field="value.model", kind="string"))
            try:
                chosen = self.agent.selection.check_model(value["provider_id"], model or None)
            except SelectionError as exc:
                raise bad(str(exc), field="value") from None
        assert chosen is not None
        before = self._active_doc()
        after = f'provider_id = "{chosen[0]}"\nmodel = "{chosen[1]}"\n'
        pending.docs = [Doc(ACTIVE_TARGET, before, after)]
        pending.active = chosen
        pending.base_hash = digest(before)

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
            (d.parts, writer(d.after)) for d in pending.docs
        ]

        def compare_and_commit() -> None:
            # Under the lock /workspace writes take: what was compared is what is replaced.
            for doc in pending.docs:
                current = self.files.read_now(doc.parts)
                expected = doc.before.encode("utf-8") if doc.before is not None else None
                if current != expected:
                    raise conflict(doc.path)
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
            if digest(stable(section if isinstance(section, dict) else {})) != pending.base_hash:
                raise conflict(pending.docs[0].path)

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
        if digest(self._active_doc()) != pending.base_hash:
            raise conflict(ACTIVE_TARGET)
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


def _scan_files(pending: Pending) -> None:
    """The base hash and the sensitive names the files' new lines hold (a worker's job)."""
    pending.base_hash = digest(stable({d.path: d.base_hash for d in pending.docs}))
    fields: list[str] = []
    for doc in pending.docs:
        for name in added_sensitive(doc.before or "", doc.after):
            if name not in fields:
                fields.append(name)
    pending.sensitive = fields
