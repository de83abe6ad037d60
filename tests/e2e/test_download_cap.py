"""Issue 33 item 5: a file whose message (and getFile) declare no size is counted while it
downloads and refused at the limit, in the real ``python -m kernel`` process, whose
memory is read from /proc: a 200 MB voice note or photo served as a stream of generated
bytes (by the simulator, in this test's process) leaves the peak where it was, give or
take the 20 MB limit; the owner is told the limit and what to do."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tests.e2e.harness import Rig
from tests.sim.openai_sim import OpenAISim
from tests.telegram.test_media import png

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(400),
    pytest.mark.skipif(
        not Path("/proc/self/clear_refs").exists(), reason="reads Linux /proc memory counters"
    ),
]

HUGE = 200 * 1024 * 1024
MB = 1024 * 1024
GROWTH = 32 * MB  # the most the peak may grow while a huge file is refused


def memory(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (the peak) of process ``pid``, in bytes."""
    values: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, rest = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            values[name] = int(rest.split()[0]) * 1024
    return values


def reset_peak(pid: int) -> int:
    """Set the peak to what the process holds now (clear_refs 5); that size."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")
    return memory(pid)["VmHWM"]


def inbox_states(db: Path) -> list[tuple[str, str]]:
    conn = sqlite3.connect(db)
    try:
        return [(str(k), str(s)) for k, s in conn.execute("SELECT kind, state FROM inbox")]
    finally:
        conn.close()


async def refused(rig: Rig, inject: object, wanted: str) -> tuple[str, int]:
    """Inject (a callable), wait for the bot's next message; (its text, peak growth)."""
    assert rig.proc is not None and callable(inject)
    await rig.settle()
    pid = rig.proc.pid
    before = reset_peak(pid)
    seen = len(rig.bot_messages())
    inject()
    await rig.wait_until(lambda: len(rig.bot_messages()) > seen, f"the refusal of {wanted}", 180)
    text = rig.bot_messages()[seen].text
    return text, memory(pid)["VmHWM"] - before


async def test_undeclared_200_mb_voice_and_photo_are_refused_while_downloading(
    tmp_path: Path,
) -> None:
    async with OpenAISim() as stt:
        rig = Rig(tmp_path)
        rig.extra_config = (
            f'\n[stt]\napi_base = "{stt.base_url}"\napi_key = "sk-stt-0123456789abcdef"\n'
            'model = "whisper-sim"\n'
        )
        async with rig:
            rig.tg.download_limit = None  # a local Bot API server serves any size
            await rig.start()
            # A photo of ordinary size reaches the model and is answered; it also makes
            # Kernel's first-message allocations (database pages, the outbox…) before the
            # peak is watched.
            rig.tokens.append("m1")
            rig.tg.inject_photo(png(), sizes=1, caption="m1")
            await rig.answered("m1")
            assert [m.text for m in rig.bot_messages() if not m.deleted] == ["ok m1"]
            turns = len(rig.model.requests)
            downloads = tmp_path / "data" / "downloads"
            kept = sorted(downloads.iterdir())  # the photo
            assert len(kept) == 1 and len(rig.tg.downloads) == 1
            assert rig.proc is not None
            held = memory(rig.proc.pid)["VmRSS"]

            voice, voice_growth = await refused(
                rig,
                lambda: rig.tg.inject_voice(b"", declare_size=False, generated=HUGE),
                "the voice note",
            )
            photo, photo_growth = await refused(
                rig,
                lambda: rig.tg.inject_photo(b"", sizes=1, declare_size=False, generated=HUGE),
                "the photo",
            )

            assert voice_growth < GROWTH, f"peak grew {voice_growth / MB:.1f} MB (voice)"
            assert photo_growth < GROWTH, f"peak grew {photo_growth / MB:.1f} MB (photo)"
            assert "voice message is over the 20 MB limit" in voice and "send it in parts" in voice
            assert "picture is over the 20 MB limit" in photo and "compress it" in photo
            assert len(rig.tg.downloads) == 3  # both were started, neither read to the end
            assert stt.requests == [] and len(rig.model.requests) == turns
            # Each message is settled with its notice, nothing of it kept on disk.
            await rig.settle()
            assert inbox_states(rig.db) == [
                ("photo", "answered"),
                ("voice", "failed"),
                ("photo", "failed"),
            ]
            assert sorted(downloads.iterdir()) == kept
            after = memory(rig.proc.pid)["VmRSS"] - held  # nothing read is left held
            assert after < GROWTH, f"{after / MB:.1f} MB more held after the refusals"
