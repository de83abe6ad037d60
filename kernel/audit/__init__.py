"""The audit trail (issue 23, seed 001's trajectory): what Kernel did, in order, provable.

Public API: :class:`AuditLog` (``record`` an event, ``events``, ``verify``),
:class:`Verdict`, :func:`verify_chain`, the event kinds in :mod:`kernel.audit.kinds`, and
their plain words in :mod:`kernel.audit.words` (``describe``, ``verdict_words``).
The tables and the hashing are kernel/store/audit.py's.
"""

from kernel.audit.log import AuditLog
from kernel.audit.verify import Verdict, verify_chain

__all__ = ["AuditLog", "Verdict", "verify_chain"]
