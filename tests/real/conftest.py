"""Shared by the real-client suite: ``real_bin`` finds an installed client, and the
session prints every version found, so a release that breaks Kernel shows which one.

The clients come from ``scripts/install-real-clients``, which installs the npm packages
into ``.real-clients/node_modules`` and the PyPI ones into the venv ``.real-clients/py``
(both at the repository root, git-ignored).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterator
from importlib import metadata
from pathlib import Path

import pytest

from tests.real import ENV

REPO = Path(__file__).resolve().parents[2]
REAL_CLIENTS = REPO / ".real-clients"
BIN_FOLDERS = (REAL_CLIENTS / "node_modules" / ".bin", REAL_CLIENTS / "py" / "bin")

# The variable's former name (tests/delegate/test_real_claude_code.py) still works. Set
# here, at collection, because the skip marks are evaluated then.
if os.environ.get("KERNEL_TEST_REAL_CLI") == "1":
    os.environ.setdefault(ENV, "1")


def installed_versions() -> list[str]:
    """One line per client the installer put in .real-clients/, with its version."""
    lines: list[str] = []
    manifest = REAL_CLIENTS / "package.json"
    if manifest.is_file():
        wanted = json.loads(manifest.read_text(encoding="utf-8")).get("dependencies", {})
        for name in sorted(wanted):
            package = REAL_CLIENTS / "node_modules" / name / "package.json"
            if package.is_file():
                version = json.loads(package.read_text(encoding="utf-8")).get("version", "?")
            else:
                version = "missing"
            lines.append(f"npm  {name} {version}")
    site = sorted((REAL_CLIENTS / "py" / "lib").glob("python*/site-packages"))
    listed = REAL_CLIENTS / "py-packages.txt"
    if site and listed.is_file():
        found = {
            (d.metadata["Name"] or "").lower(): d.version
            for d in metadata.distributions(path=[str(site[-1])])
        }
        for name in listed.read_text(encoding="utf-8").split():
            lines.append(f"pypi {name} {found.get(name.lower(), 'missing')}")
    return lines


def _summary() -> str:
    versions = installed_versions()
    if not versions:
        return "real clients: none in .real-clients/ (run scripts/install-real-clients)"
    return "real clients in .real-clients/:\n  " + "\n  ".join(versions)


def pytest_report_header(config: pytest.Config) -> str | None:
    """Shown when pytest is started on tests/real (this conftest is then an initial one)."""
    if not os.environ.get(ENV):
        return None
    config.stash[_PRINTED] = True
    return _summary()


_PRINTED = pytest.StashKey[bool]()


@pytest.fixture(scope="session", autouse=True)
def _print_versions(request: pytest.FixtureRequest) -> Iterator[None]:
    """The same list when the suite runs from a wider start (``uv run pytest``), where
    the header hook of this folder is not called: printed before the first real test."""
    if not request.config.stash.get(_PRINTED, False):
        request.config.stash[_PRINTED] = True
        plugins = request.config.pluginmanager
        reporter = plugins.get_plugin("terminalreporter")
        capture = plugins.get_plugin("capturemanager")
        if reporter is not None and capture is not None:
            with capture.global_and_fixture_disabled():
                reporter.write_line("")
                for line in _summary().splitlines():
                    reporter.write_line(line)
    yield


@pytest.fixture(scope="session")
def real_bin() -> Callable[[str], Path]:
    """``real_bin(name)``: the executable ``name`` from .real-clients/ (npm, then the
    PyPI venv), else from PATH; the test is skipped when it is nowhere."""

    def find(name: str) -> Path:
        for folder in BIN_FOLDERS:
            candidate = folder / name
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return candidate
        found = shutil.which(name)
        if found:
            return Path(found)
        pytest.skip(f"{name} is not installed: run scripts/install-real-clients")

    return find
