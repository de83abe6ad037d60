"""Deployment: deploy/setup.sh (syntax, --help, --dry-run that changes nothing, a staged
install that a second run leaves alone) and deploy/kernel.service (its settings agree
with what setup.sh installs)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kernel.audit.key import CREDENTIAL, read_key
from kernel.config import GeneralConfig, load_config
from kernel.gateway.connections import AUTO_CEILING, default_limits

# deploy/setup.sh and systemd; each setup.sh run is a hang guard of 600 s (minutes on a
# loaded two-core machine), three in one test.
pytestmark = [pytest.mark.posix, pytest.mark.timeout(1900)]

REPO = Path(__file__).resolve().parent.parent
SETUP = REPO / "deploy" / "setup.sh"
UNIT = REPO / "deploy" / "kernel.service"
SYSTEM_PATHS = [
    Path("/opt/kernel"),
    Path("/etc/kernel-assistant"),
    Path("/var/lib/kernel"),
    Path("/etc/systemd/system/kernel.service"),
]


def _setup(*args: str, source: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SETUP), "--source", str(source), *args],
        capture_output=True,
        text=True,
        timeout=600,  # a hang guard: a loaded two-core machine can take minutes
        check=False,
    )


def _machine_state() -> list[object]:
    """What setup.sh would change outside a --root folder."""
    user = subprocess.run(["getent", "passwd", "kernel"], capture_output=True, check=False)
    return [(p, p.exists()) for p in SYSTEM_PATHS] + [user.returncode]


def _unit() -> dict[str, dict[str, list[str]]]:
    """systemd's own reading: sections of keys, a repeated key adding values."""
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] = {}
    for raw in UNIT.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            current = sections.setdefault(line.strip("[]"), {})
            continue
        key, _, value = line.partition("=")
        current.setdefault(key.strip(), []).append(value.strip())
    return sections


