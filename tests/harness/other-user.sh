#!/usr/bin/env bash
# A second Unix user for the security tests (tests/e2e/test_security.py): they check that
# this user cannot run code on a run's Dask scheduler nor read its credentials.
# Idempotent; needs root. Usage: bash tests/harness/other-user.sh [user]
set -euo pipefail
user="${1:-attnrmt-other}"
if ! id -u "$user" >/dev/null 2>&1; then
    useradd --system --no-create-home --shell /usr/sbin/nologin "$user"
fi
id "$user"
