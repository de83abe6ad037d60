"""The markers Kernel writes into the model's history are in ``general.language``, and a
history written under one language is still read under the other (issue 35, item 4):
a photo, a file or a voice note lost to slimming is known as lost, a skill's marker is
not taken for the owner's words."""

from __future__ import annotations

import pytest

from kernel.agent.slimming import media_dropped, owner_text, slim_message, wrap_file
from kernel.core.i18n import set_language
from kernel.core.messages import ImageBlock, Message, TextBlock

SKILL = '<skill name="tidy">\nSort the items.\n</skill>'
WORDS = {
    "zh": ("[图片已处理]", "[文件 a.txt 已处理]", "[语音已处理]", "[技能 tidy 已加载]"),
    "en": (
        "[image processed]",
        "[file a.txt processed]",
        "[voice processed]",
        "[skill tidy loaded]",
    ),
}


def slimmed(language: str) -> list[Message]:
    set_language(language)
    photo = Message("user", [ImageBlock("image/png", "AAAA"), TextBlock("what is this?")])
    document = Message("user", [TextBlock(wrap_file("a.txt", "notes") + "\nread it")])
    voice = Message("user", [TextBlock("[voice: hello]" if language == "en" else "[语音: hello]")])
    skill = Message("user", [TextBlock(SKILL), TextBlock("/skill/tidy b a")])
    return [slim_message(m) for m in (photo, document, voice, skill)]


@pytest.mark.parametrize("written", ["zh", "en"])
@pytest.mark.parametrize("read", ["zh", "en"])
def test_markers_are_in_the_language_and_read_in_any(written: str, read: str) -> None:
    photo, document, voice, skill = slimmed(written)
    image_done, file_done, voice_done, skill_done = WORDS[written]
    assert [b.text for b in photo.content if isinstance(b, TextBlock)] == [
        image_done,
        "what is this?",
    ]
    assert [b.text for b in document.content if isinstance(b, TextBlock)] == [
        f"{file_done}\nread it"
    ]
    assert [b.text for b in voice.content if isinstance(b, TextBlock)] == [voice_done]
    assert [b.text for b in skill.content if isinstance(b, TextBlock)] == [
        skill_done,
        "/skill/tidy b a",
    ]

    set_language(read)  # the owner changed general.language since
    assert media_dropped(photo) and media_dropped(document) and media_dropped(voice)
    assert not media_dropped(skill)
    assert owner_text(skill) == "/skill/tidy b a"
