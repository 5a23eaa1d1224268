#!/usr/bin/env bash
# Installs clibot from this checkout: tmux and bubblewrap when missing, one locked build of the
# three binaries, their completions and manual pages, and a running daemon.
#
#   ./install.sh [--prefix DIR] [--no-start] [--no-systemd] [--profile NAME]
#
#   --prefix DIR    where bin/ and share/ go (default: ~/.local)
#   --no-start      install only; do not start the daemon
#   --no-systemd    no systemd units: the daemon runs in the background, started by clibotctl
#   --profile NAME  the cargo profile to build (default: release; the tests use dev)
#
# Safe to run again: it rebuilds what changed, replaces the installed files and restarts a
# daemon it started (its sessions keep running). Needs a Rust toolchain (https://rustup.rs).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")"

prefix="$HOME/.local"
start=1
systemd=1
profile=release
while [ $# -gt 0 ]; do
    case "$1" in
        --prefix) prefix="${2:?--prefix needs a directory}"; shift 2 ;;
        --prefix=*) prefix="${1#--prefix=}"; shift ;;
        --no-start) start=0; shift ;;
        --no-systemd) systemd=0; shift ;;
        --profile) profile="${2:?--profile needs a name}"; shift 2 ;;
        -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "install.sh: unknown argument $1 (try --help)" >&2; exit 2 ;;
    esac
done
mkdir -p "$prefix"
prefix="$(cd "$prefix" && pwd)"

say() { echo "install.sh: $*"; }
die() { echo "install.sh: $*" >&2; exit 1; }

# rustup installs into ~/.cargo/bin, which a non-login shell may not have on PATH.
if ! command -v cargo >/dev/null 2>&1 && [ -x "${CARGO_HOME:-$HOME/.cargo}/bin/cargo" ]; then
    export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
fi
command -v cargo >/dev/null 2>&1 || die "cargo not found: install a Rust toolchain (https://rustup.rs), then run ./install.sh again"

# tmux 3.2 or newer runs the sessions; bubblewrap jails what chat users who are not admins run.
tmux_ok() {
    command -v tmux >/dev/null 2>&1 || return 1
    local v major minor
    v=$(tmux -V 2>/dev/null | grep -oE '[0-9]+\.[0-9]+' | head -n 1) || return 1
    [ -n "$v" ] || return 1
    major=${v%%.*}
    minor=${v#*.}
    [ "$major" -gt 3 ] || { [ "$major" -eq 3 ] && [ "$minor" -ge 2 ]; }
}
missing=()
tmux_ok || missing+=(tmux)
if [ "$(uname -s)" = Linux ] && ! command -v bwrap >/dev/null 2>&1; then
    missing+=(bubblewrap)
fi
if [ "${#missing[@]}" -gt 0 ]; then
    sudo=()
    if [ "$(id -u)" -ne 0 ] && ! command -v brew >/dev/null 2>&1; then
        command -v sudo >/dev/null 2>&1 || die "${missing[*]} missing and no sudo: install ${missing[*]} as root, then run ./install.sh again"
        sudo=(sudo)
    fi
    if command -v apt-get >/dev/null 2>&1; then
        cmd=(apt-get install -y "${missing[@]}")
    elif command -v dnf >/dev/null 2>&1; then
        cmd=(dnf install -y "${missing[@]}")
    elif command -v pacman >/dev/null 2>&1; then
        cmd=(pacman -S --noconfirm "${missing[@]}")
    elif command -v brew >/dev/null 2>&1; then
        cmd=(brew install "${missing[@]/bubblewrap/}")
        sudo=()
    else
        die "${missing[*]} missing and no known package manager (apt-get, dnf, pacman, brew): install ${missing[*]}, then run ./install.sh again"
    fi
    say "installing ${missing[*]}: ${sudo[*]:+${sudo[*]} }${cmd[*]}"
    if [ "${cmd[0]}" = apt-get ]; then
        "${sudo[@]}" apt-get update -qq || true
    fi
    "${sudo[@]}" "${cmd[@]}"
    tmux_ok || die "tmux 3.2 or newer is still missing after the install: install it by hand"
fi

# One build for the three binaries: the dependencies are compiled once, at the versions in
# Cargo.lock (`cargo install --path` would resolve them anew, three times).
say "building clibotd, clibotctl and clibot-gateway (cargo build --locked --profile $profile)"
cargo build --locked --profile "$profile" -p clibotd -p clibotctl -p clibot-gateway
case "$profile" in
    dev|test) out=target/debug ;;
    *) out="target/$profile" ;;
