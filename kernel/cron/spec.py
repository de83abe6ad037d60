"""A job's definition as the API, the CLI and the cron tools send it, declared once as
pydantic models: they check a body's shape (types, lengths, ranges) and give its JSON
schema (``JobSpecModel.model_json_schema()``, for the cron tools' parameters and the
sidecar's OpenAPI). What needs Kernel's state — the schedule in the owner's time zone,
the channels, the job being updated, the time now — :func:`kernel.cron.jobs.parse_spec`
reads from the checked body. A refusal keeps the API's codes and words
(``invalid_request`` naming the field, ``invalid_cron_schedule``,
``invalid_cron_workflow``).
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    ValidatorFunctionWrapHandler,
    WithJsonSchema,
    WrapValidator,
)
from pydantic.fields import FieldInfo
from pydantic.types import AllowInfNan, Strict
from pydantic_core import ErrorDetails, PydanticCustomError

from kernel.config.channels import QQ_TARGET_TYPES
from kernel.core.errors import CronError
from kernel.core.i18n import t
from kernel.cron import schedule as schedules
from kernel.cron.workflow import WorkflowModel, loose, parse_workflow

JOB_ID_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"
NAME_LIMIT = 200
TEXT_LIMIT = 20_000
META_LIMIT = 8_000
MAX_SECONDS = 7 * 86400
MAX_BUDGET = 1_000_000.0  # a job's daily limit, in the budget's currency
TASK_TYPES = ("text", "workflow")
TARGET_TYPES = QQ_TARGET_TYPES

# The fields the cron tools take too, described once for the model and the API; the
# bare forms (bounds, no words) for cron_update, which refers to cron_create's words.
NameText = Annotated[str, Strict(), Field(max_length=NAME_LIMIT)]
BodyText = Annotated[str, Strict(), Field(max_length=TEXT_LIMIT)]
JobName = Annotated[NameText, Field(description="a short title, in the owner's language")]
ScheduleText = Annotated[
    str,
    Field(
        description=(
            'local time; once: "YYYY-MM-DDTHH:MM"; repeating: "every 30m" / "every 2h" / '
            '"every 1d" or cron "minute hour day month weekday" ("0 8 * * 1" = Mondays 08:00)'
        )
    ),
]
JobText = Annotated[
    BodyText,
    Field(description="what the agent is told when the job runs, in the owner's language"),
]
ChannelName = Annotated[
    str,
    Field(description="where the reply goes: telegram (default), webhook, qq or console"),
]
Seconds = Annotated[float, Strict(), AllowInfNan(False)]
TargetValue = Annotated[str, Strict()] | Annotated[int, Strict()]


class ScheduleObject(BaseModel):
    """The object form of a schedule; its fields are read with the owner's time zone."""

    model_config = ConfigDict(extra="ignore")

    type: Annotated[Any, loose(enum=list(schedules.KINDS))] = None
    cron: Annotated[Any, loose(description="cron: 5 fields")] = None
    every: Annotated[
        Any,
        loose(
            None,
            "interval: 30m, 2h, 1d or seconds",
            oneOf=[{"type": "string"}, {"type": "integer"}],
        ),
    ] = None
    at: Annotated[Any, loose(description="once: YYYY-MM-DDTHH:MM")] = None
    timezone: Annotated[Any, loose(description="read-only: general.timezone")] = None


class TargetModel(BaseModel):
    model_config = ConfigDict(extra="ignore")

    user_id: TargetValue | None = None
    session_id: TargetValue | None = None
    target_type: Annotated[TargetValue | None, WithJsonSchema({"enum": list(TARGET_TYPES)})] = None
    target_id: TargetValue | None = None


class DispatchModel(BaseModel):
    """Where a run's reply goes: Telegram's owner unless said otherwise."""

    model_config = ConfigDict(extra="ignore")

    channel: Annotated[Any, loose(description="telegram, webhook, qq or console")] = None
    target: TargetModel = TargetModel()


class RuntimeModel(BaseModel):
    model_config = ConfigDict(extra="ignore")

    timeout_seconds: Annotated[Seconds, Field(gt=0, le=MAX_SECONDS)] | None = None
    misfire_grace_seconds: Annotated[Seconds, Field(ge=0, le=MAX_SECONDS)] | None = None
    # The job's own daily spend limit (0: none for this job; unset: budget.cron_job_daily).
    budget_daily: Annotated[Seconds, Field(ge=0, le=MAX_BUDGET)] | None = None


