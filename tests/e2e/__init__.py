"""End-to-end fault tests: the real ``python -m kernel`` process against the Telegram and
model simulators, killed, cut off and flooded (``harness.Rig``, ``harness.Ledger``)."""
