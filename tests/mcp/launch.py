"""``python launch.py ZYGOTE SCRIPT ARGS…``: ``python SCRIPT ARGS…`` forked from the test
run's zygote (tests/zygote.py), which has imported the MCP SDK once, so that a test MCP
server (or the stand-in Claude Code of tests/delegate/claude_permission.py, an MCP client)
costs one small process instead of importing the SDK again.

To its caller this process is the script: the script gets this process's standard
streams, working directory and environment (this process keeps none of the streams, so
end-of-file travels as it would); SIGTERM, SIGINT and SIGHUP sent here (to the process
group the caller started it in) are passed on to the script; this process ends when
the script does, with its exit code, or by the same signal. The script is not in this
process's group, so a SIGKILL of the group, which cannot be passed on, reaches it by a
lifeline: a pipe whose only writing end this process holds, the script's fourth
descriptor, whose end of file (this process gone, however) ends the script with
SIGKILL at once. Without a zygote to fork (it refused, or is gone) this process becomes
``python SCRIPT ARGS…`` itself. Only the standard library: it must start in
milliseconds.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sys


def main() -> None:
    zygote, script, *args = sys.argv[1:]
    request = {"script": script, "args": args, "cwd": os.getcwd(), "env": dict(os.environ)}
    theirs, ours = os.pipe()  # the lifeline: the script's end, and ours (never written)
    try:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(zygote)
        socket.send_fds(conn, [json.dumps(request).encode() + b"\n"], [0, 1, 2, theirs])
        reader = conn.makefile("rb")
        said = reader.readline().strip()
    except OSError:
        said = b""
    os.close(theirs)
    if said in (b"", b"-"):
        os.execv(sys.executable, [sys.executable, script, *args])
    pid = int(said)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)

    def pass_on(number: int, _: object) -> None:
        with contextlib.suppress(ProcessLookupError):  # it ended: its code is on its way
            os.kill(pid, number)

    for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(number, pass_on)
    line = reader.readline().strip()
    code = int(line) if line else 1
    if code < 0:
        with contextlib.suppress(OSError):  # SIGKILL's disposition cannot be set
            signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    sys.exit(code)


if __name__ == "__main__":
    main()
