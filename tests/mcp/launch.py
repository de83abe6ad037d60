"""``python launch.py ZYGOTE SCRIPT ARGS…``: ``python SCRIPT ARGS…`` forked from the test
run's zygote (tests/zygote.py), which has imported the MCP SDK once, so that a test MCP
server costs Kernel's MCP client one small process instead of importing the SDK again.

To the client this process is the server: the server gets this process's standard
streams, working directory and environment (this process keeps none of the streams, so
end-of-file travels as it would); SIGTERM, SIGINT and SIGHUP sent here (to the process
group the client started it in) are passed on to the server; this process ends when
the server does, with its exit code, or by the same signal. Without a zygote to fork
(it refused, or is gone) it becomes ``python SCRIPT ARGS…`` itself. Only the standard
library: it must start in milliseconds.
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
    try:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(zygote)
        socket.send_fds(conn, [json.dumps(request).encode() + b"\n"], [0, 1, 2])
        reader = conn.makefile("rb")
        said = reader.readline().strip()
    except OSError:
        said = b""
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
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    sys.exit(code)


if __name__ == "__main__":
    main()
