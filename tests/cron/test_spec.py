"""A job's definition declared once (kernel.cron.spec): the models that check a body
also give the API's JSON schema and the cron tools' parameters; refusals keep the API's
codes and words, and a body with several faults is refused for the first one read."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from kernel.core.errors import CronError
from kernel.core.i18n import get_language, set_language
from kernel.cron import tools
from kernel.cron.jobs import parse_spec
from kernel.cron.schedule import Rules
from kernel.cron.spec import JobSpecModel
from kernel.plugins import default_plugins
from kernel.tools.registry import ToolRegistry


@pytest.fixture(autouse=True, scope="module")
def _built_in_nodes() -> None:
    """The built-in workflow nodes are registered by the plugins (process-wide), as at
    start: without this the file passes only after another test built them."""
    default_plugins()


RULES = Rules(ZoneInfo("Asia/Shanghai"))
NOW = datetime(2025, 6, 1, 7, 0, tzinfo=RULES.tz)
CHANNELS = ("telegram", "webhook")
GOOD: dict[str, Any] = {"name": "n", "schedule": "every 2h", "text": "hi"}


@pytest.fixture(autouse=True)
def english() -> Iterator[None]:
    before = get_language()
    set_language("en")
    yield
    set_language(before)


def refusal(body: dict[str, Any]) -> tuple[str, str]:
    with pytest.raises(CronError) as caught:
        parse_spec(body, RULES, CHANNELS, now=NOW)
    return caught.value.code, str(caught.value)


@pytest.mark.parametrize(
    ("change", "code", "message"),
    [
        ({"name": 7}, "invalid_request", "field name must be string"),
        ({"name": "x" * 201}, "invalid_request", "field name is longer than 200 characters"),
        ({"enabled": None}, "invalid_request", "field enabled must be boolean"),
        ({"text": ["hi"]}, "invalid_request", "field text must be string"),
        ({"task_type": "TEXT"}, "invalid_request", "task_type must be one of text, workflow"),
        ({"dispatch": []}, "invalid_request", "field dispatch must be object"),
        (
            {"dispatch": {"target": {"user_id": True}}},
            "invalid_request",
            "field dispatch.target.user_id must be string",
        ),
        (
            {"runtime": {"misfire_grace_seconds": -1}},
            "invalid_request",
            "runtime.misfire_grace_seconds must be a number of seconds from 0 to 604800",
        ),
        (
            {"runtime": {"timeout_seconds": True}},
            "invalid_request",
            "runtime.timeout_seconds must be a number of seconds from 0 to 604800",
        ),
        ({"meta": {"k": "v" * 9000}}, "invalid_request", "field meta must be object"),
        (
            {"workflow": {"nodes": []}, "task_type": "workflow"},
            "invalid_cron_workflow",
            "invalid workflow: nodes must be an array of 1 to 50 nodes",
        ),
        (
            {"workflow": {"nodes": [{"type": "delay", "id": "d", "delay_seconds": "5"}]}},
            "invalid_cron_workflow",
            "invalid workflow: node d: delay_seconds must be a whole number from 0 to 604800",
        ),
    ],
)
def test_a_field_that_does_not_fit_is_refused_in_the_apis_words(
    change: dict[str, Any], code: str, message: str
) -> None:
    assert refusal({**GOOD, **change}) == (code, message)


def test_several_faults_are_refused_for_the_first_one_read() -> None:
    # The schedule is read before the text, the channel before the target.
    code, message = refusal({**GOOD, "schedule": "soon", "text": 5})
    assert code == "invalid_cron_schedule" and "'soon'" in message
    bad_dispatch = {"channel": "fax", "target": 5}
    assert refusal({**GOOD, "dispatch": bad_dispatch})[0] == "channel_not_supported"
    # In a workflow, node by node: the first node's type before the second's shape.
    nodes = [{"type": "teleport"}, "not a node"]
    code, message = refusal({**GOOD, "workflow": {"nodes": nodes}})
    assert code == "invalid_cron_workflow" and "teleport" in message


def test_a_body_that_fits_is_read_leniently_where_it_always_was() -> None:
    body = {
        **GOOD,
        "schedule": {"type": "interval", "every": 7200},
        "dispatch": {"channel": "webhook", "target": {"user_id": 42}},
        "runtime": {"timeout_seconds": 60, "misfire_grace_seconds": None},
        "workflow": {"nodes": [{"type": "text_event", "id": 3, "text": 5}], "edges": 0},
        "task_type": "workflow",
    }
    spec = parse_spec(body, RULES, CHANNELS, now=NOW)
    assert (spec.schedule.kind, spec.schedule.seconds) == ("interval", 7200)
    assert (spec.dispatch.channel, spec.dispatch.user_id) == ("webhook", "42")
    assert (spec.timeout_seconds, spec.misfire_grace_seconds) == (60.0, None)
    assert spec.workflow is not None
    assert [(n.id, n.type, n.text) for n in spec.workflow.order] == [("3", "text_event", "5")]


def test_the_models_give_the_apis_json_schema() -> None:
    schema = JobSpecModel.model_json_schema()
    props = schema["properties"]
    assert props["name"]["anyOf"][0] == {
        "type": "string",
        "maxLength": 200,
        "description": "a short title, in the owner's language",
    }
    assert props["task_type"]["anyOf"][0] == {"type": "string", "enum": ["text", "workflow"]}
    runtime = schema["$defs"]["RuntimeModel"]["properties"]
    assert runtime["misfire_grace_seconds"]["anyOf"][0] == {
        "type": "number",
        "minimum": 0,
        "maximum": 604800,
    }
    workflow = schema["$defs"]["WorkflowModel"]["properties"]
    assert (workflow["nodes"]["minItems"], workflow["nodes"]["maxItems"]) == (1, 50)


def test_the_cron_tools_take_the_specs_declared_fields() -> None:
    registry = ToolRegistry()
    tools.register(registry, None)  # type: ignore[arg-type]  # only read when called
    create = next(s for s in registry.specs() if s.name == "cron_create").parameters
    declared = JobSpecModel.model_json_schema()["properties"]
    for field in ("name", "text"):
        assert create["properties"][field] == declared[field]["anyOf"][0], field
    assert "YYYY-MM-DDTHH:MM" in create["properties"]["schedule"]["description"]
    assert create["required"] == ["name", "schedule", "text"]
