"""The SLURM job's end time and walltime (attnrmt.sweep.compute.cluster.slurm); the test in a
real job is marked ``slurm``."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from attnrmt.sweep.compute.cluster import slurm


def test_walltime_is_near_the_slurm_end_time() -> None:
    end = 1_800_000_000
    environ = {"SLURM_JOB_ID": "7", "SLURM_JOB_END_TIME": str(end)}
    assert slurm.slurm_job_end_time(environ) == end
    assert slurm.slurm_job_end_time({}) is None  # not in a SLURM job
    assert slurm.slurm_walltime_reached(end, now=end - 10)
    assert slurm.slurm_walltime_reached(end, now=end + 5)
    assert not slurm.slurm_walltime_reached(end, now=end - 3600)
    assert not slurm.slurm_walltime_reached(None, now=end)


@pytest.mark.slurm
def test_slurm_job_end_time_from_squeue_inside_a_real_job(tmp_path: Path) -> None:
    """SLURM 22.05 sets no SLURM_JOB_END_TIME: the end time comes from squeue."""
    import sys

    out = tmp_path / "end.txt"
    code = (
        "import os, time; from attnrmt.sweep.compute.cluster.slurm import slurm_job_end_time as e; "
        "os.environ.pop('SLURM_JOB_END_TIME', None); "
        f"open({str(out)!r}, 'w').write(f'{{time.time()}} {{e()}}')"
    )
    subprocess.run(
        [
            "sbatch",
            "--wait",
            "--time=7",
            f"--output={tmp_path / 'slurm.out'}",
            f"--export=ALL,PYTHONPATH={os.environ.get('PYTHONPATH', '')}",
            "--wrap",
            f'{sys.executable} -c "{code}"',
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    started, end = (float(word) for word in out.read_text().split())
    # the job's limit is 7 minutes: its end is 7 min after its start (squeue shows whole
    # seconds, and the job started at most a minute before the Python line ran)
    assert 6 * 60 <= end - started <= 7 * 60 + 1
