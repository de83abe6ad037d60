"""``/agent/personas`` and ``/agent/projects``: the files beside config.toml
(``personas/<name>.md``, ``projects/<name>.md``), listed, read, created, changed and
deleted; ``PUT /chats/{chat_id}/scope``: a chat's persona and project.

A change to a file counts from the next turn. Refusals carry the library's codes
(``profile_not_found`` 404, ``profile_exists`` 409, ``profile_invalid_name`` 400,
``profile_invalid`` 409, ``profile_too_large`` 413).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Annotated, Any

from aiohttp import web
from pydantic import AfterValidator, Field

from kernel.core.errors import ProfileError
from kernel.core.i18n import t
from kernel.gateway.api import Router, deps_of, json_response, path_param
from kernel.gateway.routes.chats import CHAT_ID, require_chat
from kernel.gateway.schema import BodyModel, Shape, Text, documented, expecting, refuse
from kernel.profiles import FOLDERS, Kind, Profile, ProfileLibrary, parse_reasoning
from kernel.profiles.library import MAX_DESCRIPTION, MAX_PROFILE_BYTES

if TYPE_CHECKING:
    from kernel.gateway.deps import GatewayDeps

router = Router("profiles", "Personas and projects: personas/<name>.md, projects/<name>.md")

# The library refuses a bad name in its own words (profile_invalid_name).
ProfileName = Annotated[str, Field(pattern="^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")]
ToolList = Annotated[
    list[Annotated[str, Field(min_length=1, max_length=64)]], Field(max_length=200)
]


def _one_line(value: str) -> str:
    """A front matter value: a line break would start a key of its own."""
    if any(ord(c) < 32 or c in "\x7f\u2028\u2029\x85" for c in value):
        raise refuse("gw.bad_field", expected="one line of text")
    return value


OneLine = AfterValidator(_one_line)
Description = Annotated[Text, Field(max_length=MAX_DESCRIPTION), OneLine]
Body = Annotated[str, Field(max_length=MAX_PROFILE_BYTES)]
ModelRef = Annotated[str, Field(max_length=200), OneLine]


Reasoning = Annotated[
    str | int,
    Field(description="off|low|medium|high or tokens >= 1024"),
    expecting("off, low, medium, high or a token budget"),
]


class ProfileInfo(Shape):
    kind: str
    name: str
    description: str
    body: str | None = Field(default=None, description="the instructions")
    source: str = Field(description="its file, relative to config.toml's folder")
    usable: bool
    problem: str | None = Field(default=None, description="why it cannot be used, if so")
    tools: list[str] | None = Field(default=None, description="persona: allow-list (null: all)")
    model: str | None = Field(default=None, description='persona: "provider:model"')
    reasoning: str | int | None = None
    folder: str | None = Field(default=None, description="project: its working folder")
    size: int | None = None
    modified: str | None = None


class ProfileListing(Shape):
    personas: list[ProfileInfo] | None = None
    projects: list[ProfileInfo] | None = None


class PersonaChange(BodyModel):
    """A change: an absent field keeps its value. ``tools``: ``[]`` none, ``["*"]`` all."""

    description: Description | None = None
    body: Body | None = None
    tools: ToolList | None = None
    model: ModelRef | None = None
    reasoning: Reasoning | None = None


class NewPersona(PersonaChange):
    name: Annotated[Text, Field(max_length=64), documented(ProfileName)]
    description: Description


class ProjectChange(BodyModel):
    """A change: an absent field keeps its value; ``folder: ""`` drops the folder."""

    description: Description | None = None
    body: Body | None = None
    folder: Annotated[str, Field(max_length=1024), OneLine] | None = None


class NewProject(ProjectChange):
    name: Annotated[Text, Field(max_length=64), documented(ProfileName)]
    description: Description


class ProfileDeleted(Shape):
    deleted: bool | None = None
    name: str | None = None


class ScopeBody(BodyModel):
    """A name switches to it, ``""`` to none; an absent field keeps the chat's choice."""

    persona: Annotated[str, Field(max_length=64)] | None = None
    project: Annotated[str, Field(max_length=64)] | None = None


class ChatScopeInfo(Shape):
    id: str
    persona: str = Field(description='"" none')
    project: str = Field(description='"" none')


NAME = path_param("name", "letters, digits, - and _")


def library(deps: GatewayDeps, kind: Kind) -> ProfileLibrary:
    return deps.agent.profiles.of(kind)


def profile_json(deps: GatewayDeps, profile: Profile) -> dict[str, Any]:
    """``problem`` also says when a persona's model is not configured here."""
    out = profile.as_json()
    problem = profile.problem or deps.agent.scopes.model_problem(profile)
    out["usable"] = not problem
    out["problem"] = problem or None
    out["size"] = profile.size
    out["modified"] = profile.modified.isoformat(timespec="seconds") if profile.modified else None
    return out


