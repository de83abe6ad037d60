"""jieba costs nothing until the first memory operation that needs it, then loads once,
quietly, with its dictionary cache under data_dir. Checked in a fresh interpreter (this
test process may have loaded jieba already), run with warnings as errors."""

from __future__ import annotations

import asyncio
import json
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import kernel_env, write_config

CHILD = textwrap.dedent(
    """
    import asyncio, json, logging, sys
    from pathlib import Path
    from kernel.app import Kernel
    from kernel.config import load_config
    from kernel.core.logs import setup_logging

    setup_logging(None, [], level=logging.DEBUG, stream=sys.stdout)
    report = {}

    async def main():
        kernel = Kernel(load_config(Path(sys.argv[1]), env={}, require_telegram=False))
        await kernel.start()
        report["after_start"] = "jieba" in sys.modules
        await kernel.memories.recent()
        await kernel.memories.count()
        report["recall_empty"] = [m.text for m in await kernel.memories.recall("昭和", 5)]
        report["after_list"] = "jieba" in sys.modules
        await kernel.memories.add("我喜欢昭和时期的音乐")
        report["after_add"] = "jieba" in sys.modules
        report["found"] = [m.text for m in await kernel.memories.search("昭和的歌")]
        report["cache"] = sorted(p.name for p in (kernel.config.data_dir / "cache").iterdir())
        await kernel.stop()

    asyncio.run(main())
    print("REPORT " + json.dumps(report, ensure_ascii=False))
    """
)


@pytest.mark.slow
async def test_jieba_loads_on_first_use_quietly_with_its_cache_in_data_dir(
    tmp_path: Path,
) -> None:
    config = write_config(tmp_path, "http://127.0.0.1:9", "openai_compat")
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-W",
        "error",
        "-c",
        CHILD,
        str(config),
        cwd=tmp_path,
        env=kernel_env(),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out_bytes, err_bytes = await asyncio.wait_for(proc.communicate(), timeout=50)
    out, err = out_bytes.decode(), err_bytes.decode()
    assert proc.returncode == 0, err
    report = json.loads(out.split("REPORT ", 1)[1])
    assert report == {
        "after_start": False,
        "recall_empty": [],
        "after_list": False,
        "after_add": True,
        "found": ["我喜欢昭和时期的音乐"],
        "cache": ["jieba.cache"],
    }
    # jieba's own lines went to Kernel's log at debug level, not to stderr
    assert err == ""
    assert "DEBUG kernel.memory.tokens: jieba: Building prefix dict" in out
    assert f"Dumping model to file cache {tmp_path / 'data' / 'cache' / 'jieba.cache'}" in out
    assert out.count("kernel.memory.tokens: jieba loaded") == 1
