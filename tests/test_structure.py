"""scripts/structure.py, the structure goals ``scripts/check`` holds the code to, run on
small packages made here: it counts what only ``if TYPE_CHECKING:`` imports make, and
fails on each kind of trouble while a clean package passes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "structure.py"

TYPED = "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    import {0}\n"


def make(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def structure(cwd: Path, package: str) -> tuple[int, list[str]]:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), package],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )
    return done.returncode, done.stdout.splitlines()


def test_a_clean_package_passes_with_every_figure_zero(tmp_path: Path) -> None:
    make(
        tmp_path,
        {
            "clean/__init__.py": "",
            "clean/app.py": "import clean.low.x\n",
            "clean/check.py": TYPED.format("clean.app"),
            "clean/low/__init__.py": "",
            "clean/low/x.py": TYPED.format("clean.core.y"),
            "clean/core/__init__.py": "",
            "clean/core/y.py": "",
            # the catalogue may be long
            "clean/core/i18n.py": "x = 1\n" * 700,
            "clean/fits.py": "x = 1\n" * 600,
        },
    )
    code, out = structure(tmp_path, "clean")
    assert code == 0, out
    assert "  module cycles: 0" in out
    assert "  package cycles: 0" in out
    assert "  modules importing clean.app: 0" in out
    assert "  modules over 600 lines: 0" in out


def test_a_cycle_of_type_checking_imports_fails(tmp_path: Path) -> None:
    make(
        tmp_path,
        {
            "typed/__init__.py": "",
            "typed/a.py": TYPED.format("typed.b"),
            "typed/b.py": TYPED.format("typed.a"),
        },
    )
    code, out = structure(tmp_path, "typed")
    assert code == 1
    assert out[1:3] == ["  module cycles: 1", "    typed.a typed.b"]
    assert "structure: above the goal: module cycles" in out


def test_a_package_cycle_and_an_app_import_for_hints_fail(tmp_path: Path) -> None:
    make(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/app.py": "import pkg.adapter.x\n",
            "pkg/adapter/__init__.py": "",
            "pkg/adapter/x.py": TYPED.format("pkg.app"),
        },
    )
    code, out = structure(tmp_path, "pkg")
    assert code == 1
    assert "  package cycles: 1" in out
    assert "    pkg.adapter pkg.app" in out
    assert out[out.index("  modules importing pkg.app: 1") + 1] == "    pkg.adapter.x"


def test_an_oversized_module_fails(tmp_path: Path) -> None:
    make(tmp_path, {"big/__init__.py": "", "big/long.py": "x = 1\n" * 601})
    code, out = structure(tmp_path, "big")
    assert code == 1
    assert out[-3:] == [
        "  modules over 600 lines: 1",
        "    big/long.py 601",
        "structure: above the goal: modules over 600 lines",
    ]
