"""A run's Dask cluster belongs to its owner (docs/cluster.md, section "Security").

During a real local run (real Snakemake, real LocalCluster) another Unix user of the
machine (``attnrmt-other``, made by tests/harness/other-user.sh) can neither run code on
the scheduler (plain TCP, TLS with a certificate of its own, TLS without a certificate)
nor read any credential file; nothing of the run listens on a wildcard address; the
printed dashboard link answers 200. The same run is then stopped with SIGTERM: it ends
within the bound, keeps what finished and the rerun (no ``--unlock``) completes it.

The other-user checks need root; they are skipped elsewhere but fail under ``CI=true``.
(The same checks for a SLURM run are in tests/e2e/test_slurm.py.)
"""

from __future__ import annotations

import os
import signal
import sysconfig
import urllib.request
from pathlib import Path

import pytest
from distributed import LocalCluster
from distributed.security import Security

from attnrmt.sweep.compute.cluster import connect
from tests.e2e.helpers import (
    Workdir,
    assert_locked_out,
    assert_private_modes,
    count_cells,
    credential_files,
    fragment_files,
    intruder_report,
    is_wildcard,
    process_group,
    require_other_user,
    tcp_listeners,
    tiny_config,
    wait_for_scheduler_file,
)

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

N_SNR = 10
N_REPLICATES = 4
N_CELLS = 2 * N_SNR * N_REPLICATES  # 2 weights
STOP_BOUND_SECONDS = 60
"""A stopped run must have exited by then (it takes seconds; this only catches a hang)."""


def long_config() -> dict:
    """80 cells of d = 600 in blocks of 4: long enough to inspect the run while it works
    (at d = 400 a 2-core run could finish before the checks of a loaded machine ended)."""
    config = tiny_config(run="secure", execution={"block_size": 4})
    config["sweeps"]["grid"].update(
        d=[600], snr=[0.25 * i for i in range(N_SNR)], replicates=N_REPLICATES
    )
    return config


def test_local_run_is_private_and_stops_on_sigterm(tmp_path: Path) -> None:
    require_other_user()
    workdir = Workdir.create(tmp_path / "work", long_config())
    try:
        process = workdir.start(cores=2)
        info = wait_for_scheduler_file(workdir, process)
        assert info["address"].startswith("tls://127.0.0.1:"), info
        # the cluster lives in the Snakemake process; its owner gets in with the credentials
        with connect(workdir.run_dir) as client:
            assert client.run_on_scheduler(os.getpid) == process.pid
            assert len(client.scheduler_info()["workers"]) >= 1
        assert_private_modes(workdir.run_dir)
        # nothing of the run (Snakemake, scheduler, nannies, workers) on a wildcard address
        listeners = tcp_listeners(process_group(process.pid))
        assert len(listeners) >= 3, listeners  # scheduler, its HTTP server, a worker
        assert not [entry for entry in listeners if is_wildcard(entry[0])], listeners
        # the dashboard link is printed and answers
        assert info["dashboard"].startswith("http://127.0.0.1:"), info
        with urllib.request.urlopen(info["dashboard"], timeout=30) as response:
            assert response.status == 200
        log = (workdir.path / "snakemake-background.log").read_text()
        assert f"dashboard {info['dashboard']}" in log
        # another user of the machine: no file, no code on the scheduler
        assert_locked_out(intruder_report(info["address"], credential_files(workdir.run_dir)))
        # SIGTERM: the run stops within the bound, keeping what finished
        os.kill(process.pid, signal.SIGTERM)
        returncode = process.wait(timeout=STOP_BOUND_SECONDS)
        log = (workdir.path / "snakemake-background.log").read_text()
        assert returncode != 0, log[-4000:]
        assert "stopping the run: SIGTERM received" in log, log[-4000:]
        kept = fragment_files(workdir.path)
        assert count_cells(kept).computed < N_CELLS, "the run finished before SIGTERM"
        assert not (workdir.run_dir / ".dask" / "tls" / "key.pem").exists()
        # the rerun needs no --unlock and computes only what had not finished
        resumed = workdir.run()
        assert "LockException" not in resumed.output
        after = fragment_files(workdir.path)
        assert all(after[path] == mtime for path, mtime in kept.items() if path in after)
        assert workdir.open_cells().attrs["cells_present"] == N_CELLS
        assert resumed.computed <= N_CELLS - count_cells(kept).computed
    finally:
        workdir.close()


def test_the_intruder_needs_nothing_the_other_user_cannot_read(tmp_path: Path) -> None:
    """A newcomer's clone (and its venv) inside a 0700 home: the other user cannot read
    the packages, so the intruder must have loaded every module its attempts need before
    dropping to that user. Its packages come through a 0700 directory here (a link to
    this venv's site-packages, ``python -S``); against a TLS scheduler each attempt is
    refused by the scheduler, none fails on an import."""
    require_other_user()
    private = tmp_path / "home"
    private.mkdir(mode=0o700)
    (private / "site-packages").symlink_to(sysconfig.get_paths()["purelib"])
    secret = private / "secret"
    secret.write_text("x")
    with LocalCluster(
        n_workers=0,
        processes=False,
        protocol="tls",
        security=Security.temporary(),
        dashboard_address=None,
    ) as cluster:
        report = intruder_report(
            cluster.scheduler_address, [secret], site_packages=private / "site-packages"
        )
    assert_locked_out(report)
