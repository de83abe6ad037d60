"""Stand-in coding CLIs: small Python executables (``#!<this python>``, chmod +x) that
print the JSONL each real CLI prints, and misbehave on demand.

Shapes recorded from the real releases run against the loopback simulators and against a
closed port (2026-11-23): ``@anthropic-ai/claude-code`` 2.1.197, ``@openai/codex``
0.169.0 (``codex-cli 0.169.0``), ``@google/gemini-cli`` 0.61.0. Their command lines are
parsed the way those CLIs parse them: ``--version``/``--help`` answer without running;
``--`` ends the options; claude's ``--append-system-prompt`` takes the next argument
(or its ``=`` value) whatever it starts with; claude's variadic flags
(``--allowedTools`` …) take every following argument, so a task after them is
swallowed ("Input must be provided …", exit 1); codex rejects ``--full-auto``
(``error: unexpected argument '--full-auto' found``, exit 2); gemini takes the task from
``-p <task>``/``--prompt=<task>`` and exits 55
in an untrusted folder unless given ``--skip-trust`` (or ``GEMINI_CLI_TRUST_WORKSPACE``).

On SIGTERM each ends the way the release does (recorded 2026-12-05 from claude 2.1.332,
codex-cli 0.171.0 and gemini-cli 0.61.0 against a closed port): claude exits 143, gemini
exits 0 (its handler: the "killed Gemini run reports exit 0" of issue 35), codex dies of
the signal. Codex 0.171.0 against an unknown model first prints an ``item.completed``
of type ``error`` ("Model metadata for `gpt-sim` not found …"), which the unreachable
stand-in prints too.

One script serves every CLI; its behaviour comes from the environment the test sets
(the child inherits it):

- ``STANDIN_MODE``: ``ok`` (default), ``hang`` (no output, sleep), ``step_then_hang``
  (one displayable event, then sleep), ``noise_then_ok`` (start-up noise only, a pause
  of ``STANDIN_PAUSE`` seconds, then a normal run), ``big`` (``STANDIN_SIZE`` characters
  of answer), ``fail`` (an error on stderr, exit 3), ``no_exit`` (completion event, then
  sleep without exiting), ``unreachable`` (the API cannot be reached: claude's
  ``system/api_retry`` events, codex's ``Reconnecting... waiting for network`` errors,
  gemini's ``Attempt N failed`` stderr lines, one per ``STANDIN_DELAY``, forever, or
  ``STANDIN_RETRIES`` of them followed by each CLI's final error and exit 1),
  ``retry_then_ok`` (claude: two ``api_retry`` events for a 529, then a normal run).
- ``STANDIN_DELAY``: seconds after each displayable event (start-up noise comes at once).
- ``STANDIN_IGNORE_TERM=1``: ignore SIGTERM (the child and its grandchild).
- ``STANDIN_GRANDCHILD=1``: spawn a sleeping grandchild first.
- ``STANDIN_STDERR_SIZE``: that many characters on stderr first.
- ``STANDIN_SLOW_VERSION``: a shape whose ``--version`` creates the file
  ``STANDIN_SLOW_VERSION_MARK`` and then sleeps (killed with Kernel's probe).
- ``STANDIN_RECORD``: a file that gets ``{"argv", "cwd", "pid", "grandchild", "env"}``.

The CLI shape is the script's first argument baked in at creation (``claude_code``,
``codex``, ``gemini`` or ``text``).
"""

from __future__ import annotations

import stat
import sys
from pathlib import Path

