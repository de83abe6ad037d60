"""A coding CLI's permission request: how it is shown to the owner, and what "allow for
this task" remembers.

Claude Code (``--permission-prompt-tool``) names the tool it wants and its exact input.
:func:`describe` makes the owner's message: a shell command verbatim in a code block, an
edit as a short diff, a new file's first lines, anything else as JSON; every value from
the CLI sits inside a code span or block fenced longer than any backtick run in it, so
nothing it sends can format the message. :func:`rule_for` is the rule "Allow for this
task" adds, shown in the same message: a simple shell command allows the same program
(and subcommand) again, ``Bash(git status:*)``; a compound one (``;``, ``&&``, a pipe,
a redirection, a substitution), an assignment or group before it, a shell, wrapper or
interpreter, ``rm``, ``curl`` and the like allow only themselves, exactly; so does a
program whose options can run commands (``git -c …``, ``find -exec``) without a
subcommand; a file tool the same tool on the same path; ``WebFetch``
the same host; anything else the same tool with the same input.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
import shlex
from dataclasses import dataclass
from typing import Any

from kernel.core.i18n import t

__all__ = ["SHOWN_CHARS", "PermissionRequest", "Rule", "describe", "rule_for", "too_long"]

SHOWN_CHARS = 3_000  # a command or JSON longer than this is denied unasked: never cut
PATH_CHARS = 500  # the same for a file's path
LABEL_CHARS = 300  # a longer prefix rule is an exact one
LINE_CHARS = 160  # of one line of a diff or a new file (its line count stays shown)
DIFF_LINES = 40
# Any of these makes a shell command more than one program run: only an exact rule.
_COMPOUND = re.compile(r"[;&|`<>\n\r]|\$\(")
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9_+.-]*")
_VERSION = re.compile(r"[0-9.]+$")  # python3.12 → python, node20 → node
# Printable ASCII but "@" and "\\": a URL WHATWG (Node) and Python read alike.
_URL = re.compile(r"https?://([A-Za-z0-9.-]+)(?::[0-9]{1,5})?(?:[/?#][!-?A-\[\]-~]*)?")
# Programs whose options can run another command (git -c core.pager=…, find -exec, sed's
# e, tar --to-command, an editor's !): a rule for the program alone, "Bash(git:*)", would
# allow that too. With a subcommand ("git status") the rule keeps the subcommand.
_FLAG_EXEC = frozenset(
    {
        "git", "find", "sed", "tar", "zip", "unzip", "make", "less", "more", "man", "vi",
        "vim", "nvim", "emacs", "nano", "docker", "podman", "kubectl", "npm", "yarn",
        "pnpm", "pip", "uv", "cargo", "go", "gradle", "mvn", "sqlite", "psql", "mysql",
        "gh", "jq", "parallel",
    }
)  # fmt: skip
_TOOL = re.compile(r"[A-Za-z0-9_.:-]{1,128}")
# Programs that run whatever their arguments say: a prefix rule would allow anything.
_RUNNERS = frozenset(
    {
        "sudo", "su", "doas", "env", "sh", "bash", "zsh", "dash", "fish", "eval", "exec",
        "xargs", "nohup", "timeout", "nice", "python", "python3", "node", "deno", "bun",
        "perl", "ruby", "php", "lua", "osascript", "powershell", "pwsh", "cmd", "npx",
        "uvx", "find", "awk", "ssh",
    }
)  # fmt: skip
# Programs whose every run can destroy or send away something: only exact rules.
_EXACT_ONLY = frozenset(
    {
        "rm", "rmdir", "dd", "mkfs", "shred", "truncate", "chmod", "chown", "kill",
        "pkill", "killall", "reboot", "shutdown", "curl", "wget", "scp", "rsync",
        "command", "builtin", "time", "busybox", "ksh", "csh", "tcsh", "watch", "strace",
        "ltrace", "setsid", "stdbuf", "chroot", "nsenter", "unshare", "flock", "ionice",
        "taskset", "script", "expect", "tclsh", "sg", "runuser", "pkexec", "git-shell",
    }
)  # fmt: skip
_FILE_TOOLS = {
    "Edit": "file_path",
    "MultiEdit": "file_path",
    "Write": "file_path",
    "Read": "file_path",
    "NotebookEdit": "notebook_path",
    "Glob": "path",
    "Grep": "path",
    "LS": "path",
}


@dataclass(frozen=True, slots=True)
class PermissionRequest:
    """What the CLI asks to run: ``tool_name`` and its exact ``input``."""

    tool_name: str
    input: dict[str, Any]
    tool_use_id: str = ""


@dataclass(frozen=True, slots=True)
class Rule:
    """One "allow for this task" rule. ``kind``: prefix (shell words), exact (the whole
    command), path, domain, input (a digest of the whole input)."""

    tool: str
    kind: str
    value: str

    @property
    def label(self) -> str:
        if self.kind == "prefix":
            return f"{self.tool}({self.value}:*)"
        if self.kind == "domain":
            return f"{self.tool}(domain:{self.value})"
        if self.kind == "input":
            return f"{self.tool}({t('perm.same_input')})"
        if self.kind == "exact":
            return f"{self.tool}({t('perm.same_command')})"
        return f"{self.tool}({self.value})"

    def matches(self, request: PermissionRequest) -> bool:
        if request.tool_name != self.tool:
            return False
        if self.kind == "prefix":
            words = _simple_words(_command(request))
            wanted = self.value.split(" ")
            return words is not None and words[: len(wanted)] == wanted
        return rule_for(request) == self


def rule_for(request: PermissionRequest) -> Rule:
    tool, data = request.tool_name, request.input
    if tool == "Bash":
        command = _command(request)
        words = _simple_words(command)
        if not words or not _plain_program(words[0]):
            return Rule(tool, "exact", command)
        prefix = words[:2] if len(words) > 1 and _WORD.fullmatch(words[1]) else words[:1]
        if len(prefix) == 1 and len(words) > 1 and _VERSION.sub("", prefix[0]) in _FLAG_EXEC:
            return Rule(tool, "exact", command)  # "git -c …": its flags can run anything
        label = " ".join(prefix)
        return (
            Rule(tool, "prefix", label)
            if len(label) <= LABEL_CHARS
            else Rule(tool, "exact", command)
        )
    key = _FILE_TOOLS.get(tool)
    if key is not None and isinstance(data.get(key), str) and data[key]:
        return Rule(tool, "path", data[key])
    if tool == "WebFetch" and isinstance(data.get("url"), str):
        host = _plain_host(data["url"])
        if host:
            return Rule(tool, "domain", host)
    digest = hashlib.sha256(_json(data).encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return Rule(tool, "input", digest)


def _plain_program(word: str) -> bool:
    """A program name a prefix rule may keep: not an assignment (``A=1 rm``), a group
    (``(rm``), a path to anything, a shell, an interpreter (any version: ``python3.12``)
    or a program that runs or destroys whatever its arguments say."""
    if not _WORD.fullmatch(word):
        return False
    base = _VERSION.sub("", word)
    return not ({word, base} & (_RUNNERS | _EXACT_ONLY))


def _plain_host(url: str) -> str | None:
    """The host of a plain ``http(s)://host[:port]/…`` URL; None for anything two URL
    parsers could read differently (``\\``, ``@``, spaces, controls)."""
    match = _URL.fullmatch(url)
    return match.group(1).lower() if match else None


def too_long(request: PermissionRequest) -> int:
    """The length of an input too long to be shown whole (0 when it can be): a shell
    command, a path or a tool's JSON is never cut in front of the owner."""
    data = request.input
    if request.tool_name == "Bash":
        size = len(_command(request))
        return size if size > SHOWN_CHARS else 0
    path = data.get("file_path") or data.get("notebook_path")
    if isinstance(path, str) and len(path) > PATH_CHARS:
        return len(path)
    if _summary(request) is None:
        size = len(json.dumps(data, ensure_ascii=False, indent=1, default=str))
        return size if size > SHOWN_CHARS else 0
    return 0


def describe(request: PermissionRequest, cli: str, rule: Rule | None) -> str:
    """The owner's message (Markdown): who asks, the tool, its input shown as it will
    run (whole: :func:`too_long` inputs are denied unasked), and what "allow for this
    task" would allow (``rule`` None: no such button)."""
    head = t("perm.asks", cli=cli, tool=_span(_tool_label(request.tool_name)))
    parts = [head, _body(request)]
    note = request.input.get("description")
    if isinstance(note, str) and note.strip():
        parts.append(t("perm.description", text=_span(_cap(note.strip(), 300))))
    if rule is not None:
        parts.append(t("perm.rule", rule=_span(rule.label)))
    return "\n\n".join(parts)


def _body(request: PermissionRequest) -> str:
    if request.tool_name == "Bash":
        shown = _block(_command(request), "sh")
        extra = {k: v for k, v in request.input.items() if k not in ("command", "description")}
        if extra:  # run_in_background, timeout…: how it runs is part of what runs
            shown += "\n" + t("perm.options", options=_span(_cap(_json(extra), 300)))
        return shown
    summary = _summary(request)
    if summary is not None:
        return summary
    return _block(json.dumps(request.input, ensure_ascii=False, indent=1, default=str), "json")


def _summary(request: PermissionRequest) -> str | None:
    """A file tool's input as a diff or a new file's first lines; None for others."""
    tool, data = request.tool_name, request.input
    path = data.get("file_path") or data.get("notebook_path")
    where = t("perm.file", path=_span(path)) + "\n" if isinstance(path, str) else ""
    if tool == "Edit" and _strings(data, "old_string", "new_string"):
        if data.get("replace_all") is True:
            where += t("perm.every_occurrence") + "\n"
        return where + _block(_diff([(data["old_string"], data["new_string"])]), "diff")
    if tool == "MultiEdit" and isinstance(data.get("edits"), list):
        edits = [e for e in data["edits"] if isinstance(e, dict)]
        pairs = [
            (e["old_string"], e["new_string"])
            for e in edits
            if _strings(e, "old_string", "new_string")
        ]
        if len(pairs) != len(data["edits"]):
            return None  # an edit that is not a pair of strings: the JSON, whole
        if any(e.get("replace_all") is True for e in edits):
            where += t("perm.every_occurrence") + "\n"
        return where + _block(_diff(pairs), "diff")
    for key in ("content", "new_source"):  # Write, NotebookEdit
        if tool in ("Write", "NotebookEdit") and isinstance(data.get(key), str):
            lines = ["+" + line for line in data[key].splitlines()]
            return where + _block(_shown_lines(lines), "diff")
    return None


def _diff(pairs: list[tuple[str, str]]) -> str:
    lines: list[str] = []
    for old, new in pairs:
        for line in difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=1):
            if not line.startswith(("---", "+++")):
                lines.append(line)
    return _shown_lines(lines)


