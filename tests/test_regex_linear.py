"""Regexes run on outside input stay linear (issue 12 sweep): each pattern that used to
backtrack quadratically runs on a hostile ~200 KB input in a child process, which must
finish within a generous bound (quadratic took minutes at this size)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # a child process per pattern

# Each case is a Python expression run in a child process: the re engine holds the GIL
# while it matches, so a worker thread in this process could not be timed out.
PRELUDE = (
    "from kernel.cron import schedule, workflow\n"
    "from kernel.core.redact import Redactor, secret_assignment\n"
    "from kernel.telegram import render, split\n"
    "from kernel.voice import text as voice\n"
    "N = 200_000\n"
)
ROOT = Path(__file__).resolve().parents[1]
CASES: dict[str, str] = {
    "selfops scan: a run of name characters": "secret_assignment('a' * N)",
    "selfops scan: flags without values": "secret_assignment('--a ' * (N // 4))",
    "selfops scan: table cells": "secret_assignment('| a ' * (N // 4))",
    "selfops scan: keys without values": "secret_assignment('\"a\":' * (N // 4))",
    "voice tags never closed": "voice._TAG.sub('', '<a' * (N // 2))",
    "voice table rule over blank lines": "voice._TABLE_RULE.sub('', '\\n' * N + 'x')",
    "voice table rule over blanks": "voice._TABLE_RULE.sub('', '--' + ' ' * N + 'x')",
    "telegram trailing blanks": "render._TRAILING_SPACE.sub('', ' ' * N + 'x')",
    "telegram tags never closed": "render._TAG.sub('', '<' * N)",
    "telegram split atoms": "list(split._ATOM.finditer('<a \"' * (N // 4)))",
    "cron every: digits without a unit": "schedule._PART.findall('1' * N)",
    "cron every: blanks": "schedule._EVERY.match('every' + ' ' * N + '\\nx\\ny')",
    "workflow condition: blanks in the value": (
        "workflow.parse_condition('job_id == x' + ' ' * N + 'y')"
    ),
    "redact header before blanks": "Redactor()('authorization:' + ' ' * N + '[REDACTED]')",
    # An attached document's own words (issue 23's final read): file heads that never
    # close, a line full of voice tags, and what the audit reads of an input.
    "history slimming: file heads never closed": (
        "from kernel.agent import slimming\n"
        "slimming.without_files('[文件: a]\\n````\\n' * (N // 10))\n"
        "slimming.without_files('[文件: ' * (N // 5))"
    ),
    "history slimming: voice tags on one line": (
        "from kernel.agent import slimming\nslimming.without_voice('[语音: ' * (N // 5), 'x')"
    ),
    "history slimming: English markers (general.language = en)": (
        "from kernel.agent import slimming\n"
        "slimming.without_files('[file: a]\\n````\\n' * (N // 10))\n"
        "slimming.without_voice('[voice: ' * (N // 5), 'x')"
    ),
    "audit: the parts of a hostile input": (
        "from kernel.agent import trail\n"
        "from kernel.agent.turn_parts import UserInput\n"
        "trail.parts_of(UserInput('[文件: ' * (N // 5) + '[语音: ' * (N // 5)))"
    ),
    # An owner's rule with a pattern that backtracks exponentially in a backtracking
    # engine, on the owner's words: RE2 matches it in linear time.
    "routing rule pattern (a+)+$": (
        "import tempfile\n"
        "from pathlib import Path\n"
        "from kernel.config import load_config\n"
        "from kernel.routing import Facts, Health, Router\n"
        "with tempfile.TemporaryDirectory() as folder:\n"
        "    path = Path(folder) / 'config.toml'\n"
        '    path.write_text(\'[[routing.rules]]\\nname = "r"\\npattern = "(a+)+$"\\n\')\n'
        "    env = {'KERNEL_PROVIDER_ANTHROPIC_API_KEY': 'sk-0123456789'}\n"
        "    config = load_config(path, env=env, require_telegram=False)\n"
        "router = Router(config, Health(config.routing))\n"
        "assert router.match(Facts('telegram', 'a' * N + '!')) is None\n"
        "assert router.match(Facts('telegram', 'a' * N)).name == 'r'\n"
    ),
}


# One child runs every case in turn and names each as it finishes (a child per case cost
# ~0.35 s of CPU each in imports): a case still running when the bound is reached is the
# super-linear one.
RUNNER = (
    "import json, sys, traceback\n"
    "for name, code in json.loads(sys.stdin.read()).items():\n"
    "    try:\n"
    "        exec(compile(code, name, 'exec'), {})\n"
    "        print(json.dumps([name, None]), flush=True)\n"
    "    except Exception:\n"
    "        print(json.dumps([name, traceback.format_exc()]), flush=True)\n"
)
BOUND = 120  # seconds for every case together; one quadratic case took minutes alone


def test_every_pattern_is_linear_on_hostile_input() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # this checkout's kernel, whatever the cwd
    cases = json.dumps({name: PRELUDE + code for name, code in CASES.items()})
    process = subprocess.Popen(
        [sys.executable, "-c", RUNNER],
        cwd=ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        output, _ = process.communicate(cases, timeout=BOUND)
    except subprocess.TimeoutExpired:
        process.kill()
        output, _ = process.communicate()
    outcomes = dict(map(json.loads, output.splitlines()))
    if len(outcomes) < len(CASES):
        running = list(CASES)[len(outcomes)]
        pytest.fail(f"{running}: still running after {BOUND} s with the cases before it")
    failed = {name: error for name, error in outcomes.items() if error is not None}
    assert not failed, failed
