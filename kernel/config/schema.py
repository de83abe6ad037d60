"""The vocabulary every section model is written in, and the one reader that applies it.

A section is a pydantic model (:class:`Section`) whose fields declare, once, their
default, bounds, description and markers carried in ``Annotated`` metadata:

- :class:`Secret`: what kind of secret the value is (see :mod:`kernel.config.secrets`);
- :class:`Env`: the ``KERNEL_*`` variable that overrides the key;
- :class:`Label`: how a refusal names what was expected, where the type alone does not.

:func:`read_section` validates one TOML table against a section model, applies the
environment overrides and turns the first pydantic error into today's one-line
refusal naming the key and the fix (:func:`refusal`).
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError
from pydantic.fields import FieldInfo

from kernel.config.net import is_http_url
from kernel.core.errors import ConfigError
from kernel.core.i18n import get_language, t
from kernel.core.redact import mask_secret


@dataclass(frozen=True, slots=True)
class Secret:
    """The field holds a secret. ``kind``: ``value`` (the string itself), ``headers`` (a
    header table: entries other than the public ones), ``all_headers`` (a header table:
    every entry), ``map`` (every value of a table), ``list`` (every item of a list),
    ``id`` (not a credential, but kept out of refusals: a number that identifies the
    owner)."""

    kind: str = "value"


SECRET = Secret("value")
SECRET_HEADERS = Secret("headers")
SECRET_ALL_HEADERS = Secret("all_headers")
SECRET_MAP = Secret("map")
SECRET_LIST = Secret("list")
PRIVATE_ID = Secret("id")


@dataclass(frozen=True, slots=True)
class Env:
    """The environment variable that wins over the key when set and not empty; ``name``
    may depend on the table's name (``[providers.<name>]``). ``append``: a comma list
    added to the key's list instead of replacing it."""

    name: str | Callable[[str], str]
    append: bool = False
    # Other names read the same way (seed 000's NEXTAI_* beside KERNEL_*); with
    # ``append`` each one's list is added, else the first set one wins.
    also: tuple[str, ...] = ()

    def variable(self, table_name: str) -> str:
        return self.name if isinstance(self.name, str) else self.name(table_name)

    def variables(self, table_name: str) -> tuple[str, ...]:
        return (self.variable(table_name), *self.also)


@dataclass(frozen=True, slots=True)
class Label:
    """How a refusal names the expected value: ``expected`` for a failed check of the
    value, ``suffix`` appended to the type's name for a failed bound (``int 0-65535``),
    ``choices`` for a list whose items must be among them."""

    expected: str = ""
    suffix: str = ""
    choices: tuple[str, ...] = ()


def one_of(choices: tuple[str, ...]) -> AfterValidator:
    """Each item of a list among ``choices`` (refused naming the first that is not)."""

    def check(values: list[str]) -> list[str]:
        if any(v not in choices for v in values):
            raise ValueError("not among the choices")
        return values

    return AfterValidator(check)


class Section(BaseModel):
    """One configuration table. Strict: TOML's types are taken as they are (an integer
    counts as a number; a string is never read as a number). Keys the model does not know
    are ignored here and reported by :func:`kernel.config.tree.unknown_keys`."""

    model_config = ConfigDict(strict=True, extra="ignore", populate_by_name=True)


S = TypeVar("S", bound=Section)


def internal(default: Any = None, **kw: Any) -> Any:
    """A field set by Kernel, not read from the table (e.g. a table's own name)."""
    return Field(default, json_schema_extra={"toml": False}, **kw)


def _stringify(value: Any) -> Any:
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else value


def _no_slash(value: str) -> str:
    return value.rstrip("/")


def _to_path(value: Any) -> Any:
    return Path(value) if isinstance(value, str) else value


def _http_url(value: str) -> str:
    value = value.rstrip("/")
    if value and not is_http_url(value):
        raise ValueError("not an http(s) URL")
    return value