def _shown_lines(lines: list[str]) -> str:
    """The first DIFF_LINES lines, each cut at LINE_CHARS, then how many more there are:
    the note is never cut away."""
    shown = [_cap(line, LINE_CHARS) for line in lines[:DIFF_LINES]]
    if len(lines) > DIFF_LINES:
        shown.append(t("perm.more_lines", count=len(lines) - DIFF_LINES))
    return "\n".join(shown)


def _command(request: PermissionRequest) -> str:
    command = request.input.get("command")
    return command if isinstance(command, str) else _json(request.input)


def _simple_words(command: str) -> list[str] | None:
    """The words of a single simple command, or None for anything more."""
    if _COMPOUND.search(command):
        return None
    try:
        return shlex.split(command)
    except ValueError:
        return None


def _strings(data: dict[str, Any], *keys: str) -> bool:
    return all(isinstance(data.get(k), str) for k in keys)


def _tool_label(name: str) -> str:
    return name if _TOOL.fullmatch(name) else _cap(name, 60)


def _json(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False, sort_keys=True, default=str)


def _cap(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + " …"


def _fence(text: str) -> str:
    """Backticks longer than any run inside ``text`` (CommonMark): it cannot close early."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def _block(text: str, lang: str) -> str:
    fence = _fence(text)
    return f"{fence}{lang}\n{text}\n{fence}"


def _span(text: str) -> str:
    text = text.replace("\n", " ")
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"
