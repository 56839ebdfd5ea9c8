"""Batch-system job scripts through dask-jobqueue (run/cluster/jobqueue.py)."""

from __future__ import annotations

from pathlib import Path

import dask
import pytest

from attnrmt.sweep.compute.cluster import (
    ClusterSettings,
    jobqueue,
    parse_walltime,
    security,
    worker_lifetime,
)

SYSTEM_DIRECTIVES = {
    "slurm": ("#SBATCH --cpus-per-task=2", "#SBATCH -t 00:20:00"),
    "pbs": ("#PBS -l select=1:ncpus=2", "#PBS -l walltime=00:20:00"),
    "lsf": ("#BSUB -n 2", "#BSUB -W 00:20"),
    "sge": ("#$ -l h_rt=00:20:00",),
    "htcondor": ("RequestCpus = MY.DaskWorkerCores",),
    "oar": ("#OAR -l /nodes=1/core=2,walltime=00:20:00",),
}


@pytest.mark.parametrize("system", sorted(SYSTEM_DIRECTIVES))
def test_generated_job_scripts_use_tls_lifetime_and_site_walltime(
    system: str, tmp_path: Path
) -> None:
    """Every batch system's worker job script (real dask-jobqueue class): the profile's
    cores and memory, the site configuration's walltime (the profile sets none), TLS
    with the run's credential files, a lifetime below the walltime, one BLAS thread."""
    settings = ClusterSettings.from_config(
        {
            "mode": system,
            "dashboard": False,
            "jobqueue": {"cores": 2, "memory": "2GB", "interface": "lo", "n_workers": 1},
        }
    )
    run_security = security.new_run_credentials(tmp_path)
    cert, key = security.credential_paths(tmp_path)
    site = {  # what a site's jobqueue.yaml says (htcondor and oar need a word more)
        f"jobqueue.{system}.walltime": "00:20:00",
        "jobqueue.htcondor.disk": "1GB",
        "jobqueue.oar.memory-per-core-property-name": "memcore",
    }
    with dask.config.set(site):
        kwargs = jobqueue.cluster_kwargs(settings, run_security, cert.parent, tmp_path / "logs")
        cluster = jobqueue.new_jobqueue_cluster(settings, kwargs)
        try:
            script = cluster.job_script()
            assert cluster.scheduler_address.startswith("tls://127.0.0.1:")
        finally:
            cluster.close()
    for directive in SYSTEM_DIRECTIVES[system]:
        assert directive in script, script
    assert f"--tls-key {key}" in script and f"--tls-ca-file {cert}" in script, script
    lifetime, stagger = worker_lifetime(parse_walltime("00:20:00"))
    assert f"--lifetime {lifetime}s --lifetime-stagger {stagger}s" in script, script
    assert "export OMP_NUM_THREADS=1" in script
    assert "PRIVATE KEY" not in script


def test_profile_values_win_over_site_values(tmp_path: Path) -> None:
    settings = ClusterSettings.from_config(
        {"mode": "slurm", "jobqueue": {"walltime": "01:00:00", "queue": "debug"}}
    )
    with dask.config.set(
        {
            "jobqueue.slurm.walltime": "00:20:00",
            "jobqueue.slurm.job-script-prologue": ["module load site"],
        }
    ):
        kwargs = jobqueue.cluster_kwargs(settings, None, tmp_path, tmp_path / "logs")
        described = jobqueue.describe_request(settings)
    assert kwargs["walltime"] == "01:00:00" and kwargs["queue"] == "debug"
    assert kwargs["job_script_prologue"][0] == "module load site"  # site's, extended
    assert "cores" not in kwargs and "memory" not in kwargs  # left to dask-jobqueue's config
    assert kwargs["protocol"] == "tls://"
    assert "walltime=01:00:00" in described and "partition/queue=debug" in described
