#!/usr/bin/env bash
# Installs what benches/e2e/overhead.sh and nginx_upstream.sh need on a fresh Debian machine,
# as root:
#   - wrk      (Debian package)
#   - nginx    (Debian package nginx-light: the upstream that answers instantly)
#   - smg      (Shepherd Model Gateway, PyPI package `smg`, provides the `smg` command)
#
# Usage:  sudo bash benches/e2e/setup.sh
# Idempotent: anything already installed is left alone. Only the package registries are used.
# Knobs:  SMG_VERSION=1.13.0  pin the smg version (default: whatever pip resolves)
#         PIP=pip3             the pip to use (default: `python3 -m pip`)
set -euo pipefail

if [[ $EUID -ne 0 ]]; then
    echo "setup.sh: run as root (it uses apt-get and pip)" >&2
    exit 1
fi

if command -v wrk >/dev/null 2>&1; then
    echo "wrk: already installed ($(command -v wrk))"
else
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    apt-get install -y wrk
fi

if command -v nginx >/dev/null 2>&1; then
    echo "nginx: already installed ($(command -v nginx))"
else
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    apt-get install -y nginx-light
fi

PIP=${PIP:-"python3 -m pip"}
if command -v smg >/dev/null 2>&1 && smg launch --help >/dev/null 2>&1; then
    echo "smg: already installed ($(command -v smg))"
else
    spec=smg
    [[ -n "${SMG_VERSION:-}" ]] && spec="smg==${SMG_VERSION}"
    # shellcheck disable=SC2086  # PIP may be a command with arguments
    $PIP install --quiet "$spec"
    # pyenv installs console scripts behind shims that need a rehash.
    command -v pyenv >/dev/null 2>&1 && pyenv rehash || true
fi

wrk --version 2>&1 | head -n 1 || true
smg launch --help >/dev/null && echo "smg: ok ($(command -v smg))"
