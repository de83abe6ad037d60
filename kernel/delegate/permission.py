"""A coding CLI's permission request: how it is shown to the owner, and what "allow for
this task" remembers.

Claude Code (``--permission-prompt-tool``) names the tool it wants and its exact input.
:func:`describe` makes the owner's message: a shell command verbatim in a code block, an
edit as a short diff, a new file's first lines, anything else as JSON; every value from
the CLI sits inside a code span or block fenced longer than any backtick run in it, so
nothing it sends can format the message. :func:`rule_for` is the rule "Allow for this
task" adds, shown in the same message: a simple shell command allows the same program
(and subcommand) again, ``Bash(git status:*)``; a compound one (``;``, ``&&``, a pipe,
a redirection, a substitution), a shell or interpreter, ``rm``, ``curl`` and the like
allow only themselves, exactly; a file tool the same tool on the same path; ``WebFetch``
the same host; anything else the same tool with the same input.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
import shlex
from dataclasses import dataclass
from pathlib import PurePath as Path
from typing import Any
from urllib.parse import urlsplit

from kernel.core.i18n import t

__all__ = ["PermissionRequest", "Rule", "describe", "rule_for"]

SHOWN_CHARS = 2_400  # of the command, diff or JSON in the owner's message
DIFF_LINES = 40
# Any of these makes a shell command more than one program run: only an exact rule.
_COMPOUND = re.compile(r"[;&|`<>\n\r]|\$\(")
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9_+-]*")
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
        program = Path(words[0]).name if words else ""
        if words is None or not words or program in _RUNNERS or program in _EXACT_ONLY:
            return Rule(tool, "exact", command)
        prefix = words[:2] if len(words) > 1 and _WORD.fullmatch(words[1]) else words[:1]
        return Rule(tool, "prefix", " ".join(prefix))
    key = _FILE_TOOLS.get(tool)
    if key is not None and isinstance(data.get(key), str) and data[key]:
        return Rule(tool, "path", data[key])
    if tool == "WebFetch" and isinstance(data.get("url"), str):
        host = urlsplit(data["url"]).hostname
        if host:
            return Rule(tool, "domain", host)
    digest = hashlib.sha256(_json(data).encode()).hexdigest()[:16]
    return Rule(tool, "input", digest)


def describe(request: PermissionRequest, cli: str, rule: Rule) -> str:
    """The owner's message (Markdown): who asks, the tool, its input shown as it will
    run, and what "allow for this task" would allow."""
    head = t("perm.asks", cli=cli, tool=_span(_tool_label(request.tool_name)))
    parts = [head, _body(request)]
    note = request.input.get("description")
    if isinstance(note, str) and note.strip():
        parts.append(t("perm.description", text=_span(_cap(note.strip(), 300))))
    parts.append(t("perm.rule", rule=_span(_cap(rule.label, 300))))
    return "\n\n".join(parts)


def _body(request: PermissionRequest) -> str:
    tool, data = request.tool_name, request.input
    if tool == "Bash":
        return _block(_cap(_command(request), SHOWN_CHARS), "sh")
    path = data.get("file_path") or data.get("notebook_path")
    where = t("perm.file", path=_span(_cap(path, 300))) + "\n" if isinstance(path, str) else ""
    if tool == "Edit" and _strings(data, "old_string", "new_string"):
        return where + _block(_diff([(data["old_string"], data["new_string"])]), "diff")
    if tool == "MultiEdit" and isinstance(data.get("edits"), list):
        pairs = [
            (e["old_string"], e["new_string"])
            for e in data["edits"]
            if isinstance(e, dict) and _strings(e, "old_string", "new_string")
        ]
        return where + _block(_diff(pairs), "diff")
    if tool == "Write" and isinstance(data.get("content"), str):
        lines = data["content"].splitlines()
        shown = "\n".join("+" + line for line in lines[:DIFF_LINES])
        if len(lines) > DIFF_LINES:
            shown += "\n" + t("perm.more_lines", count=len(lines) - DIFF_LINES)
        return where + _block(_cap(shown, SHOWN_CHARS), "diff")
    return _block(_cap(json.dumps(data, ensure_ascii=False, indent=1), SHOWN_CHARS), "json")


def _diff(pairs: list[tuple[str, str]]) -> str:
    lines: list[str] = []
    for old, new in pairs:
        for line in difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=1):
            if not line.startswith(("---", "+++")):
                lines.append(line)
    shown = "\n".join(lines[:DIFF_LINES])
    if len(lines) > DIFF_LINES:
        shown += "\n" + t("perm.more_lines", count=len(lines) - DIFF_LINES)
    return _cap(shown, SHOWN_CHARS)


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
