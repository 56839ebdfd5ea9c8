#!/usr/bin/env bash
# Install the Debian system packages the test-suite needs (idempotent).
#
#   slurm-wlm  single-node SLURM for tests marked `slurm` (tests/harness/slurm.sh)
#   munge      SLURM's authentication daemon
#   chromium   headless browser for tests marked `browser`
#
# Fast path: when every package is already installed this exits in well under a second
# without touching apt. Otherwise it runs `apt-get update` once and installs only what is
# missing, non-interactively, waiting (up to 15 min) for a dpkg lock held by someone else.
# Needs root (CI and the dev machines run as root); without root it only reports.
set -euo pipefail

PACKAGES=(slurm-wlm munge chromium)

missing=()
for pkg in "${PACKAGES[@]}"; do
    status="$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)"
    if [[ "$status" != "install ok installed" ]]; then
        missing+=("$pkg")
    fi
done

if ((${#missing[@]} == 0)); then
    echo "system-deps: already installed: ${PACKAGES[*]}"
    exit 0
fi

echo "system-deps: installing: ${missing[*]}"
if [[ "$(id -u)" != 0 ]]; then
    SUDO=sudo
    command -v sudo >/dev/null || { echo "system-deps: need root to install ${missing[*]}" >&2; exit 1; }
else
    SUDO=
fi

export DEBIAN_FRONTEND=noninteractive
APT_OPTS=(-y -q -o DPkg::Lock::Timeout=900 -o Dpkg::Options::=--force-confdef
          -o Dpkg::Options::=--force-confold)
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get -q -o DPkg::Lock::Timeout=900 update
# --no-install-recommends keeps the install small; policy-rc.d stops the packages'
# postinst from starting (and failing to start) daemons: slurm.sh starts its own.
policy=/usr/sbin/policy-rc.d
created_policy=0
if [[ ! -e "$policy" ]]; then
    printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$policy" >/dev/null
    $SUDO chmod +x "$policy"
    created_policy=1
fi
cleanup() { if ((created_policy)); then $SUDO rm -f "$policy"; fi; }
trap cleanup EXIT
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install "${APT_OPTS[@]}" \
    --no-install-recommends "${missing[@]}"
echo "system-deps: done"
