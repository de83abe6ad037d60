"""The profile files themselves: what a front matter may say, what is refused by name,
and that a save writes exactly what it was given (never an extra key)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernel.core.errors import ProfileError
from kernel.core.i18n import set_language
from kernel.profiles import Profile, ProfileLibrary, parse_profile


@pytest.fixture(autouse=True)
def english() -> None:
    set_language("en")


def test_a_full_persona_is_read() -> None:
    text = (
        "---\nname: reader\ndescription: reads\ntools: [memory_search, mcp_docs__*]\n"
        "model: main:model-a\nreasoning: 2048\n---\n\nBe exact.\n"
    )
    p = parse_profile("persona", "reader", text)
    assert p.usable and p.body == "Be exact." and p.reasoning == 2048
    assert p.tools == ("memory_search", "mcp_docs__*")
    assert p.allows("mcp_docs__search") and p.allows("memory_search")
    assert not p.allows("memory_delete") and not p.allows("mcp_other__x")


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("no front matter", "front matter"),
        ("---\nname: x\ndescription: d\n", "front matter"),  # never closed
        ("---\nname: x\n---\n", "description"),
        ("---\nname: y\ndescription: d\n---\n", "y"),  # not its file's name
        ("---\nname: x\ndescription: d\ntool: [a]\n---\n", "tool"),  # a typo is named
        ("---\nname: x\ndescription: d\ntools: [a b]\n---\n", "a b"),
        ("---\nname: x\ndescription: d\nreasoning: huge\n---\n", "reasoning"),
        ("---\nname: x\ndescription: d\nreasoning: 10\n---\n", "reasoning"),
        ("---\nname: x\ndescription: d\nno colon here\n---\n", "line 4"),
    ],
)
def test_a_broken_front_matter_names_its_problem(text: str, named: str) -> None:
    p = parse_profile("persona", "x", text)
    assert not p.usable and named in p.problem


def test_an_empty_allow_list_allows_nothing_and_no_list_allows_all() -> None:
    none = parse_profile("agent", "a", "---\nname: a\ndescription: d\ntools: []\n---\n")
    every = parse_profile("persona", "a", "---\nname: a\ndescription: d\n---\n")
    assert none.tools == () and not none.allows("web_search")
    assert every.tools is None and every.allows("web_search")


def test_a_sub_agent_must_list_its_tools() -> None:
    missing = parse_profile("agent", "a", "---\nname: a\ndescription: d\n---\n")
    assert not missing.usable and "tools" in missing.problem
    star = parse_profile("agent", "a", "---\nname: a\ndescription: d\ntools: [*]\n---\n")
    assert star.usable and star.allows("web_search")


def test_a_project_has_a_folder_and_no_tools() -> None:
    ok = parse_profile("project", "k", "---\nname: k\ndescription: d\nfolder: ~/code/k\n---\n")
    assert ok.usable and ok.folder == "~/code/k"
    tools = parse_profile("project", "k", "---\nname: k\ndescription: d\ntools: [a]\n---\n")
    assert "tools" in tools.problem


@pytest.mark.parametrize(
    "change",
    [
        {"model": "main:model-a\ntools: [*]"},
        {"description": "fine\ntools: [*]"},
        {"folder": "/tmp\r\nmodel: x"},
        {"tools": ("memory_search\ntools",)},
    ],
)
async def test_a_save_never_writes_a_key_it_was_not_given(
    tmp_path: Path, change: dict[str, object]
) -> None:
    library = ProfileLibrary(tmp_path / "personas", "persona")
    fields: dict[str, object] = {"description": "reads", "tools": ("memory_search",), **change}
    with pytest.raises(ProfileError):
        await library.save(Profile("persona", "reader", **fields), create=True)  # type: ignore[arg-type]
    assert not (tmp_path / "personas" / "reader.md").exists()


async def test_a_save_reads_back_what_it_wrote(tmp_path: Path) -> None:
    library = ProfileLibrary(tmp_path / "personas", "persona")
    made = Profile(
        "persona", "reader", "reads", "Be exact.", ("memory_search",), "main:model-a", "high"
    )
    saved = await library.save(made, create=True)
    assert (saved.tools, saved.model, saved.reasoning, saved.body) == (
        ("memory_search",),
        "main:model-a",
        "high",
        "Be exact.",
    )
    with pytest.raises(ProfileError) as exists:
        await library.save(made, create=True)
    assert exists.value.code == "profile_exists"
    quoted = Profile("persona", "reader", ' "reads" ')
    with pytest.raises(ProfileError):
        await library.save(quoted, create=False)  # would read back as something else
    await library.delete("reader")
    with pytest.raises(ProfileError) as gone:
        await library.get("reader")
    assert gone.value.code == "profile_not_found"


@pytest.mark.posix
async def test_a_link_in_place_of_a_profile_is_replaced_not_written_through(
    tmp_path: Path,
) -> None:
    outside = tmp_path / "outside.md"
    outside.write_text("keep me", encoding="utf-8")
    folder = tmp_path / "personas"
    folder.mkdir()
    (folder / "reader.md").symlink_to(outside)
    library = ProfileLibrary(folder, "persona")
    await library.save(Profile("persona", "reader", "reads"), create=False)
    assert outside.read_text(encoding="utf-8") == "keep me"
    assert not (folder / "reader.md").is_symlink()
