"""``[stt]`` (speech to text) and ``[tts]`` (spoken replies)."""

from __future__ import annotations

from typing import Annotated, Literal, get_args

from pydantic import Field

from kernel.config.schema import (
    SECRET,
    SECRET_HEADERS,
    Base,
    Env,
    PosFloat,
    PosInt,
    Section,
    StrMap,
)

TtsType = Literal["edge", "openai"]
TTS_TYPES: tuple[str, ...] = get_args(TtsType)
TtsFormat = Literal["mp3", "opus", "aac", "flac", "wav"]  # what ffmpeg can read from a pipe
TTS_FORMATS: tuple[str, ...] = get_args(TtsFormat)
OPENAI_VOICE = "alloy"  # [tts] voice when type is "openai" and none is given


class SttConfig(Section):
    """``[stt]``: speech to text through an OpenAI-compatible ``audio/transcriptions``."""

    api_base: Base = Field("https://api.openai.com/v1", description="the endpoint's base URL")
    api_key: Annotated[str, SECRET, Env("KERNEL_STT_API_KEY")] = Field(
        "", description="without one voice messages are refused"
    )
    model: str = Field("whisper-1", description="the transcription model")
    headers: Annotated[StrMap, SECRET_HEADERS] = Field(
        default_factory=dict, description="extra HTTP headers"
    )
    timeout: PosFloat = Field(60.0, description="seconds per transcription")


class TtsConfig(Section):
    """``[tts]``: replies to voice spoken by edge-tts or an OpenAI-compatible
    ``audio/speech``, then converted to OGG/Opus by ffmpeg."""

    type: TtsType = Field("edge", description="edge-tts or an OpenAI-compatible endpoint")
    voice: str = Field("zh-CN-XiaoxiaoNeural", description=f'openai default: "{OPENAI_VOICE}"')
    api_base: Base = Field("https://api.openai.com/v1", description="type openai only")
    api_key: Annotated[str, SECRET, Env("KERNEL_TTS_API_KEY")] = Field(
        "", description="type openai only (required)"
    )
    model: str = Field("tts-1", description="type openai only")
    headers: Annotated[StrMap, SECRET_HEADERS] = Field(
        default_factory=dict, description="type openai only"
    )
    format: TtsFormat = Field("mp3", description="what the openai endpoint returns")
    # A proxy URL may carry a user and password.
    proxy: Annotated[str, SECRET] = Field("", description="type edge only: an HTTP proxy")
    timeout: PosFloat = Field(30.0, description="seconds for speech, and for the conversion")
    ffmpeg: str = Field("", description="a path or command; empty: PATH, then imageio-ffmpeg")
    max_chars: PosInt = Field(500, description="only the reply's first characters are spoken")
