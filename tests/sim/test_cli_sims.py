"""The simulator routes the coding CLIs need: the OpenAI simulator's minimal Responses
API (codex-cli 0.169.0) through the real openai SDK, and the Gemini simulator
(gemini-cli 0.61.0) over plain HTTP."""

from __future__ import annotations

import json

import aiohttp
import openai

from tests.sim.gemini_sim import GeminiSim
from tests.sim.openai_sim import OpenAISim
from tests.sim.script import Error, text_reply


async def test_responses_stream_through_the_openai_sdk() -> None:
    async with OpenAISim() as sim:
        sim.enqueue(text_reply("Hello from codex's model."), Error(529, "server_error", "busy"))
        client = openai.AsyncOpenAI(api_key="sk-test", base_url=sim.base_url, max_retries=0)
        stream = await client.responses.create(model="gpt-sim", input="hi", stream=True)
        kinds, text = [], ""
        async for event in stream:
            kinds.append(event.type)
            if event.type == "response.output_text.delta":
                text += event.delta
        assert text == "Hello from codex's model."
        assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
        try:
            await client.responses.create(model="gpt-sim", input="again")
        except openai.APIStatusError as exc:
            assert exc.status_code == 529
        else:  # pragma: no cover
            raise AssertionError("the scripted error was not returned")
        await client.close()
        assert [r.path for r in sim.requests] == ["/v1/responses", "/v1/responses"]


async def test_gemini_sim_streams_generate_content_and_echoes() -> None:
    async with GeminiSim(fallback="echo") as sim, aiohttp.ClientSession() as http:
        body = {"contents": [{"role": "user", "parts": [{"text": "Say hello"}]}]}
        url = f"{sim.base_url}/v1beta/models/gemini-x:streamGenerateContent?alt=sse"
        async with http.post(url, json=body) as response:
            raw = (await response.read()).decode()
        chunks = [json.loads(line[6:]) for line in raw.splitlines() if line.startswith("data: ")]
        text = "".join(c["candidates"][0]["content"]["parts"][0]["text"] for c in chunks)
        assert text == "echo: Say hello"
        assert chunks[-1]["candidates"][0]["finishReason"] == "STOP"
        sim.enqueue(Error(503, message="overloaded"))
        async with http.post(url, json=body) as response:
            assert response.status == 503
            assert (await response.json())["error"]["status"] == "UNAVAILABLE"