def _small_json(meta: dict[Any, Any]) -> dict[Any, Any]:
    if len(json.dumps(meta, default=str)) > META_LIMIT:
        raise PydanticCustomError("too_long", "meta is too large")
    return meta


def _read_by_rules(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    """A schedule of another form is left as given: :func:`schedules.from_dict` refuses
    it in its own words, which name the owner's time zone and shortest interval."""
    try:
        return handler(value)
    except ValidationError:
        return value


class JobSpecModel(BaseModel):
    """A job as the API takes it (``POST``: ``name``, ``schedule`` and ``text`` or
    ``workflow`` required; ``PUT``: the fields given replace the job's). Absent and
    ``null`` are the same, except for ``enabled``."""

    model_config = ConfigDict(extra="ignore")

    # Checked by the scheduler before the body is read (create: the id's form; update:
    # that it names the job).
    id: Annotated[Any, loose(pattern=JOB_ID_PATTERN)] = None
    name: JobName | None = None
    enabled: Annotated[bool, Strict()] = True
    schedule: Annotated[
        Annotated[ScheduleText, Strict()] | ScheduleObject | None, WrapValidator(_read_by_rules)
    ] = None
    text: JobText | None = None
    workflow: WorkflowModel | None = None
    task_type: Literal["text", "workflow"] | None = None
    dispatch: DispatchModel | None = None
    runtime: RuntimeModel | None = None
    meta: Annotated[dict[Any, Any], AfterValidator(_small_json)] | None = None


def _declared(info: FieldInfo) -> Any:
    return Annotated[info.annotation, *info.metadata] if info.metadata else info.annotation


_FIELDS: dict[str, TypeAdapter[Any]] = {
    name: TypeAdapter(_declared(info)) for name, info in JobSpecModel.model_fields.items()
}


def check_body(data: dict[str, Any]) -> None:
    """Every field of a body checked by its declaration, in the order :class:`BodyReader`
    reads them: the first fault refused in its words (a ``CronError``). What needs
    Kernel's state (the schedule, the channels, what is required) is left to
    :func:`kernel.cron.jobs.parse_spec`."""
    read = BodyReader(data)
    for name in JobSpecModel.model_fields:
        read(name)


class BodyReader:
    """Reads a body's fields one at a time, each checked by its declaration in
    :class:`JobSpecModel` when it is read: a body with several faults is refused for
    the first one the reader meets, as the API documents it."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

    def given(self, name: str) -> bool:
        return self.data.get(name) is not None

    def __call__(self, name: str) -> Any:
        """The checked value of ``name``; None when absent (or null)."""
        if name not in self.data or (self.data[name] is None and name != "enabled"):
            return None
        try:
            return _FIELDS[name].validate_python(self.data[name])
        except ValidationError as exc:
            raise self._refusal(name, exc.errors(include_url=False)) from None

    def _refusal(self, field: str, errors: list[ErrorDetails]) -> CronError:
        error = min(errors, key=lambda e: len(e["loc"]))
        loc = (field, *(str(part) for part in error["loc"]))
        if field == "workflow":
            parse_workflow(self.data[field])  # raises: the workflow's own words
        if field == "task_type":
            kinds = ", ".join(TASK_TYPES)
            return CronError("invalid_request", t("cron.task_type", kinds=kinds), field=field)
        if loc[:2] == ("runtime", "budget_daily"):
            return CronError("invalid_request", t("cron.bad_budget", field=".".join(loc[:2])))
        if field == "runtime" and len(loc) > 1:
            return CronError("invalid_request", t("cron.bad_number", field=".".join(loc[:2])))
        if field in ("name", "text") and error["type"] == "string_too_long":
            limit = NAME_LIMIT if field == "name" else TEXT_LIMIT
            return CronError("invalid_request", t("gw.field_too_long", field=field, limit=limit))
        expected = {"enabled": "boolean", "name": "string", "text": "string"}.get(field, "object")
        if loc[:2] == ("dispatch", "target") and len(loc) > 2:
            loc, expected = loc[:3], "string"
        elif field == "dispatch":
            loc = loc[:2] if len(loc) > 1 and loc[1] == "target" else loc[:1]
        bad = t("gw.bad_field", field=".".join(loc), expected=expected)
        return CronError("invalid_request", bad)
