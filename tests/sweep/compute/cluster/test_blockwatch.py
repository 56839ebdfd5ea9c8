"""SLURM block jobs that can never run stop the run (run/cluster/slurm.py, blockwatch.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from attnrmt.sweep.compute.cluster import (
    slurm,
)


def test_squeue_output_and_reasons_that_never_clear() -> None:
    states = slurm.parse_squeue(
        "12|PENDING|PartitionConfig\n13|PENDING|Resources\n14|RUNNING|None\n"
        "15|PENDING|ReqNodeNotAvail, UnavailableNodes:ghost\n"
    )
    assert states["12"].reason == "PartitionConfig" and states["14"].state == "RUNNING"
    assert slurm.pending_summary(states) == {
        "PartitionConfig": 1,
        "Resources": 1,
        "ReqNodeNotAvail, UnavailableNodes:ghost": 1,
    }
    nodes = {"vm"}
    assert slurm.is_unsatisfiable("PartitionConfig", nodes)
    assert slurm.is_unsatisfiable("InvalidAccount", nodes)
    assert not slurm.is_unsatisfiable("Resources", nodes)
    assert not slurm.is_unsatisfiable("Priority", nodes)
    assert slurm.is_unsatisfiable("ReqNodeNotAvail, UnavailableNodes:ghost", nodes)
    assert not slurm.is_unsatisfiable("ReqNodeNotAvail, UnavailableNodes:vm", nodes)


def test_block_jobs_of_the_run_are_found_and_an_unsatisfiable_one_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """profiles/slurm: the run's jobs are the SLURM executor's (comment rule_*) submitted
    from its directory; one pending with PartitionConfig makes one message naming the
    request; Resources only makes the periodic line."""
    from attnrmt.sweep.compute.cluster import blockwatch

    here, elsewhere = tmp_path / "run", tmp_path / "other"
    lines = [
        f"21|PENDING|rule_simulate_block_wildcards_grid|{here}|64|1000M|10:00|debug|Resources",
        f"22|PENDING|rule_simulate_block_wildcards_grid|{here}|64|1000M|10:00|debug|"
        "PartitionConfig",
        f"23|PENDING|rule_simulate_block|{elsewhere}|64|1000M|10:00|debug|PartitionConfig",
        f"24|RUNNING|(null)|{here}|2|4G|2:00:00|debug|None",  # a driver job: no rule_ comment
        "garbage line",
    ]
    states = blockwatch.parse_block_jobs("\n".join(lines), here)
    assert sorted(states) == ["21", "22"]
    assert states["22"].request == (
        "rule=simulate_block, cores=64, memory=1000M, walltime=10:00, partition=debug"
    )
    watch = blockwatch.block_job_watch(here, on_fatal=lambda message: None)
    message = watch.fatal_message(states)
    assert message is not None and message.startswith(
        "SLURM will never run the job 22 of this run (rule=simulate_block, cores=64, "
        "memory=1000M, walltime=10:00, partition=debug): pending with reason PartitionConfig."
    )
    queue_load = {"21": states["21"]}
    assert watch.fatal_message(queue_load) is None
    line = watch.report_pending(queue_load)
    assert line is not None and line.startswith("attnrmt: 1 block jobs pending: Resources x1, ")
    assert line in capsys.readouterr().err


def test_the_block_job_watch_starts_only_under_the_slurm_executor() -> None:
    """Only the Snakemake SLURM executor gets a watch (other executors have no block
    jobs in the queue); the workflow's executor plugin names it."""
    from types import SimpleNamespace

    from attnrmt.sweep.compute.cluster import blockwatch

    for plugin in (None, SimpleNamespace(name="local"), SimpleNamespace(name="dryrun")):
        assert blockwatch.start_block_job_watch(SimpleNamespace(executor_plugin=plugin)) is None
