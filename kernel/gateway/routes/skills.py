"""``/skills``: the skills beside config.toml (``skills/<name>/SKILL.md``), listed,
created, switched on and off, deleted. A change counts from the next turn."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from kernel.gateway.api import Router, json_response, kernel_of, path_param, read_object
from kernel.skills import MAX_SKILL_BYTES, Skill

router = Router("skills", "Skills: skills/<name>/SKILL.md, injected by /skill/<name>")

SKILL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["name", "description", "enabled", "usable"],
    "properties": {
        "name": {"type": "string"},
        "description": {"type": "string"},
        "enabled": {"type": "boolean"},
        "usable": {"type": "boolean", "description": "enabled and without a problem"},
        "problem": {"type": "string", "description": "why it cannot be used, if so"},
        "size": {"type": "integer"},
        "modified": {"type": "string"},
        "content": {"type": "string", "description": "the instructions (GET /skills/{name})"},
    },
}
NAME = path_param("name", "letters, digits, - and _")


def skill_json(skill: Skill, *, content: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": skill.name,
        "description": skill.description,
        "enabled": skill.enabled,
        "usable": skill.usable,
        "problem": skill.problem,
        "size": skill.size,
        "modified": skill.modified.isoformat(timespec="seconds"),
    }
    if content:
        out["content"] = skill.body
    return out


@router.get(
    "/skills",
    summary="Every skill, with whether it can be used and why not",
    response={
        "type": "object",
        "required": ["skills"],
        "properties": {"skills": {"type": "array", "items": SKILL_SCHEMA}},
    },
)
async def list_skills(request: web.Request) -> web.Response:
    skills = await kernel_of(request).skills.all()
    return json_response({"skills": [skill_json(s) for s in skills]})


@router.post(
    "/skills",
    summary="Create a skill (skills/<name>/SKILL.md)",
    body={
        "type": "object",
        "required": ["name", "description", "content"],
        "properties": {
            "name": {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$"},
            "description": {"type": "string", "minLength": 1, "maxLength": 300},
            "content": {"type": "string", "minLength": 1, "maxLength": MAX_SKILL_BYTES},
            "enabled": {"type": "boolean"},
        },
    },
    response=SKILL_SCHEMA,
    status=201,
    errors=(409,),
)
async def create_skill(request: web.Request) -> web.Response:
    """409 ``skill_exists`` when the name is taken."""
    body = await read_object(request)
    name = body.required_text("name", max_len=64)
    description = body.required_text("description", max_len=300)
    content = body.required_text("content", max_len=MAX_SKILL_BYTES)
    enabled = body.boolean("enabled", True)
    skill = await kernel_of(request).skills.create(name, description, content, bool(enabled))
    return json_response(skill_json(skill, content=True), 201)


@router.get(
    "/skills/{name}",
    summary="One skill with its instructions",
    params=(NAME,),
    response=SKILL_SCHEMA,
    errors=(404,),
)
async def get_skill(request: web.Request) -> web.Response:
    skill = await kernel_of(request).skills.get(request.match_info["name"])
    return json_response(skill_json(skill, content=True))


async def _toggle(request: web.Request, enabled: bool) -> web.Response:
    skill = await kernel_of(request).skills.set_enabled(request.match_info["name"], enabled)
    return json_response(skill_json(skill))


@router.put(
    "/skills/{name}/enable",
    summary="Switch a skill on (it joins the summary and /skill/<name> works)",
    params=(NAME,),
    response=SKILL_SCHEMA,
    errors=(404, 409),
)
async def enable_skill(request: web.Request) -> web.Response:
    return await _toggle(request, True)


@router.put(
    "/skills/{name}/disable",
    summary="Switch a skill off (kept on disk; /skill/<name> is refused)",
    params=(NAME,),
    response=SKILL_SCHEMA,
    errors=(404, 409),
)
async def disable_skill(request: web.Request) -> web.Response:
    return await _toggle(request, False)


@router.delete(
    "/skills/{name}",
    summary="Delete a skill and its folder",
    params=(NAME,),
    response={
        "type": "object",
        "properties": {"deleted": {"type": "boolean"}, "name": {"type": "string"}},
    },
    errors=(404,),
)
async def delete_skill(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    await kernel_of(request).skills.delete(name)
    return json_response({"deleted": True, "name": name})
