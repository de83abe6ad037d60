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
# delegation (the run's stamp), cli, version, argv (the executable's file name, flags as
# written, task/instructions as <task sha256:… chars:N>, secrets <secret>, paths relative
# or hashed), cwd (project:<name>[/sub], workspace-relative, or hashed)
DELEGATION_STARTED = "delegation.started"
# delegation, cli, ok, reason (completed, exit, cancelled, start_failed, timeout…),
# exit_code, outcome, seconds, output (data/cli_outputs/… when the file exists)
DELEGATION_ENDED = "delegation.ended"
APPROVAL_ASKED = "approval.asked"  # delegation, cli, tool, args_sha256
# delegation, tool, decision, by (owner, task_rule, timeout, cancelled, undelivered…),
# rule_used / rule_added (booleans, never the rule), record (delegation_approvals id)
APPROVAL_ANSWERED = "approval.answered"
# job, outcome, reason (a code); cron.fired in the run's session, the others global;
# cron.missed also due, late_seconds, grace_seconds
CRON_FIRED = "cron.fired"
CRON_SKIPPED = "cron.skipped"  # reason: running, budget, unplannable
CRON_MISSED = "cron.missed"  # reason: late
CRON_INTERRUPTED = "cron.interrupted"  # reason: crash, stop
# change, target, paths (workspace-relative) or settings names, sensitive (and names),
# hashes (before/after sha256 per target), outcome (previewed, applied or the refusal's code)
SELFOPS_PREVIEW = "selfops.preview"
SELFOPS_APPLY = "selfops.apply"
CONFIG_CHANGED = "config.changed"  # sections, keys (dotted names, never values)
MCP_CHANGED = "mcp.changed"  # action (add/remove/restart), server, transport, outcome, state
# row (outbox id), action (send/edit/delete), chat, outcome, attempts, message (Telegram's
# id), resent (marked re-send), notice (Kernel's own notice); global chain only
OUTBOX_SENT = "outbox.sent"
OUTBOX_FAILED = "outbox.failed"  # as outbox.sent; outcome: expired, refused, forbidden
# command (undo/rewind/retry), after (message id), cut (messages), branch
HISTORY_CUT = "history.cut"
# a retry given back: command, branch (shown again), restored, cut / cut_branch (what
# the retry wrote, cut in its place)
HISTORY_RESTORED = "history.restored"
# a branch made the live history (issue 38): branch, fork (message id), restored
# (messages), left (the branches the history left went to), cut (messages in them)
HISTORY_SWITCHED = "history.switched"
# a session's mode switched (issue 38): mode, before, how (command: the owner's /mode;
# tool: the model's enter_plan_mode; confirm: the owner approved exit_plan_mode)
MODE_CHANGED = "mode.changed"
# a memory changed (issue 39): action (edited, forgotten, moved, superseded, restated),
# memory (id), scope (now), before (the scope it left), absorbed (its copies in other
# scopes, moved to global), chars (of the text now); never the text
MEMORY_CHANGED = "memory.changed"
ARTIFACT_SAVED = "artifact.saved"  # artifact (id), kind, size, sha256 (never the name)
PRUNED = "audit.pruned"  # sessions, rows, why (written by the store)
KEYED = "audit.keyed"  # from: the first row sealed with the audit key (kernel/audit/key.py)
# the daily backup (issue 40, kernel/backup/schedule.py): label; made: size (bytes), kept
# and deleted (the rotation's archives); failed: reason (the error's code); global chain
BACKUP_MADE = "backup.made"
BACKUP_FAILED = "backup.failed"

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
    HISTORY_SWITCHED,
    MODE_CHANGED,
    MEMORY_CHANGED,
    ARTIFACT_SAVED,
    PRUNED,
    KEYED,
    BACKUP_MADE,
    BACKUP_FAILED,
)
