#!/usr/bin/env bash
# Install or update Kernel as a systemd service on Debian 12. Idempotent: a second run
# changes nothing. Run as root from a checkout:   sudo deploy/setup.sh
# See `deploy/setup.sh --help` and README.md, "Deploy on Debian 12".
set -euo pipefail
umask 022

readonly SERVICE_USER=kernel
readonly UNIT_NAME=kernel.service
readonly APT_PACKAGES=(python3 ffmpeg ca-certificates curl)

usage() {
    cat <<'EOF'
Usage: deploy/setup.sh [--dry-run] [--root DIR] [--source DIR] [--help]

Installs Kernel on Debian 12 as the systemd service "kernel":
  1. apt packages: python3 ffmpeg ca-certificates curl (only those missing)
  2. uv (official installer, to /usr/local/bin) unless uv is already on PATH
  3. the system user "kernel" (home /var/lib/kernel, no login shell)
  4. the code into /opt/kernel/app (replaced only when it differs)
  5. its environment: uv sync --frozen into /opt/kernel/venv on /usr/bin/python3
  6. /etc/kernel-assistant/config.toml (kernel, mode 600), its skills/, prompts/ and
     personas/ folders (the service's own), kernel.env, and /var/lib/kernel/SOUL.md
     (root, mode 600) from templates, only when missing: your settings and secrets are never overwritten;
     and the audit key /etc/kernel-assistant/audit.key (root, mode 600), made once
  7. /etc/systemd/system/kernel.service, then enables it (it is not started for you)

Options:
  --dry-run     print every action without doing any (no root needed)
  --root DIR    install the files under DIR instead of / (staging, packaging, tests);
                system steps (apt, uv, user, ownership, uv sync, systemctl) are skipped
  --source DIR  the Kernel checkout to install (default: the folder above this script)
  --help        this text

Environment: UV_VERSION pins the uv release the installer fetches (default: latest).
After the first run: put your secrets in /etc/kernel-assistant/kernel.env, then
  systemctl start kernel && journalctl -u kernel -f
EOF
}

DRY_RUN=0
ROOT=""
SOURCE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
while (($#)); do
    case "$1" in
        --dry-run) DRY_RUN=1 ;;
        --root)
            [[ $# -ge 2 ]] || { echo "setup.sh: --root needs a folder" >&2; exit 2; }
            ROOT="$(realpath -m "$2")"
            shift
            ;;
        --source)
            [[ $# -ge 2 ]] || { echo "setup.sh: --source needs a folder" >&2; exit 2; }
            SOURCE="$(realpath -m "$2")"
            shift
            ;;
        -h | --help) usage; exit 0 ;;
        *) echo "setup.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done

readonly INSTALL_DIR="$ROOT/opt/kernel"
readonly APP_DIR="$INSTALL_DIR/app"
readonly VENV_DIR="$INSTALL_DIR/venv"
readonly CONFIG_DIR="$ROOT/etc/kernel-assistant" # /etc/kernel holds Debian's kernel-install hooks
readonly STATE_DIR="$ROOT/var/lib/kernel"
readonly UNIT_PATH="$ROOT/etc/systemd/system/$UNIT_NAME"
CHANGED=0

say() { printf '%s\n' "$*"; }
# Every change goes through act: printed always, run unless --dry-run.
act() {
    say "+ $*"
    CHANGED=1
    if ((DRY_RUN == 0)); then "$@"; fi
}
kept() { say "= $*"; }
# System steps touch the machine outside --root: skipped when staging into a folder.
system_step() { [[ -z "$ROOT" || $DRY_RUN -eq 1 ]]; }

if [[ ! -f "$SOURCE/pyproject.toml" || ! -f "$SOURCE/uv.lock" || ! -d "$SOURCE/kernel" ]]; then
    echo "setup.sh: $SOURCE is not a Kernel checkout (pyproject.toml, uv.lock, kernel/); use --source" >&2
    exit 2
fi
if ((DRY_RUN == 0)) && [[ -z "$ROOT" && $EUID -ne 0 ]]; then
    echo "setup.sh: run as root (sudo deploy/setup.sh), or try --dry-run first" >&2
    exit 2
fi
((DRY_RUN)) && say "# dry run: nothing below is done"

install_packages() {
    local missing=() pkg
    for pkg in "${APT_PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" ||
            missing+=("$pkg")
    done
    if ((${#missing[@]} == 0)); then
        kept "apt packages installed: ${APT_PACKAGES[*]}"
        return
    fi
    act apt-get update
    act env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
}

install_uv() {
    # The unit runs /usr/local/bin/uv: a uv found elsewhere (e.g. under root's home,
    # which ProtectHome hides from the service) is copied there; it is one static binary.
    if [[ -x /usr/local/bin/uv ]]; then
        kept "uv present: /usr/local/bin/uv"
        return
    fi
    if command -v uv >/dev/null 2>&1; then
        act install -m 755 "$(command -v uv)" /usr/local/bin/uv
        return
    fi
    local url="https://astral.sh/uv/install.sh"
    [[ -n "${UV_VERSION:-}" ]] && url="https://astral.sh/uv/$UV_VERSION/install.sh"
    act sh -c "curl -LsSf '$url' | env UV_INSTALL_DIR=/usr/local/bin UV_NO_MODIFY_PATH=1 sh"
}

create_user() {
    if getent passwd "$SERVICE_USER" >/dev/null; then
        kept "user $SERVICE_USER exists"
        return
    fi
    act useradd --system --user-group --home-dir /var/lib/kernel --no-create-home \
        --shell /usr/sbin/nologin --comment "Kernel assistant" "$SERVICE_USER"
}

# make_dir PATH MODE [OWNER]: created when missing; an existing folder is left as it is.
make_dir() {
    local path="$1" mode="$2" owner="${3:-}"
    if [[ -d "$path" ]]; then
        kept "$path exists"
        return
    fi
    act install -d -m "$mode" "$path"
    if [[ -n "$owner" ]] && system_step; then act chown "$owner" "$path"; fi
}

# stage_app DIR: the code as it would be installed (no checkout clutter, owned by root).
stage_app() {
    mkdir -p "$1"
    tar -C "$SOURCE" \
        --exclude=./.git --exclude=./.venv --exclude=./data --exclude=./config.toml \
        --exclude=./.real-clients \
        --exclude=./tests --exclude=./bench --exclude=__pycache__ --exclude='*.pyc' \
        --exclude=.pytest_cache --exclude=.mypy_cache --exclude=.ruff_cache --exclude=.hypothesis \
        --exclude='*.log' \
        -cf - . | tar -C "$1" --no-same-owner -xf -
}

# The code is replaced only when the staged copy differs from what is installed.
sync_app() {
    local staged
    if ((DRY_RUN)); then
        staged="$(mktemp -d)"
        # shellcheck disable=SC2064 # expand now: the path is fixed
        trap "rm -rf '$staged'" EXIT
    else
        staged="$INSTALL_DIR/app.new" # same filesystem, so the swap is two renames
        rm -rf "$staged"
    fi
    stage_app "$staged"
    if [[ -d "$APP_DIR" ]] && diff -r --no-dereference -q "$APP_DIR" "$staged" >/dev/null; then
        rm -rf "$staged"
        kept "$APP_DIR up to date"
        return
    fi
    say "+ install the code from $SOURCE into $APP_DIR"
    CHANGED=1
    if ((DRY_RUN)); then
        rm -rf "$staged"
        return
    fi
    rm -rf "$INSTALL_DIR/app.old"
    if [[ -d "$APP_DIR" ]]; then mv "$APP_DIR" "$INSTALL_DIR/app.old"; fi
    mv "$staged" "$APP_DIR"
    rm -rf "$INSTALL_DIR/app.old"
}

sync_venv() {
    # /usr/bin/python3 (3.11 on Debian 12), never a uv-managed Python under root's home,
    # which the service could not reach through ProtectHome.
    local uv_bin
    uv_bin=/usr/local/bin/uv
    act env UV_PROJECT_ENVIRONMENT="$VENV_DIR" UV_PYTHON_DOWNLOADS=never \
        "$uv_bin" sync --frozen --no-dev --compile-bytecode \
        --python /usr/bin/python3 --project "$APP_DIR"
}

# install_template SOURCE DEST MODE OWNER [SED-SCRIPT]: only when DEST is missing.
install_template() {
    local src="$1" dest="$2" mode="$3" owner="$4" edit="${5:-}"
    if [[ -e "$dest" ]]; then
        kept "$dest exists (kept as it is)"
        return
    fi
    if [[ -n "$edit" ]]; then
        say "+ install -m $mode $src $dest  (with: $edit)"
        CHANGED=1
        if ((DRY_RUN == 0)); then
            local tmp
            tmp="$(mktemp "$dest.XXXXXX")"
            sed -e "$edit" "$src" >"$tmp"
            chmod "$mode" "$tmp"
            mv "$tmp" "$dest"
        fi
    else
        act install -m "$mode" "$src" "$dest"
    fi
    if system_step; then act chown "$owner" "$dest"; fi
}

# The audit key (README, "What did it do?"): made once, root-only, outside the data
# directory; the unit hands it to the service read-only as the credential
# kernel-audit-key (LoadCredential), so the service can use it but not change it.
# Never replaced: a new key would leave the record sealed so far unprovable.
install_audit_key() {
    local dest="$CONFIG_DIR/audit.key"
    if [[ -e "$dest" ]]; then
        kept "$dest exists (kept as it is)"
        return
    fi
    say "+ make the audit key $dest (mode 600)"
    CHANGED=1
    if ((DRY_RUN == 0)); then
        local tmp
        tmp="$(mktemp "$dest.XXXXXX")" # mode 600
        printf '{"v":1,"key":"%s"}\n' "$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')" >"$tmp"
        ln "$tmp" "$dest" # whole and exclusive: fails if one appeared meanwhile
        rm -f "$tmp"
    fi
    if system_step; then act chown root:root "$dest"; fi
}

install_unit() {
    local src="$SOURCE/deploy/kernel.service"
    if [[ -f "$UNIT_PATH" ]] && cmp -s "$src" "$UNIT_PATH"; then
        kept "$UNIT_PATH up to date"
    else
        act install -D -m 644 "$src" "$UNIT_PATH"
        if system_step; then act systemctl daemon-reload; fi
    fi
    if ! system_step; then return; fi
    if systemctl is-enabled --quiet "$UNIT_NAME" 2>/dev/null; then
        kept "$UNIT_NAME enabled"
    else
        act systemctl enable "$UNIT_NAME"
    fi
}

say "# Kernel setup: source $SOURCE${ROOT:+, root $ROOT}"
if system_step; then
    install_packages
    install_uv
    create_user
else
    say "- skipped with --root: apt packages, uv, user $SERVICE_USER"
fi
make_dir "$INSTALL_DIR" 755
sync_app
if system_step; then
    sync_venv
else
    say "- skipped with --root: uv sync into $VENV_DIR"
fi
make_dir "$CONFIG_DIR" 755
make_dir "$STATE_DIR" 750 "$SERVICE_USER:$SERVICE_USER"
make_dir "$STATE_DIR/data" 700 "$SERVICE_USER:$SERVICE_USER"
make_dir "$STATE_DIR/workspace" 700 "$SERVICE_USER:$SERVICE_USER"
# Skills, prompts and personas live beside config.toml; the service writes them (/skills,
# SelfOps, /agent/personas, the preset personas at start), so these folders are its own
# and writable in the unit (ReadWritePaths).
make_dir "$CONFIG_DIR/skills" 750 "$SERVICE_USER:$SERVICE_USER"
make_dir "$CONFIG_DIR/prompts" 750 "$SERVICE_USER:$SERVICE_USER"
make_dir "$CONFIG_DIR/personas" 750 "$SERVICE_USER:$SERVICE_USER"
# Relative paths in config.toml resolve from its folder: data, workspace and the persona
# (which SelfOps may rewrite) move to the state directory, where the service may write.
install_template "$SOURCE/config.example.toml" "$CONFIG_DIR/config.toml" 600 \
    "$SERVICE_USER:$SERVICE_USER" \
    's|^data_dir = "data"|data_dir = "/var/lib/kernel/data"|; s|^default_workspace = "\."|default_workspace = "/var/lib/kernel/workspace"|; s|^soul = "SOUL.md"|soul = "/var/lib/kernel/SOUL.md"|'
install_template "$SOURCE/SOUL.md" "$STATE_DIR/SOUL.md" 600 "$SERVICE_USER:$SERVICE_USER"
install_template "$SOURCE/deploy/kernel.env.example" "$CONFIG_DIR/kernel.env" 600 root:root
install_audit_key
install_unit

if ((CHANGED == 0)); then
    say "# nothing to change"
elif ((DRY_RUN)); then
    say "# dry run finished: run without --dry-run (as root) to do the above"
else
    say "# done. Secrets: $CONFIG_DIR/kernel.env; settings: $CONFIG_DIR/config.toml"
    say "# start or restart: systemctl restart $UNIT_NAME; logs: journalctl -u $UNIT_NAME -f"
fi
