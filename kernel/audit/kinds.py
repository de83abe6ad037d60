"""The kinds of audit events, declared once. Each has words in the catalogue
(``audit.kind.<kind>``) for ``/audit``, the console and ``kernel audit list``.

``data`` of each kind holds facts only (names, ids, counts, codes, hashes), never the
text of a message, an argument's value or a file's name from outside input."""

from __future__ import annotations

MESSAGE_RECEIVED = "message.received"  # messages=[id], channel, parts (text/photo/file/voice)
TURN_ANSWERED = "turn.answered"  # messages=[id], outcome (answered/failed/cancelled/refused)
MODEL_CALL = "model.call"  # provider, model, purpose, input/output tokens, cost, ledger id
TOOL_CALL = "tool.call"  # tool, call id, ok, error code, ms, result chars, args sha256
DELEGATION_STARTED = "delegation.started"  # delegation id, cli, argv (task as a hash), cwd
DELEGATION_ENDED = "delegation.ended"  # delegation id, exit code, reason, ok, seconds
APPROVAL_ASKED = "approval.asked"  # delegation id, tool
APPROVAL_ANSWERED = "approval.answered"  # delegation id, tool, decision, by, rule, record id
CRON_FIRED = "cron.fired"  # job id, outcome
CRON_SKIPPED = "cron.skipped"  # job id, reason
CRON_MISSED = "cron.missed"  # job id, reason
CRON_INTERRUPTED = "cron.interrupted"  # job id
SELFOPS_PREVIEW = "selfops.preview"  # change id, target, path, sensitive
SELFOPS_APPLY = "selfops.apply"  # change id, target, path, before/after sha256
CONFIG_CHANGED = "config.changed"  # sections and keys changed (no values)
MCP_CHANGED = "mcp.changed"  # action (add/remove/restart), server
OUTBOX_SENT = "outbox.sent"  # outbox row id, kind, chat
OUTBOX_FAILED = "outbox.failed"  # outbox row id, kind, reason (expired, refused)
HISTORY_CUT = "history.cut"  # undo / rewind / retry: after id, messages cut, branch
HISTORY_RESTORED = "history.restored"  # a retry's give-back: branch
ARTIFACT_SAVED = "artifact.saved"  # artifact id, kind, size, sha256
PRUNED = "audit.pruned"  # sessions, rows, why (written by the store)

KINDS = (
    MESSAGE_RECEIVED,
    TURN_ANSWERED,
    MODEL_CALL,
    TOOL_CALL,
    DELEGATION_STARTED,
    DELEGATION_ENDED,
    APPROVAL_ASKED,
    APPROVAL_ANSWERED,
    CRON_FIRED,
    CRON_SKIPPED,
    CRON_MISSED,
    CRON_INTERRUPTED,
    SELFOPS_PREVIEW,
    SELFOPS_APPLY,
    CONFIG_CHANGED,
    MCP_CHANGED,
    OUTBOX_SENT,
    OUTBOX_FAILED,
    HISTORY_CUT,
    HISTORY_RESTORED,
    ARTIFACT_SAVED,
    PRUNED,
)
