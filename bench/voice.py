"""Voice costs: what a voice note adds around a turn.

Cases (each timed N times after one warm-up run, median and max reported):
  ffmpeg mp3→ogg Ns   ``to_ogg_opus`` on N seconds of MP3 speech-like audio (a tone made
                      by the same ffmpeg): the conversion delay a voice reply adds;
                      also the output size per second of audio
  tts openai 30s      ``Synthesizer.synthesize`` against the in-process OpenAI simulator
                      answering 30 s of MP3: HTTP + ffmpeg + Ogg check
  stt 30s voice       ``Transcriber.transcribe`` of a 30 s OGG/Opus voice note against
                      the simulator: the upload and the SDK's multipart encoding
  loop lag            the longest event-loop stall seen by a 5 ms ticker during the
                      timed ``tts`` and ``stt`` runs (after the warm-up run, whose SDK
                      import in a worker thread competes for the GIL)

The simulator answers at once, so real services add their own time on top.

    uv run python bench/voice.py [-n 10]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernel.config import SttConfig, TtsConfig  # noqa: E402
from kernel.voice.ffmpeg import find_ffmpeg, to_ogg_opus  # noqa: E402
from kernel.voice.ogg import opus_duration  # noqa: E402
from kernel.voice.stt import Transcriber  # noqa: E402
from kernel.voice.tts import Synthesizer  # noqa: E402
from tests.sim.openai_sim import OpenAISim  # noqa: E402
from tests.voice.audio import tone  # noqa: E402


class LagMeter:
    """A ticker every 5 ms; records how late it woke (the loop was blocked meanwhile)."""

    def __init__(self) -> None:
        self.worst = 0.0
        self._task: asyncio.Task[None] | None = None

    async def _tick(self) -> None:
        while True:
            start = time.perf_counter()
            await asyncio.sleep(0.005)
            self.worst = max(self.worst, time.perf_counter() - start - 0.005)

    def __enter__(self) -> LagMeter:
        self._task = asyncio.get_running_loop().create_task(self._tick())
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()


async def timed(
    runs: int, action: Callable[[], Awaitable[object]], lag: LagMeter | None = None
) -> list[float]:
    await action()  # warm-up: SDK import, client build, page cache
    if lag is not None:
        lag.worst = 0.0  # the first use's import competes for the GIL; count steady state
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        await action()
        samples.append(time.perf_counter() - start)
    return samples


def row(name: str, samples: list[float], note: str = "") -> None:
    median, worst = statistics.median(samples) * 1000, max(samples) * 1000
    print(f"| {name} | {median:.1f} | {worst:.1f} | {note} |")


async def main(runs: int) -> None:
    ffmpeg = find_ffmpeg()
    if ffmpeg is None:
        sys.exit("no ffmpeg: install it or `uv sync` (imageio-ffmpeg is a dev dependency)")
    print(f"ffmpeg: {ffmpeg}\n")
    print("| case | median ms | max ms | note |")
    print("|---|---|---|---|")
    for seconds in (5, 30, 120):
        mp3 = tone("mp3", seconds=float(seconds))
        out: list[bytes] = []

        async def convert(mp3: bytes = mp3, out: list[bytes] = out) -> None:
            out[:] = [await to_ogg_opus(mp3, ffmpeg, 120)]

        samples = await timed(runs, convert)
        per_second = len(out[0]) / opus_duration(out[0]) / 1024
        row(f"ffmpeg mp3→ogg {seconds}s", samples, f"{per_second:.1f} KiB per second of audio")

    async with OpenAISim() as sim:
        sim.speech_audio = tone("mp3", seconds=30.0)
        tts = Synthesizer(
            TtsConfig(type="openai", api_base=sim.base_url, api_key="k", voice="v", ffmpeg=ffmpeg)
        )
        stt = Transcriber(SttConfig(api_base=sim.base_url, api_key="k"))
        voice = tone("ogg", seconds=30.0)
        try:
            with LagMeter() as tts_lag:
                samples = await timed(runs, lambda: tts.synthesize("你好" * 100), tts_lag)
            row("tts openai 30s", samples, f"loop lag max {tts_lag.worst * 1000:.1f} ms")
            with LagMeter() as stt_lag:
                samples = await timed(
                    runs, lambda: stt.transcribe(voice, "v.ogg", "audio/ogg"), stt_lag
                )
            row("stt 30s voice", samples, f"loop lag max {stt_lag.worst * 1000:.1f} ms")
        finally:
            await tts.aclose()
            await stt.aclose()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=10, help="timed runs per case")
    asyncio.run(main(parser.parse_args().n))
