"""The opt-in real-client suite (issue 13): real software from the registries, pointed
at the simulators. Skipped unless ``KERNEL_TEST_REAL_CLIENTS=1``; ``real_bin(name)``
finds an installed client (``scripts/install-real-clients`` puts them in
``.real-clients/``) or skips the test saying how to install it."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
REAL_CLIENTS = ROOT / ".real-clients"
SKIP_REASON = (
    "real-client suite: set KERNEL_TEST_REAL_CLIENTS=1 (install the clients with "
    "scripts/install-real-clients)"
)


@pytest.fixture
def real_bin() -> Callable[[str], Path]:
    def find(name: str) -> Path:
        for folder in (REAL_CLIENTS / "node_modules" / ".bin", REAL_CLIENTS / "py" / "bin"):
            candidate = folder / name
            if candidate.exists():
                return candidate
        found = shutil.which(name)
        if found:
            return Path(found)
        pytest.skip(f"{name} is not installed: run scripts/install-real-clients")

    return find
