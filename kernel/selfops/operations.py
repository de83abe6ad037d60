"""The operations of a change as a request gives them, read and refused one by one
(each refusal names the operation's index and the fix), and the edits they make to a
settings table."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import tomli_w

from kernel.config import Config
from kernel.core.errors import SelfOpsError
from kernel.core.i18n import t

WHITELIST = ("SOUL.md", "prompts/**", "skills/**")


def bad(message: str, **details: Any) -> SelfOpsError:
    return SelfOpsError("invalid_request", message, details)


def operation(op: Any, index: int) -> dict[str, Any]:
    if not isinstance(op, dict) or not isinstance(op.get("kind"), str):
        raise bad(t("selfops.op_field", index=index, field="kind", kind="string"))
    return op


def text_of(op: dict[str, Any], key: str, index: int) -> str:
    value = op.get(key)
    if not isinstance(value, str) or not value:
        raise bad(t("selfops.op_field", index=index, field=key, kind="non-empty string"))
    return value


def path_denied(path: str, why: str) -> SelfOpsError:
    shown = path[:200]
    return SelfOpsError(
        "mutation_path_denied",
        t("selfops.path_denied", path=shown, why=why),
        {"denied_paths": [shown], "allowed": list(WHITELIST)},
    )


def conflict(path: str) -> SelfOpsError:
    return SelfOpsError("mutation_apply_conflict", t("selfops.conflict", path=path), {"path": path})


def writer(text: str) -> Callable[[Any], None]:
    data = text.encode("utf-8")

    def write(fh: Any) -> None:
        fh.write(data)

    return write


def merge(target: dict[str, Any], patch: dict[str, Any]) -> None:
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            merge(target[key], value)
        else:
            target[key] = copy.deepcopy(value)


def set_path(target: dict[str, Any], keys: list[str], value: Any, index: int) -> None:
    node = target
    for key in keys[:-1]:
        child = node.setdefault(key, {})
        if not isinstance(child, dict):
            raise bad(t("selfops.bad_dotted", index=index, path=".".join(keys)))
        node = child
    if value is None:
        node.pop(keys[-1], None)
    else:
        node[keys[-1]] = copy.deepcopy(value)


def toml(data: dict[str, Any]) -> str:
    return tomli_w.dumps(data)


def relative_name(config: Config) -> str:
    try:
        return str(config.runtime_path.relative_to(config.base_dir))
    except ValueError:
        return str(config.runtime_path)
