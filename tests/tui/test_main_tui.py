"""The ``kernel tui`` verb: without Textual it says the fix; ``--url`` that nothing answers
is an error, not a silent in-process fallback; Kernel itself never imports Textual."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kernel.__main__ import main
from tests.conftest import free_port


def test_without_textual_the_fix_is_said_and_the_exit_code_is_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "textual", None)  # what a missing package looks like
    monkeypatch.setenv("KERNEL_LANGUAGE", "en")
    assert main(["tui"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kernel: kernel tui needs Textual") and "uv sync --extra tui" in err


def test_an_address_nothing_answers_is_an_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("textual", reason="the check for Textual comes first")
    monkeypatch.setenv("KERNEL_LANGUAGE", "en")
    url = f"http://127.0.0.1:{free_port()}"
    assert main(["tui", "--url", url]) == 3
    err = capsys.readouterr().err
    assert f"no Kernel answers at {url}" in err


def test_local_and_url_exclude_each_other(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["tui", "--local", "--url", "http://127.0.0.1:1"])
    assert stopped.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


def test_kernel_and_its_command_line_do_not_import_textual() -> None:
    script = "import sys, kernel.app, kernel.__main__, kernel.tui; print('textual' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.strip() == "False"
