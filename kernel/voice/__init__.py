"""Voice adapters: speech to text (``stt``), text to speech (``tts``), and the ffmpeg and
Ogg plumbing between them. Channels use these; the agent core never does (it sees the
transcript as text, ``[语音: …]``).

Public API: ``kernel.voice.stt.Transcriber``, ``kernel.voice.tts.Synthesizer``,
``kernel.voice.text.speakable`` and ``kernel.voice.ffmpeg.find_ffmpeg``.
"""