PosInt = Annotated[int, Field(gt=0)]
PosFloat = Annotated[float, Field(gt=0)]
NonNegInt = Annotated[int, Field(ge=0)]
NonNegFloat = Annotated[float, Field(ge=0)]
StrMap = Annotated[dict[str, str], BeforeValidator(_stringify)]
Base = Annotated[str, AfterValidator(_no_slash)]  # an address, kept without a trailing /
Url = Annotated[str, AfterValidator(_http_url), Label("http(s) URL")]  # http(s) or empty
PathText = Annotated[Path, BeforeValidator(_to_path)]  # resolved from config.toml's folder


def _nested(annotation: Any) -> list[Any]:
    """Metadata of ``Annotated`` types inside a union (``Annotated[…] | None``)."""
    found: list[Any] = []
    if typing.get_origin(annotation) is Annotated:
        found += annotation.__metadata__
        annotation = typing.get_args(annotation)[0]
    if typing.get_origin(annotation) in (types.UnionType, typing.Union):
        for arg in typing.get_args(annotation):
            found += _nested(arg)
    return found


def markers(info: FieldInfo, kind: type[Any]) -> list[Any]:
    return [m for m in [*info.metadata, *_nested(info.annotation)] if isinstance(m, kind)]


def marker(info: FieldInfo, kind: type[Any]) -> Any:
    found = markers(info, kind)
    return found[0] if found else None


def is_toml(info: FieldInfo) -> bool:
    extra = info.json_schema_extra
    return not (isinstance(extra, dict) and extra.get("toml") is False)


def toml_keys(model: type[Section]) -> dict[str, str]:
    """Key in the table → field name, for the fields read from TOML."""
    return {
        (info.validation_alias if isinstance(info.validation_alias, str) else name): name
        for name, info in model.model_fields.items()
        if is_toml(info)
    }


def require_table(table: Any, prefix: str) -> dict[str, Any]:
    if not isinstance(table, dict):
        raise ConfigError(bad_type_text(prefix, expected("table"), table), key=prefix)
    return table


def read_section(
    model: type[S],
    table: Any,
    prefix: str,
    env: Mapping[str, str],
    *,
    table_name: str = "",
    defaults: Mapping[str, Any] | None = None,
    **fixed: Any,
) -> S:
    """``table`` validated as ``model`` (a refusal names ``prefix.<key>``), the
    environment overrides applied; ``defaults`` fill keys the table leaves out;
    ``fixed`` are internal fields."""
    require_table(table, prefix)
    keys = toml_keys(model)
    data: dict[str, Any] = dict(defaults or {})
    data.update({k: v for k, v in table.items() if k in keys})
    from_env: dict[str, str] = {}  # key → the environment variable that set it
    for key, field in keys.items():
        override = marker(model.model_fields[field], Env)
        for variable in override.variables(table_name) if override else ():
            value = env.get(variable)
            if value and override.append:
                current = data.get(key, [])
                parts = [p.strip() for p in value.split(",") if p.strip()]
                data[key] = [*current, *parts] if isinstance(current, list) else current
            elif value and key not in from_env:
                data[key] = value
            if value and key not in from_env:
                from_env[key] = variable
    try:
        return model.model_validate({**data, **fixed})
    except ValidationError as exc:
        refused = refusal(model, exc, prefix, data)
        variable = from_env.get(str(exc.errors()[0]["loc"][0]))
        if variable is not None:  # the owner looks for it in config.toml in vain
            raise ConfigError(
                t("config.bad_env", variable=variable, detail=str(refused)), key=refused.key
            ) from None
        raise refused from None


def unwrap(annotation: Any) -> Any:
    """The annotation's base type: ``Annotated`` and ``| None`` taken off."""
    while typing.get_origin(annotation) is Annotated:
        annotation = typing.get_args(annotation)[0]
    if typing.get_origin(annotation) in (types.UnionType, typing.Union):
        annotation = next(a for a in typing.get_args(annotation) if a is not type(None))
        return unwrap(annotation)
    return annotation


def _type_name(annotation: Any) -> str:
    base = unwrap(annotation)
    origin = typing.get_origin(base)
    if origin is Literal or base is Path:
        return "str"
    if origin in (list, dict):
        return origin.__name__
    return getattr(base, "__name__", "str")


