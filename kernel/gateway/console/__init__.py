"""The web console on the sidecar (issue 21): pages shipped in the package under
``static/`` (plain HTML, CSS and a little JavaScript: no build step, nothing fetched
from elsewhere), served at ``/console/``, using only the documented sidecar routes.

Public API:

- ``install(app, hours)``: the console's routes on the sidecar's application;
- ``security_headers``: the response hook that sets CSP, framing and sniffing headers;
- ``is_console(path)``: the console's own paths (they answer for their own sign-in);
- ``ConsoleSessions``, ``ConsoleSession``, ``csrf_matches``: the sign-ins kept in memory;
- ``cookie_of(request)``: this sidecar's cookie name (with its port);
- ``COOKIE``, ``CSRF_HEADER``, ``SAFE_METHODS``, ``CONSOLE``, ``SESSION``, ``SHELL``:
  their names.
"""

from kernel.gateway.console.auth import (
    COOKIE,
    CSRF_HEADER,
    SAFE_METHODS,
    ConsoleSession,
    ConsoleSessions,
    csrf_matches,
)
from kernel.gateway.console.pages import (
    CONSOLE,
    SESSION,
    SHELL,
    cookie_of,
    install,
    is_console,
    security_headers,
)

__all__ = [
    "CONSOLE",
    "COOKIE",
    "CSRF_HEADER",
    "SAFE_METHODS",
    "SESSION",
    "SHELL",
    "cookie_of",
    "ConsoleSession",
    "ConsoleSessions",
    "csrf_matches",
    "install",
    "is_console",
    "security_headers",
]