esac
[ -n "${CARGO_TARGET_DIR:-}" ] && out="$CARGO_TARGET_DIR/${out#target/}"

bin="$prefix/bin"
share="$prefix/share"
mkdir -p "$bin" "$share/bash-completion/completions" "$share/zsh/site-functions" \
    "$share/fish/vendor_completions.d" "$share/man/man1"
for b in clibotd clibotctl clibot-gateway; do
    # A copy beside the running binary, then a rename: a running daemon keeps its old file.
    install -m 0755 "$out/$b" "$bin/.$b.new"
    mv -f "$bin/.$b.new" "$bin/$b"
done
"$bin/clibotctl" completions bash > "$share/bash-completion/completions/clibotctl"
"$bin/clibotctl" completions zsh > "$share/zsh/site-functions/_clibotctl"
"$bin/clibotctl" completions fish > "$share/fish/vendor_completions.d/clibotctl.fish"
"$bin/clibot-gateway" completions bash > "$share/bash-completion/completions/clibot-gateway"
"$bin/clibot-gateway" completions zsh > "$share/zsh/site-functions/_clibot-gateway"
"$bin/clibot-gateway" completions fish > "$share/fish/vendor_completions.d/clibot-gateway.fish"
"$bin/clibotctl" man --dir "$share/man/man1" >/dev/null
say "installed clibotd, clibotctl and clibot-gateway in $bin, with completions and manual pages in $share"

case ":$PATH:" in
    *":$bin:"*) ;;
    *) say "$bin is not on your PATH: add it (e.g. export PATH=\"$bin:\$PATH\" in ~/.profile)" ;;
esac

if [ "$start" -eq 0 ]; then
    say "not started (--no-start). Start the daemon with: $bin/clibotctl status"
    exit 0
fi

# Under a systemd user manager the daemon is a service (its tmux server a unit of its own, so
# a daemon restart never touches the sessions); elsewhere clibotctl starts it in the background.
if [ "$systemd" -eq 1 ] && command -v systemctl >/dev/null 2>&1 && systemctl --user show-environment >/dev/null 2>&1; then
    units="${XDG_CONFIG_HOME:-$HOME/.config}/systemd/user"
    mkdir -p "$units"
    tmux_path="$(command -v tmux)"
    for u in systemd/*.service systemd/*.socket; do
        sed -e "s#%h/.cargo/bin/#$bin/#g" -e "s#/usr/bin/tmux#$tmux_path#g" "$u" > "$units/$(basename "$u")"
    done
    systemctl --user daemon-reload
    systemctl --user enable --now clibot-tmux.service clibotd.socket
    if systemctl --user is-active --quiet clibotd.service; then
        systemctl --user restart clibotd.service
    fi
    say "clibotd runs under systemd (systemctl --user status clibotd); sessions outlive your login only with: loginctl enable-linger $USER"
else
    say "clibotd is not a systemd unit here: clibotctl starts it in the background when it is needed"
    # A daemon started earlier still runs the old binary: one this install started (its
    # program is $bin/clibotd) is stopped gracefully — tmux keeps every session, and the
    # next clibotctl call starts the new daemon, which takes them up again; any other is
    # only pointed out.
    pid="$("$bin/clibotctl" status --json 2>/dev/null | tr -d ' \n' | grep -o '"pid":[0-9][0-9]*' | head -n 1 | cut -d: -f2)"
    if [ -n "$pid" ]; then
        exe="$(readlink "/proc/$pid/exe" 2>/dev/null || true)"
        case "$exe" in
            "$bin/clibotd"|"$bin/clibotd (deleted)")
                say "restarting the running clibotd (pid $pid) on the new binary; its sessions keep running in tmux"
                kill -TERM "$pid" 2>/dev/null || true
                for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
                if kill -0 "$pid" 2>/dev/null; then
                    say "the old clibotd (pid $pid) has not stopped yet: it still runs the old binary until it does"
                fi ;;
            *)
                say "an older clibotd (pid $pid, ${exe:-its program unknown}) still runs and keeps running the old binary: stop it (kill $pid; its sessions survive in tmux) to use the new one" ;;
        esac
    fi
fi
"$bin/clibotctl" status || true
cat <<EOF

Next:
  $bin/clibotctl spawn api --cli shell --dir ~    # a shell in a new session
  $bin/clibotctl send api 'echo hello'; $bin/clibotctl screen api
  $bin/clibotctl doctor                           # checks the installation, with fixes
  From a phone: docs/CHAT.md (a bot token, then clibot-gateway --telegram).
EOF