def test_setup_script_syntax_and_help() -> None:
    assert subprocess.run(["bash", "-n", str(SETUP)], check=False).returncode == 0
    assert os.access(SETUP, os.X_OK)
    result = _setup("--help")
    assert result.returncode == 0 and "--dry-run" in result.stdout and "--root" in result.stdout
    bad = _setup("--bogus")
    assert bad.returncode == 2 and "unknown option --bogus" in bad.stderr


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck not installed")
def test_setup_script_passes_shellcheck() -> None:
    result = subprocess.run(["shellcheck", str(SETUP)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


@pytest.mark.parametrize("staged", [True, False], ids=["root-prefix", "this-machine"])
def test_dry_run_lists_every_action_and_changes_nothing(tmp_path: Path, staged: bool) -> None:
    root = tmp_path / "root"
    root.mkdir()
    before = _machine_state()
    result = _setup("--dry-run", *(["--root", str(root)] if staged else []))
    prefix = str(root) if staged else ""

    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.startswith("# dry run: nothing below is done")
    assert "ffmpeg" in out  # installed by apt, or reported as present
    assert any(m in out for m in ("uv present", "/usr/local/bin/uv", "astral.sh/uv"))
    assert "useradd --system" in out or "user kernel exists" in out
    if not Path(f"{prefix}/opt/kernel/app").exists():
        assert f"+ install the code from {REPO} into {prefix}/opt/kernel/app" in out
    sync = "sync --frozen --no-dev --compile-bytecode --python /usr/bin/python3 --project"
    assert f"{sync} {prefix}/opt/kernel/app" in out
    if staged:
        etc = f"{root}/etc/kernel-assistant"
        for line in (
            f"+ install -m 600 {REPO}/deploy/kernel.env.example {etc}/kernel.env",
            f"+ chown root:root {etc}/kernel.env",
            f"+ make the audit key {etc}/audit.key (mode 600)",
            f"+ chown root:root {etc}/audit.key",
            f"+ chown kernel:kernel {etc}/config.toml",
            f"+ install -D -m 644 {UNIT} {root}/etc/systemd/system/kernel.service",
            "+ systemctl daemon-reload",
            "+ systemctl enable kernel.service",
        ):
            assert line in out.splitlines(), line
    assert out.rstrip().endswith("run without --dry-run (as root) to do the above")
    assert list(root.iterdir()) == []  # nothing written under the prefix
    assert _machine_state() == before  # nor on the machine


def _source_copy(tmp_path: Path) -> Path:
    source = tmp_path / "checkout"
    ignore = shutil.ignore_patterns(
        ".venv", ".git", "data", "__pycache__", "*_cache", "tests", ".real-clients"
    )
    shutil.copytree(REPO, source, ignore=ignore)
    return source


def test_staged_install_is_idempotent_and_keeps_the_owners_files(tmp_path: Path) -> None:
    source = _source_copy(tmp_path)
    (source / ".real-clients" / "node_modules").mkdir(parents=True)  # the opt-in suite's
    root = tmp_path / "root"
    first = _setup("--root", str(root), source=source)
    assert first.returncode == 0, first.stderr
    config_dir = root / "etc" / "kernel-assistant"
    for file in (
        config_dir / "config.toml",
        config_dir / "kernel.env",
        config_dir / "audit.key",
        root / "var/lib/kernel/SOUL.md",
    ):
        assert file.stat().st_mode & 0o777 == 0o600, file
    # The audit key: made once, a key Kernel reads (the credential the unit loads).
    made = read_key(config_dir / "audit.key")
    assert made is not None and made.start is None and len(made.key) == 32
    key_bytes = (config_dir / "audit.key").read_bytes()
    for folder in ("skills", "prompts"):  # the service's own, writable in the unit
        assert (config_dir / folder).is_dir(), folder
    assert (root / "etc/systemd/system/kernel.service").read_text() == UNIT.read_text()
    app = root / "opt" / "kernel" / "app"
    assert (app / "kernel" / "__main__.py").is_file() and (app / "uv.lock").is_file()
    assert not (app / ".venv").exists() and not (app / "tests").exists()
    assert not (app / ".real-clients").exists()
    assert (root / "var/lib/kernel/data").is_dir()

    # The installed config is valid and puts every write under the state directory.
    config = load_config(
        config_dir / "config.toml",
        env={"KERNEL_TELEGRAM_TOKEN": "1:x", "KERNEL_TELEGRAM_ALLOWED_USER": "1",
             "KERNEL_PROVIDER_ANTHROPIC_API_KEY": "k"},
    )  # fmt: skip
    assert config.data_dir == Path("/var/lib/kernel/data")
    assert config.general.default_workspace == Path("/var/lib/kernel/workspace")
    assert config.general.soul == Path("/var/lib/kernel/SOUL.md")  # SelfOps may rewrite it
    writable = [w.lstrip("-") for w in " ".join(_unit()["Service"]["ReadWritePaths"]).split()]
    for folder in ("skills", "prompts", "personas"):  # /skills, SelfOps, personas write these
        assert f"/etc/kernel-assistant/{folder}" in writable

    # A second run changes nothing, and the owner's edits survive any run.
    (config_dir / "config.toml").write_text("# mine\n")
    (config_dir / "kernel.env").write_text("KERNEL_TELEGRAM_TOKEN=mine\n")
    second = _setup("--root", str(root), source=source)
    assert second.returncode == 0, second.stderr
    assert not [line for line in second.stdout.splitlines() if line.startswith("+")]
    assert second.stdout.rstrip().endswith("# nothing to change")
    assert (config_dir / "config.toml").read_text() == "# mine\n"
    assert (config_dir / "kernel.env").read_text() == "KERNEL_TELEGRAM_TOKEN=mine\n"
    assert (config_dir / "audit.key").read_bytes() == key_bytes  # never replaced

    # New code is installed (and stale files go); the unit is replaced when it changed.
    (source / "kernel" / "added.py").write_text("X = 1\n")
    (app / "kernel" / "stale.py").write_text("")
    third = _setup("--root", str(root), source=source)
    assert f"+ install the code from {source} into {app}" in third.stdout
    assert (app / "kernel" / "added.py").is_file() and not (app / "kernel" / "stale.py").exists()
    assert "kernel.service up to date" in third.stdout


def test_setup_refuses_a_folder_that_is_not_a_checkout(tmp_path: Path) -> None:
    result = _setup("--dry-run", source=tmp_path)
    assert result.returncode == 2 and "is not a Kernel checkout" in result.stderr


def test_unit_file_settings() -> None:
    unit = _unit()
    service = unit["Service"]

    def one(key: str) -> str:
        assert len(service[key]) == 1, key
        return service[key][0]

    assert one("User") == "kernel" and one("Group") == "kernel"
    assert one("ExecStart") == (
        "/usr/local/bin/uv run --frozen --no-sync --project /opt/kernel/app -m kernel"
    )
    assert one("Restart") == "on-failure" and float(one("RestartSec")) > 0
    assert one("RestartPreventExitStatus") == "2"  # a config refusal is not retried
    assert one("KillSignal") == "SIGTERM" and one("KillMode") == "mixed"
    # Longer than Kernel's own shutdown bound (turns, then replies being shown).
    assert float(one("TimeoutStopSec")) > 2 * GeneralConfig().shutdown_timeout + 5
    assert one("NoNewPrivileges") == "yes" and one("ProtectSystem") == "strict"
    assert one("PrivateTmp") == "yes" and one("ProtectHome") == "yes"
    assert one("EnvironmentFile") == "/etc/kernel-assistant/kernel.env"
    # The audit key, root-only outside the data directory, read-only to the service.
    assert one("LoadCredential") == f"{CREDENTIAL}:/etc/kernel-assistant/audit.key"
    env = dict(e.split("=", 1) for e in service["Environment"])
    assert env["KERNEL_CONFIG"] == "/etc/kernel-assistant/config.toml"
    assert env["UV_PROJECT_ENVIRONMENT"] == "/opt/kernel/venv"  # the one setup.sh built
    assert env["UV_CACHE_DIR"].startswith("/var/lib/kernel/")  # writable, not under /home
    writable = " ".join(service["ReadWritePaths"]).split()
    # Data, workspace and the CLIs' HOME are all writable under ProtectSystem=strict.
    for path in ("/var/lib/kernel/data", "/var/lib/kernel/workspace", env["HOME"]):
        assert any(path == w or path.startswith(w + "/") for w in writable), path
    assert one("WorkingDirectory") in writable
    assert not env["HOME"].startswith(("/home", "/root"))  # hidden by ProtectHome
    assert "MemoryDenyWriteExecute" not in service  # would break Node-based CLIs
    # Enough descriptors that the sidecar's connection cap (derived from it) is the
    # ceiling of 1024, with the reserve for everything else left over.
    total, _ = default_limits(0, 0, nofile=int(one("LimitNOFILE")))
    assert total == AUTO_CEILING
    assert unit["Install"]["WantedBy"] == ["multi-user.target"]


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze")
def test_unit_file_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    # uv is installed to /usr/local/bin only by setup: point ExecStart at a real one.
    copy = tmp_path / "kernel.service"
    uv = shutil.which("uv") or sys.executable
    copy.write_text(UNIT.read_text().replace("/usr/local/bin/uv", str(Path(uv).resolve())))
    result = subprocess.run(
        ["systemd-analyze", "verify", str(copy)],
        capture_output=True,
        text=True,
        timeout=600,  # a hang guard: a loaded two-core machine can take minutes
        check=False,
    )
    complaints = [line for line in result.stderr.splitlines() if "kernel.service" in line]
    assert result.returncode == 0 and complaints == [], result.stderr