def _changed(profile: Profile, body: PersonaChange | ProjectChange) -> Profile:
    fields = body.model_dump(exclude_unset=True, exclude_none=True, exclude={"name"})
    if "reasoning" in fields:
        try:
            fields["reasoning"] = parse_reasoning(str(fields["reasoning"]))
        except ValueError:
            raise ProfileError("invalid_request", t("profile.bad_reasoning")) from None
    if "tools" in fields:
        fields["tools"] = tuple(fields["tools"])
    return replace(profile, **fields)


def _routes(kind: Kind, new: type[NewPersona | NewProject], change: type[BodyModel]) -> None:
    plural = FOLDERS[kind]
    base = f"/agent/{plural}"
    words = kind

    async def listing(request: web.Request) -> web.Response:
        deps = deps_of(request)
        found = await library(deps, kind).all()
        return json_response({plural: [profile_json(deps, p) for p in found]})

    async def create(request: web.Request, body: NewPersona | NewProject) -> web.Response:
        profile = _changed(Profile(kind, body.name), body)
        deps = deps_of(request)
        saved = await library(deps, kind).save(profile, create=True)
        return json_response(profile_json(deps, saved), 201)

    async def read(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        deps = deps_of(request)
        lib = library(deps, kind)
        profile = await lib.find(name)
        if profile is None:
            raise await lib.unknown(name)
        return json_response(profile_json(deps, profile))

    async def update(request: web.Request, body: BodyModel) -> web.Response:
        name = request.match_info["name"]
        deps = deps_of(request)
        lib = library(deps, kind)
        current = await lib.find(name)
        if current is None:
            raise await lib.unknown(name)
        if current.problem:
            # What could be read of a broken file is not all it says (the parser stops
            # at the first bad line; a file too large reads as empty): rewriting it from
            # that would drop its allow-list silently.
            raise ProfileError(
                "profile_invalid",
                t("profile.fix_first", name=name, problem=current.problem),
                {"kind": kind, "name": name},
            )
        profile = _changed(current, body)  # type: ignore[arg-type]
        saved = await lib.save(profile, create=False)
        return json_response(profile_json(deps, saved))

    async def delete(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        await library(deps_of(request), kind).delete(name)
        return json_response({"deleted": True, "name": name})

    for handler, verb in (
        (listing, "list"),
        (create, "create"),
        (read, "get"),
        (update, "update"),
        (delete, "delete"),
    ):
        handler.__name__ = f"{verb}_{kind}"
    router.get(base, summary=f"Every {words}, usable or not (and why)", response=ProfileListing)(
        listing
    )
    router.post(
        base,
        summary=f"Create a {words} ({plural}/<name>.md)",
        body=new,
        response=ProfileInfo,
        status=201,
        errors=(409,),
    )(create)
    router.get(
        base + "/{name}",
        summary=f"One {words} with its instructions",
        params=(NAME,),
        response=ProfileInfo,
        errors=(404,),
    )(read)
    router.put(
        base + "/{name}",
        summary=f"Change a {words} (absent fields are kept)",
        params=(NAME,),
        body=change,
        response=ProfileInfo,
        errors=(404, 409),
    )(update)
    router.delete(
        base + "/{name}",
        summary=f"Delete a {words} file",
        params=(NAME,),
        response=ProfileDeleted,
        errors=(404,),
    )(delete)


_routes("persona", NewPersona, PersonaChange)
_routes("project", NewProject, ProjectChange)


@router.put(
    "/chats/{chat_id}/scope",
    summary='Set a chat\'s persona and/or project (a name, or "" for none)',
    params=(CHAT_ID,),
    body=ScopeBody,
    response=ChatScopeInfo,
    errors=(404, 409),
)
async def set_chat_scope(request: web.Request, body: ScopeBody) -> web.Response:
    """Both names are checked before either changes; 409 ``session_busy`` while the
    chat's turn runs, ``profile_invalid`` for a broken file or a model not configured."""
    deps = deps_of(request)
    chat_id = request.match_info["chat_id"]
    row = await require_chat(deps, chat_id)
    agent = deps.agent
    for kind, name in (("persona", body.persona), ("project", body.project)):
        if name:
            await agent.scopes.check(kind, name)
    scope = await agent.scopes.set_session_scope(row.id, persona=body.persona, project=body.project)
    return json_response({"id": chat_id, "persona": scope.persona, "project": scope.project})


@router.get(
    "/chats/{chat_id}/scope",
    summary="A chat's persona and project",
    params=(CHAT_ID,),
    response=ChatScopeInfo,
    errors=(404,),
)
async def get_chat_scope(request: web.Request) -> web.Response:
    deps = deps_of(request)
    chat_id = request.match_info["chat_id"]
    row = await require_chat(deps, chat_id)
    scope = await deps.agent.scopes.of_session(row.id)
    return json_response({"id": chat_id, "persona": scope.persona, "project": scope.project})
