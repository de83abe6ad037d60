"""The opt-in real-client suite (issue 13 point 7): software installed from the registries
by ``scripts/install-real-clients`` into ``.real-clients/``, run against the simulators.

Minimal version (the API of the shared contract): each module skips itself unless
``KERNEL_TEST_REAL_CLIENTS=1``; ``real_bin(name)`` finds an installed executable.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
INSTALLED = (
    ROOT / ".real-clients" / "node_modules" / ".bin",
    ROOT / ".real-clients" / "py" / "bin",
)
SKIP_REASON = (
    "opt-in real-client suite: set KERNEL_TEST_REAL_CLIENTS=1 after running "
    "scripts/install-real-clients"
)


def real_clients_enabled() -> bool:
    return bool(os.environ.get("KERNEL_TEST_REAL_CLIENTS"))


@pytest.fixture
def real_bin() -> Callable[[str], Path]:
    def find(name: str) -> Path:
        for folder in INSTALLED:
            if (folder / name).exists():
                return folder / name
        found = shutil.which(name)
        if found:
            return Path(found)
        pytest.skip(f"{name} is not installed: run scripts/install-real-clients")

    return find
