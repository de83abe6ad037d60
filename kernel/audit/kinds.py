"""The kinds of audit events, declared once. Each has words in the catalogue
(``audit.kind.<kind>``) for ``/audit``, the console and ``kernel audit list``.

``data`` of each kind holds facts only (names, ids, counts, codes, hashes), never the
text of a message, an argument's value or a file's name from outside input."""

from __future__ import annotations

# messages=[id], channel, parts (text/photo/file/voice), turn, retry (a /retry's run)
MESSAGE_RECEIVED = "message.received"
# messages=[id] (the stored final answer), outcome (answered, cancelled, failed, refused:
# the provider refused the input, budget, rejected: a skill/persona/prompt refused before
# anything was sent, tool_limit), code (the error's), steps, turn
TURN_ANSWERED = "turn.answered"
# provider, model, purpose, outcome (ok, cancelled or the error's code), tokens {input,
# output, cache_read, cache_write} (absent when unknown), cost or bound, retries, ledger
# (the usage row's id; absent when the call failed before the provider answered), turn
MODEL_CALL = "model.call"
# tool (resolved name), call (id), step, ok, error (code or type), ms, result_chars,
# args_sha256 (of the canonical JSON of the arguments)
TOOL_CALL = "tool.call"
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
# row (outbox id), action (send/edit/delete), chat, outcome, attempts, message (Telegram's
# id), resent (marked re-send), notice (Kernel's own notice); global chain only
OUTBOX_SENT = "outbox.sent"
OUTBOX_FAILED = "outbox.failed"  # as outbox.sent; outcome: expired, refused, forbidden
# command (undo/rewind/retry), after (message id), cut (messages), branch
HISTORY_CUT = "history.cut"
# a retry given back: command, branch (shown again), restored, cut / cut_branch (what
# the retry wrote, cut in its place)
HISTORY_RESTORED = "history.restored"
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
