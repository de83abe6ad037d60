"""``/skills``: the skills beside config.toml (``skills/<name>/SKILL.md``), listed,
created, switched on and off, deleted. A change counts from the next turn."""

from __future__ import annotations

from typing import Annotated, Any

from aiohttp import web
from pydantic import Field

from kernel.gateway.api import Router, deps_of, json_response, path_param
from kernel.gateway.schema import BodyModel, Shape, Text, documented
from kernel.skills import MAX_SKILL_BYTES, Skill

router = Router("skills", "Skills: skills/<name>/SKILL.md, injected by /skill/<name>")


class SkillInfo(Shape):
    name: str
    description: str
    enabled: bool
    usable: bool = Field(description="enabled and without a problem")
    problem: str | None = Field(default=None, description="why it cannot be used, if so")
    size: int | None = None
    modified: str | None = None
    content: str | None = Field(default=None, description="the instructions (GET /skills/{name})")


class SkillList(Shape):
    skills: list[SkillInfo]


# The skills package refuses a bad name in its own words (skill_invalid_name).
SkillName = Annotated[str, Field(pattern="^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")]


class NewSkill(BodyModel):
    name: Annotated[Text, Field(max_length=64), documented(SkillName)]
    description: Annotated[Text, Field(max_length=300)]
    content: Annotated[Text, Field(max_length=MAX_SKILL_BYTES)]
    enabled: bool | None = None


class SkillDeleted(Shape):
    deleted: bool | None = None
    name: str | None = None


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
    response=SkillList,
)
async def list_skills(request: web.Request) -> web.Response:
    skills = await deps_of(request).skills.all()
    return json_response({"skills": [skill_json(s) for s in skills]})


@router.post(
    "/skills",
    summary="Create a skill (skills/<name>/SKILL.md)",
    body=NewSkill,
    response=SkillInfo,
    status=201,
    errors=(409,),
)
async def create_skill(request: web.Request, body: NewSkill) -> web.Response:
    """409 ``skill_exists`` when the name is taken."""
    name, description, content = body.name, body.description, body.content
    enabled = body.enabled is not False
    skill = await deps_of(request).skills.create(name, description, content, bool(enabled))
    return json_response(skill_json(skill, content=True), 201)


@router.get(
    "/skills/{name}",
    summary="One skill with its instructions",
    params=(NAME,),
    response=SkillInfo,
    errors=(404,),
)
async def get_skill(request: web.Request) -> web.Response:
    skill = await deps_of(request).skills.get(request.match_info["name"])
    return json_response(skill_json(skill, content=True))


async def _toggle(request: web.Request, enabled: bool) -> web.Response:
    skill = await deps_of(request).skills.set_enabled(request.match_info["name"], enabled)
    return json_response(skill_json(skill))


@router.put(
    "/skills/{name}/enable",
    summary="Switch a skill on (it joins the summary and /skill/<name> works)",
    params=(NAME,),
    response=SkillInfo,
    errors=(404, 409),
)
async def enable_skill(request: web.Request) -> web.Response:
    return await _toggle(request, True)


@router.put(
    "/skills/{name}/disable",
    summary="Switch a skill off (kept on disk; /skill/<name> is refused)",
    params=(NAME,),
    response=SkillInfo,
    errors=(404, 409),
)
async def disable_skill(request: web.Request) -> web.Response:
    return await _toggle(request, False)


@router.delete(
    "/skills/{name}",
    summary="Delete a skill and its folder",
    params=(NAME,),
    response=SkillDeleted,
    errors=(404,),
)
async def delete_skill(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    await deps_of(request).skills.delete(name)
    return json_response({"deleted": True, "name": name})