def choices_of(annotation: Any) -> tuple[str, ...]:
    """The allowed values of a ``Literal`` field (or of its list's items)."""
    base = unwrap(annotation)
    if typing.get_origin(base) is list:
        base = unwrap(typing.get_args(base)[0])
    return tuple(typing.get_args(base)) if typing.get_origin(base) is Literal else ()


def refusal(model: type[Section], exc: ValidationError, prefix: str, data: dict[str, Any]) -> Any:
    """The first error as today's refusal: ``config.bad_choice`` for a value outside a
    choice, else ``config.bad_type`` naming what was expected."""
    error = exc.errors()[0]
    loc = error["loc"]
    key_name = str(loc[0])
    field = toml_keys(model).get(key_name, key_name)
    info = model.model_fields[field]
    key = f"{prefix}.{key_name}"
    got = data.get(key_name, error["input"])
    kind = error["type"]
    label = marker(info, Label) or Label()
    secret = marker(info, Secret) is not None
    type_name = _type_name(info.annotation)
    if kind == "missing":
        return ConfigError(t("config.required", key=key), key=key)
    if label.expected and len(loc) > 1 and isinstance(loc[1], str):
        # A union (e.g. a level or a token budget): name every form, not the first's.
        return ConfigError(bad_type_text(key, label.expected, got, secret=secret), key=key)
    if kind == "literal_error" and isinstance(error["input"], str):
        return bad_choice(key, choices_of(info.annotation), error["input"])
    if kind == "string_too_short":
        wanted = expected("non-empty string")
        return ConfigError(bad_type_text(key, wanted, got, secret=secret), key=key)
    if kind == "string_too_long":
        wanted = t("config.expected_short_text", max=(error.get("ctx") or {}).get("max_length"))
        return ConfigError(bad_type_text(key, wanted, got, secret=secret), key=key)
    if len(loc) > 1 and type_name == "list":
        wanted = "list of strings"
    elif kind == "greater_than":
        wanted = "positive number"
    elif kind in ("greater_than_equal", "less_than_equal", "less_than") and label.suffix:
        wanted = expected(type_name) + label.suffix
        return ConfigError(bad_type_text(key, wanted, got, secret=secret), key=key)
    elif kind == "greater_than_equal":
        wanted = "int ≥ 0" if type_name == "int" else "number ≥ 0"
    elif kind == "value_error" and label.choices:
        return bad_choice(key, label.choices, next(v for v in got if v not in label.choices))
    elif kind == "value_error" and label.expected:
        wanted = label.expected
    else:
        wanted = type_name
    return ConfigError(bad_type_text(key, expected(wanted), got, secret=secret), key=key)


_EXPECTED_ZH = {
    "str": "字符串",
    "int": "整数",
    "float": "数字",
    "bool": "true 或 false",
    "list": "列表",
    "dict": "表",
    "table": "表（[section]）",
    "list of strings": "字符串列表",
    "non-empty string": "非空字符串",
    "positive number": "正数",
    "int ≥ 0": "大于等于 0 的整数",
    "number ≥ 0": "大于等于 0 的数字",
    "http(s) URL": "http(s) 网址",
}


def expected(kind: str) -> str:
    if get_language() == "zh":
        return _EXPECTED_ZH.get(kind, kind)
    return kind.replace("dict", "table")


def bad_type_text(key: str, wanted: str, got: Any, *, secret: bool = False) -> str:
    """The refusal text; a value under a secret-marked key (or a long one) is masked,
    since a token pasted into the wrong key must not be printed back."""
    shown = repr(got)
    if secret or len(shown) > 40:
        shown = repr(mask_secret(str(got)))
    return t("config.bad_type", key=key, expected=wanted, got=shown)


def bad_choice(key: str, choices: tuple[str, ...], got: Any) -> ConfigError:
    return ConfigError(
        t("config.bad_choice", key=key, choices=" / ".join(choices), got=got), key=key
    )


def default_of(model: type[Section], field: str) -> Any:
    return model.model_fields[field].get_default(call_default_factory=True)