SCRIPT = r"""#!{python}
import json, os, signal, subprocess, sys, time

SHAPE = {shape!r}
args = sys.argv[1:]
VARIADIC = ("--allowedTools", "--allowed-tools", "--disallowedTools", "--disallowed-tools",
            "--add-dir", "--mcp-config", "--tools", "--betas", "--file")
VERSIONS = {{"claude_code": "2.1.197 (Claude Code)", "codex": "codex-cli 0.169.0",
            "gemini": "0.61.0", "text": "text-cli 1.0"}}


def parse(argv):
    # Options up to "--", the way the real parsers read them: the task is the prompt.
    positional, i, ends = [], 0, False
    prompt = None
    while i < len(argv):
        arg = argv[i]
        if ends:
            positional.append(arg)
        elif arg == "--":
            ends = True
        elif arg in ("--version", "-V", "-v"):
            if os.environ.get("STANDIN_SLOW_VERSION") == SHAPE:  # asked, then slow to say
                open(os.environ["STANDIN_SLOW_VERSION_MARK"], "w").close()
                time.sleep(600)
            print(VERSIONS[SHAPE] if "exec" not in argv else "codex-cli-exec 0.169.0")
            sys.exit(0)
        elif arg in ("--help", "-h"):
            print("Usage: " + SHAPE + " [options] [prompt]")
            sys.exit(0)
        elif SHAPE == "codex" and arg == "--full-auto":
            sys.stderr.write("error: unexpected argument '--full-auto' found\n\n"
                             "  tip: to pass '--full-auto' as a value, use '-- --full-auto'\n\n"
                             "Usage: codex exec [OPTIONS] [PROMPT]\n"
                             "       codex exec [OPTIONS] <COMMAND> [ARGS]\n\n"
                             "For more information, try '--help'.\n")
            sys.exit(2)
        elif SHAPE == "claude_code" and arg in VARIADIC:
            while i + 1 < len(argv) and not argv[i + 1].startswith("-"):
                i += 1  # commander: a variadic option takes every following value
        elif (SHAPE == "gemini" and arg in ("-p", "--prompt") and i + 1 < len(argv)
              and argv[i + 1] not in ("--help", "--version")):
            i += 1
            prompt = argv[i]
        elif SHAPE == "gemini" and arg.startswith("--prompt="):
            prompt = arg.split("=", 1)[1]
        elif SHAPE == "codex" and arg in ("-C", "--output-last-message", "-o", "--color"):
            i += 1
        elif SHAPE == "claude_code" and arg in ("--output-format", "--append-system-prompt"):
            i += 1  # commander: a required value is taken even when it starts with "-"
        elif arg.startswith("-"):
            pass
        else:
            positional.append(arg)
        i += 1
    if SHAPE == "gemini":
        return prompt if prompt is not None else " ".join(positional)
    if SHAPE == "codex" and positional and positional[0] == "exec":
        positional = positional[1:]
    return positional[-1] if positional else ""


task = parse(args)
if SHAPE == "claude_code" and "-p" in args and not task:
    sys.stderr.write("Error: Input must be provided either through stdin or as a prompt "
                     "argument when using --print\n")
    sys.exit(1)
trusted = "--skip-trust" in args or os.environ.get("GEMINI_CLI_TRUST_WORKSPACE") == "true"
if SHAPE == "gemini" and not trusted:
    sys.stderr.write("\x1b[31mGemini CLI is not running in a trusted directory. To proceed, "
                     "either use `--skip-trust`, set the `GEMINI_CLI_TRUST_WORKSPACE=true` "
                     "environment variable, or trust this directory in interactive mode. For "
                     "more details, see https://geminicli.com/docs/cli/trusted-folders/"
                     "#headless-and-automated-environments\x1b[0m\n")
    sys.exit(55)
mode = os.environ.get("STANDIN_MODE", "ok")
delay = float(os.environ.get("STANDIN_DELAY", "0"))
if os.environ.get("STANDIN_IGNORE_TERM") == "1":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
elif SHAPE in ("claude_code", "gemini"):  # their own SIGTERM handlers (recorded)
    signal.signal(signal.SIGTERM, lambda *a: os._exit(143 if SHAPE == "claude_code" else 0))
grandchild = None
if os.environ.get("STANDIN_GRANDCHILD") == "1":
    code = "import signal, time\n"
    if os.environ.get("STANDIN_IGNORE_TERM") == "1":
        code += "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    code += "time.sleep(600)\n"
    grandchild = subprocess.Popen([sys.executable, "-c", code]).pid
stderr_size = int(os.environ.get("STANDIN_STDERR_SIZE", "0"))
if stderr_size:  # progress on stderr, as codex prints it in text mode
    sys.stderr.write("ERR-HEAD-" + "e" * (stderr_size - 18) + "-ERR-TAIL")
    sys.stderr.flush()
record = os.environ.get("STANDIN_RECORD")
if record:
    env = {{k: v for k, v in os.environ.items() if k.startswith(("KERNEL_", "STANDIN_"))}}
    info = {{"argv": sys.argv, "cwd": os.getcwd(), "pid": os.getpid(),
             "grandchild": grandchild, "env": env}}
    with open(record + ".tmp", "w") as f:
        json.dump(info, f)
    os.replace(record + ".tmp", record)


def emit(event, pause=True):
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()
    if delay and pause:
        time.sleep(delay)


def say(text):
    sys.stdout.write(text + "\n")
    sys.stdout.flush()
    if delay:
        time.sleep(delay)


def option(name):
    return args[args.index(name) + 1] if name in args else None


answer = "Done: " + task
if mode == "big":
    size = int(os.environ.get("STANDIN_SIZE", "200000"))
    answer = "HEAD-" + "x" * (size - 10) + "-TAIL"

if mode == "hang":
    time.sleep(600)
if mode == "fail":
    sys.stderr.write("fatal: the model refused the credentials\n")
    sys.stderr.flush()
    sys.exit(3)

retries = int(os.environ.get("STANDIN_RETRIES", "0"))  # 0: retry forever


def attempts():
    n = 0
    while not retries or n < retries:
        n += 1
        yield n
        time.sleep(delay or 0.05)


if mode == "unreachable" and SHAPE == "claude_code":
    emit({{"type": "system", "subtype": "init", "cwd": os.getcwd(), "session_id": "s-1",
           "tools": ["Bash", "Read", "Edit"], "model": "claude-opus-4-8[1m]",
           "permissionMode": "default"}}, pause=False)
    for n in attempts():
        emit({{"type": "system", "subtype": "api_retry", "attempt": n,
               "max_retries": retries or 10, "retry_delay_ms": 589.9, "error_status": None,
               "error": "unknown", "session_id": "s-1", "uuid": "u-%d" % n}}, pause=False)
    text = "API Error: Unable to connect to API (ConnectionRefused)"
    emit({{"type": "assistant", "message": {{"id": "m-err", "model": "<synthetic>",
           "role": "assistant", "stop_reason": "stop_sequence", "type": "message",
           "content": [{{"type": "text", "text": text}}]}}, "parent_tool_use_id": None,
           "session_id": "s-1", "error": "server_error"}}, pause=False)
    emit({{"type": "result", "subtype": "success", "is_error": True, "api_error_status": None,
           "duration_ms": 2139, "num_turns": 1, "result": text, "session_id": "s-1",
           "total_cost_usd": 0}}, pause=False)
    sys.exit(1)
elif mode == "unreachable" and SHAPE == "codex":
    emit({{"type": "thread.started", "thread_id": "th-1"}}, pause=False)
    emit({{"type": "item.completed", "item": {{"id": "item_0", "type": "error", "message":
           "Model metadata for `gpt-sim` not found. Defaulting to fallback metadata; this "
           "can degrade performance and cause issues."}}}}, pause=False)
    emit({{"type": "turn.started"}}, pause=False)
    for n in attempts():
        if retries:
            message = ("Reconnecting... %d/%d (unexpected status 529 <unknown status code>: "
                       "simulated 529, url: http://127.0.0.1:9/v1/responses)" % (n, retries))
        else:
            message = ("Reconnecting... waiting for network (Connection failed: error "
                       "sending request)")
        emit({{"type": "error", "message": message}}, pause=False)
    final = ("unexpected status 529 <unknown status code>: simulated 529, url: "
             "http://127.0.0.1:9/v1/responses")
    emit({{"type": "error", "message": final}}, pause=False)
    emit({{"type": "turn.failed", "error": {{"message": final}}}}, pause=False)
    sys.exit(1)
elif mode == "unreachable" and SHAPE == "gemini":
    emit({{"type": "init", "timestamp": "2026-11-23T23:19:42.098Z", "session_id": "g-1",
           "model": "auto"}}, pause=False)
    emit({{"type": "message", "timestamp": "2026-11-23T23:19:42.109Z", "role": "user",
           "content": task}}, pause=False)
    for n in attempts():
        sys.stderr.write("Attempt %d failed. Retrying with backoff... Error: exception "
                         "TypeError: fetch failed sending request\n" % n)
        sys.stderr.flush()
    emit({{"type": "result", "timestamp": "2026-11-23T23:24:17.397Z", "status": "error",
           "error": {{"type": "unknown", "message": "[API Error: exception TypeError: fetch "
           "failed sending request]"}}, "stats": {{"total_tokens": 0, "duration_ms": 0,
           "tool_calls": 0}}}}, pause=False)
    sys.exit(int(os.environ.get("STANDIN_EXIT", "1")))

if SHAPE == "claude_code":
    emit({{"type": "system", "subtype": "init", "cwd": os.getcwd(), "session_id": "s-1",
           "tools": ["Bash", "Read", "Edit"], "model": "claude-sonnet-4-5",
           "permissionMode": "default"}}, pause=False)
    if mode == "noise_then_ok":
        time.sleep(float(os.environ.get("STANDIN_PAUSE", "1")))
    if mode == "retry_then_ok":  # an overloaded API that recovers (recorded 529 shape)
        for n in (1, 2):
            emit({{"type": "system", "subtype": "api_retry", "attempt": n, "max_retries": 10,
                   "retry_delay_ms": 576.7, "error_status": 529, "error": "overloaded",
                   "session_id": "s-1", "uuid": "u-%d" % n}}, pause=False)
    emit({{"type": "assistant", "message": {{"id": "msg_1", "type": "message",
           "role": "assistant", "content": [{{"type": "text", "text": "Let me look around."}}]}},
           "parent_tool_use_id": None, "session_id": "s-1"}})
    if mode == "step_then_hang":
        time.sleep(600)
    emit({{"type": "assistant", "message": {{"id": "msg_2", "type": "message",
           "role": "assistant", "content": [{{"type": "tool_use", "id": "toolu_1",
           "name": "Bash", "input": {{"command": "ls -la", "description": "List files"}}}}]}},
           "parent_tool_use_id": None, "session_id": "s-1"}})
    emit({{"type": "user", "message": {{"role": "user", "content": [{{"tool_use_id": "toolu_1",
           "type": "tool_result", "content": "a.txt\nb.txt", "is_error": False}}]}},
           "parent_tool_use_id": None, "session_id": "s-1"}})
    emit({{"type": "assistant", "message": {{"id": "msg_3", "type": "message",
           "role": "assistant", "content": [{{"type": "text", "text": answer}}]}},
           "parent_tool_use_id": None, "session_id": "s-1"}})
    emit({{"type": "result", "subtype": "success", "is_error": False, "duration_ms": 1200,
           "num_turns": 3, "result": answer, "session_id": "s-1", "total_cost_usd": 0.01}})
elif SHAPE == "codex":
    emit({{"type": "thread.started", "thread_id": "th-1"}}, pause=False)
    emit({{"type": "turn.started"}}, pause=False)
    if mode == "noise_then_ok":
        time.sleep(float(os.environ.get("STANDIN_PAUSE", "1")))
    emit({{"type": "item.completed", "item": {{"id": "item_0", "type": "reasoning",
           "text": "**Scanning the repository**"}}}})
    if mode == "step_then_hang":
        time.sleep(600)
    emit({{"type": "item.started", "item": {{"id": "item_1", "type": "command_execution",
           "command": "bash -lc ls", "aggregated_output": "", "exit_code": None,
           "status": "in_progress"}}}})
    emit({{"type": "item.completed", "item": {{"id": "item_1", "type": "command_execution",
           "command": "bash -lc ls", "aggregated_output": "a.txt\n", "exit_code": 0,
           "status": "completed"}}}})
    emit({{"type": "item.completed", "item": {{"id": "item_2", "type": "file_change",
           "changes": [{{"path": "src/app.py", "kind": "update"}}], "status": "completed"}}}})
    emit({{"type": "item.completed", "item": {{"id": "item_3", "type": "agent_message",
           "text": "stream copy: " + answer}}}})
    last = option("--output-last-message")
    if last:
        with open(last, "w") as f:
            f.write("From the last-message file: " + answer)
    emit({{"type": "turn.completed", "usage": {{"input_tokens": 10,
           "cached_input_tokens": 0, "output_tokens": 5}}}})
elif SHAPE == "gemini":
    emit({{"type": "init", "timestamp": "2025-10-10T12:00:00.000Z", "session_id": "g-1",
           "model": "gemini-2.5-pro"}}, pause=False)
    emit({{"type": "message", "role": "user", "content": task,
           "timestamp": "2025-10-10T12:00:00.000Z"}}, pause=False)
    if mode == "noise_then_ok":
        time.sleep(float(os.environ.get("STANDIN_PAUSE", "1")))
    emit({{"type": "tool_use", "tool_name": "run_shell_command", "tool_id": "t-1",
           "parameters": {{"command": "ls -la"}}, "timestamp": "2025-10-10T12:00:01.000Z"}})
    if mode == "step_then_hang":
        time.sleep(600)
    emit({{"type": "tool_result", "tool_id": "t-1", "status": "success",
           "output": "a.txt", "timestamp": "2025-10-10T12:00:01.000Z"}})
    half = len(answer) // 2
    emit({{"type": "message", "role": "assistant", "content": answer[:half], "delta": True,
           "timestamp": "2025-10-10T12:00:02.000Z"}})
    emit({{"type": "message", "role": "assistant", "content": answer[half:], "delta": True,
           "timestamp": "2025-10-10T12:00:02.000Z"}})
    emit({{"type": "result", "status": "success", "stats": {{"total_tokens": 20,
           "input_tokens": 10, "output_tokens": 10, "duration_ms": 900, "tool_calls": 1}},
           "timestamp": "2025-10-10T12:00:03.000Z"}})
else:
    say("\x1b[1mworking on it\x1b[0m")
    if mode == "step_then_hang":
        time.sleep(600)
    say(answer)

if mode == "no_exit":
    time.sleep(600)
sys.exit(0)
"""


def make_cli(folder: Path, shape: str, name: str | None = None) -> Path:
    """Write a stand-in executable printing ``shape``'s stream; returns its path."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / (name or f"fake-{shape}")
    path.write_text(SCRIPT.format(python=sys.executable, shape=shape), encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def alive(pid: int) -> bool:
    """A live process (a zombie waiting for its parent counts as dead)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")
