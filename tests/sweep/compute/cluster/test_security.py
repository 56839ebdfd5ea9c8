"""Per-run TLS credentials, and a second Unix user locked out (run/cluster/security.py)."""

from __future__ import annotations

import os
from pathlib import Path

from attnrmt.sweep.compute.cluster import (
    security,
)
from tests.e2e.helpers import assert_locked_out, intruder_report, require_other_user


def test_credentials_are_private_files_in_a_private_directory(tmp_path: Path) -> None:
    dask_dir = tmp_path / ".dask"
    run_security = security.new_run_credentials(dask_dir)
    cert, key = security.credential_paths(dask_dir)
    assert dask_dir.stat().st_mode & 0o777 == 0o700
    assert cert.parent.stat().st_mode & 0o777 == 0o700
    assert cert.stat().st_mode & 0o777 == 0o600 and key.stat().st_mode & 0o777 == 0o600
    assert "PRIVATE KEY" in key.read_text() and "CERTIFICATE" in cert.read_text()
    assert run_security.require_encryption
    assert run_security.tls_client_key == str(key)  # paths, never the key in a log line
    assert str(security.run_security(dask_dir).tls_ca_file) == str(cert)
    again = security.new_run_credentials(dask_dir)  # a new cluster: new key
    assert key.read_text() != "" and again.tls_client_cert == str(cert)


def test_owner_connects_and_another_user_cannot(tmp_path: Path) -> None:
    """Against a TLS LocalCluster with the run's credentials the owner runs code, the other
    user gets nowhere; against the same cluster without TLS the other user runs code (the
    check bites when TLS is off)."""
    from distributed import Client, LocalCluster

    require_other_user()
    dask_dir = tmp_path / ".dask"
    run_security = security.new_run_credentials(dask_dir)
    common = {
        "n_workers": 1,
        "processes": False,
        "host": "127.0.0.1",
        "dashboard_address": "127.0.0.1:0",
    }
    with LocalCluster(protocol="tls://", security=run_security, **common) as cluster:
        with Client(cluster.scheduler_address, security=run_security) as client:
            assert client.run_on_scheduler(os.getpid) == os.getpid()
        files = security.credential_paths(dask_dir)
        assert_locked_out(intruder_report(cluster.scheduler_address, files))
    with LocalCluster(protocol="tcp://", **common) as exposed:
        report = intruder_report(exposed.scheduler_address, [])
    assert report["plain_tcp"] == "ran", report
