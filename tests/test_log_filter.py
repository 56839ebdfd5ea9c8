"""What a run shows on screen: the Snakemake output split (attnrmt.log_filter). The lines
fed to the splitter are Snakemake 9's real formats (a job banner, the job table, ``N of M
steps``, a RuleException with its ``Error in rule`` block and the failed job's log,
Dask's logging lines); a real run's screen is checked in tests/e2e/test_run_output.py."""

from __future__ import annotations

from attnrmt.log_filter import OutputSplitter

SNAKEMAKE_OUTPUT = """\
Using workflow specific profile profiles/default for setting default command line arguments.
Assuming unrestricted shared filesystem usage.

SNAKEMAKE
=========
  Date: 2026-12-01 20:25:01
  Snakemake version: 9.27.1
Building DAG of jobs...
Provided cores: 2
Job stats:
job                count
---------------  -------
simulate_block         4
all                    1
total                 11

Select jobs to execute...
Execute 5 jobs...

[Tue Dec  1 20:25:03 2026]
localrule simulate_block:
    output: results/tiny/tiny/fragments/2957045faf905cc1.npz
    jobid: 3
Shell command: None
attnrmt: warning: weight_models.w: defined but used by no sweep
attnrmt: Dask cluster tls://127.0.0.1:36909 (local, TLS); dashboard http://127.0.0.1:1/status
attnrmt: tiny block c76a6fb59429: 2 cells, 2 computed, 0 reused, 11.98 s
attnrmt: progress tiny: 2/8 cells (25.0%), rate not yet measured, ETA unknown
2026-12-01 20:25:21,278 - distributed.worker - INFO - Stopping worker at tls://127.0.0.1:1
[Tue Dec  1 20:25:21 2026]
Finished jobid: 3 (Rule: simulate_block)
6 of 11 steps (55%) done
[Tue Dec  1 20:25:21 2026]
localrule failed_cells:
    output: results/tiny/failed_cells.csv
RuleException:
AttributeError in file "simulate.smk", line 64:
module 'x' has no attribute 'y'
  File "simulate.smk", line 64, in __rule_failed_cells
[Tue Dec  1 20:25:21 2026]
Error in rule failed_cells:
    message: None
    jobid: 9
    log: results/tiny/logs/x.log (check log file(s) for error details)
Logfile results/tiny/logs/x.log:
================================================================================
2026-12-01 20:35:59 cell 0d32 failed: MemoryError((10000000, 5000000))
================================================================================
Shutting down, this might take some time.
Exiting because a job execution failed. Look above for error messages
attnrmt: warning: weight_models.w: defined but used by no sweep
Complete log(s): /w/.snakemake/log/2026-12-01T202501.snakemake.log
WorkflowError:
At least one job did not complete successfully.
"""


def split(text: str, splitter: OutputSplitter | None = None) -> tuple[list[str], OutputSplitter]:
    splitter = OutputSplitter() if splitter is None else splitter
    shown = [splitter.screen_line(line) for line in text.splitlines()]
    return [line for line in shown if line is not None], splitter


def test_the_screen_gets_our_messages_once_and_errors_in_full() -> None:
    shown, splitter = split(SNAKEMAKE_OUTPUT)
    assert shown == [
        "attnrmt: warning: weight_models.w: defined but used by no sweep",
        "attnrmt: Dask cluster tls://127.0.0.1:36909 (local, TLS); dashboard http://127.0.0.1:1/status",
        "RuleException:",
        'AttributeError in file "simulate.smk", line 64:',
        "module 'x' has no attribute 'y'",
        '  File "simulate.smk", line 64, in __rule_failed_cells',
        "Error in rule failed_cells:",
        "    jobid: 9",
        "    log: results/tiny/logs/x.log (check log file(s) for error details)",
        "Logfile results/tiny/logs/x.log:",
        "=" * 80,
        "2026-12-01 20:35:59 cell 0d32 failed: MemoryError((10000000, 5000000))",
        "=" * 80,
        "Exiting because a job execution failed. Look above for error messages",
        "WorkflowError:",
        "At least one job did not complete successfully.",
    ]
    assert splitter.error_lines[0] == "RuleException:"
    assert splitter.error_lines[-1] == "At least one job did not complete successfully."
    assert (splitter.steps_done, splitter.steps_total, splitter.rule) == (6, 11, "failed_cells")
    assert splitter.stage() == "step 6/11 failed_cells"


def test_a_message_the_driver_printed_is_not_shown_again() -> None:
    """``attnrmt run: warning: X`` (the driver's validation) and the Snakefile's
    ``attnrmt: warning: X`` are one message."""
    seeded = OutputSplitter(seen={"warning: weight_models.w: defined but used by no sweep"})
    shown, _ = split(SNAKEMAKE_OUTPUT, seeded)
    assert not any("warning" in line for line in shown)


def test_lines_before_snakemake_logs_anything_are_shown() -> None:
    """A problem before the first recognised line (an import error, our config error)."""
    shown, _ = split(
        'Traceback (most recent call last):\n  File "x"\nImportError: no\n'
        "Building DAG of jobs...\n    hidden detail\n"
    )
    assert shown == ["Traceback (most recent call last):", '  File "x"', "ImportError: no"]
