# Shared helpers: the run plan (built once, at DAG time, from the config the Snakefile
# validated: VALID), paths, input functions and the final targets (get_final_output).
import gc
import os
import re
import sys
import time

from attnrmt.contract import FIGURES, TABLES
from attnrmt.sweep.blocks import block_params
from attnrmt.sweep.cluster import (
    BlocksLeft,
    ClusterSettings,
    cancel_rate_limiter_wakeups,
    dashboard_link,
    shutdown_run_cluster,
    stop_on_signals,
)
from attnrmt.sweep.cluster.blockwatch import start_block_job_watch
from attnrmt.sweep.failures import FailureBudget, describe_skipped, failed_blocks
from attnrmt.sweep.plan import plan_run
from attnrmt.sweep.status import print_progress
from attnrmt.summary import run_summary
from attnrmt.sweep.table_writer import store_finished_cells

RUN_STARTED = time.time()  # parse time of the main Snakemake process: the run's start

PLAN = plan_run(config, VALID.sweeps)  # no second round of semantic checks
RUN = PLAN.run
RESULTS = f"results/{RUN}"
SWEEPS = list(PLAN.sweeps)
BLOCKS = {name: sweep.block_index() for name, sweep in PLAN.sweeps.items()}
# skip_failed: blocks whose last attempt failed are left out of the DAG, not retried
SKIPPED_BLOCKS = (
    failed_blocks(PLAN, RESULTS) if config["skip_failed"] else {name: set() for name in SWEEPS}
)
SKIPPED_MESSAGE = describe_skipped(SKIPPED_BLOCKS)
if SKIPPED_MESSAGE:
    print(SKIPPED_MESSAGE, file=sys.stderr)
# execution.max_failures: blocks stop computing once this run has failed that many cells
FAILURE_BUDGET = FailureBudget.from_config(config, PLAN)
# sweeps with a block to gather: the ones stored, analysed and reported
GATHERED_SWEEPS = [name for name in SWEEPS if len(BLOCKS[name]) > len(SKIPPED_BLOCKS[name])]


wildcard_constraints:
    sweep="|".join(re.escape(name) for name in SWEEPS),
    block="[0-9a-f]+",


def sweep_path(sweep, name):
    """results/<run>/<sweep>/<name>."""
    return f"{RESULTS}/{sweep}/{name}"


def fragment_path(sweep, block_key):
    """Fragment of one block: results/<run>/<sweep>/fragments/<block>.npz."""
    return f"{RESULTS}/{sweep}/fragments/{block_key}.npz"


def fragments_to_gather(sweep):
    """Fragments of the current blocks of a sweep, less the skipped ones."""
    skipped = SKIPPED_BLOCKS[sweep]
    blocks = PLAN.sweeps[sweep].blocks
    return [fragment_path(sweep, block.key) for block in blocks if block.key not in skipped]


def sweep_fragments(wildcards):
    """Input of gather_cells: :func:`fragments_to_gather` of the sweep."""
    return fragments_to_gather(wildcards.sweep)


def gathered_fragments(wildcards):
    """Fragments of every gathered sweep (input of failed_cells: it runs after them)."""
    return [path for sweep in GATHERED_SWEEPS for path in fragments_to_gather(sweep)]


def block_cells(wildcards):
    """What a block's cells depend on, in block order: key, seed words, simulate kwargs."""
    return block_params(BLOCKS[wildcards.sweep][wildcards.block].cells, PLAN.seed)


def sweep_config_sha256(wildcards):
    """sha256 of the sweep's canonical config (reruns gather/theory when it changes)."""
    return PLAN.sweeps[wildcards.sweep].config_sha256


def granted_cores():
    """Snakemake's --cores (caps the run's local Dask cluster); None when not set."""
    try:
        return workflow.cores
    except Exception:  # no --cores (e.g. a cluster executor with --jobs)
        return None


def print_run_progress():
    """A one-line progress with ETA on stderr, at most every 30 s and 2% of a core
    (attnrmt.sweep.status.print_progress), from the process that drives the run; jobs
    running remotely (a SLURM job per block) print none."""
    if not workflow.remote_exec:
        print_progress(PLAN, RESULTS)


# Fragments this run's block jobs have still to write (used by the driving process only).
BLOCKS_LEFT = BlocksLeft(path for sweep in GATHERED_SWEEPS for path in fragments_to_gather(sweep))


def after_block(fragment):
    """What the driving process does as a block job ends (jobs running remotely do
    nothing): the progress line (print_run_progress); the run's Dask cluster closed in
    the background once the last block's fragment is written (BlocksLeft: the gathers
    need no cluster, so the workers' teardown overlaps them); Snakemake's idle rate-limiter
    wake-ups cancelled (attnrmt.sweep.cluster.cancel_rate_limiter_wakeups)."""
    if workflow.remote_exec:
        return
    print_run_progress()
    cancel_rate_limiter_wakeups()
    if BLOCKS_LEFT.finished(fragment):
        shutdown_run_cluster(RESULTS, wait=False)


def get_store_output():
    """Input of rule stores: theory.zarr of every sweep, cells.zarr of every gathered one."""
    return [sweep_path(sweep, "theory.zarr") for sweep in SWEEPS] + [
        sweep_path(sweep, "cells.zarr") for sweep in GATHERED_SWEEPS
    ]


def get_final_output():
    """Input of rule all: the stores, analysis stores, tables, figures and failed cells."""
    formats = list(dict.fromkeys(["png", *config["analysis"]["figure_formats"]]))
    return [
        *get_store_output(),
        *(sweep_path(sweep, "analysis.zarr") for sweep in GATHERED_SWEEPS),
        *(f"{RESULTS}/{name}.csv" for name in TABLES),
        f"{RESULTS}/failed_cells.csv",
        *(f"{RESULTS}/figures/{name}.{fmt}" for name in FIGURES for fmt in formats),
    ]


def table_has_data(path):
    """False for a table written without data: a header only, or the analysis's
    placeholder (a single `note` column). True when the file does not exist yet (during a
    run; the report is made afterwards). Reads two lines."""
    try:
        with open(path, encoding="utf-8") as handle:
            header, first_row = handle.readline().strip(), handle.readline().strip()
    except FileNotFoundError:
        return True
    return header != "note" and bool(first_row)


def report_if_data(path, table=None, **report_kwargs):
    """report(path, ...) when `table` (default: path itself) has data, else plain path:
    the report leaves out analyses the run has no data for instead of showing
    placeholder tables and figures (decided when `--report` parses the workflow)."""
    if table_has_data(table or path):
        return report(path, **report_kwargs)
    return path


def print_end_summary():
    """The end-of-run summary (attnrmt.summary.run_summary: results, report, cells
    computed / reused / failed, wall time, verdicts), for the Snakefile's onsuccess."""
    if os.environ.get("ATTNRMT_END_SUMMARY") == "later":  # `make run` prints it after the report
        return
    for line in run_summary(PLAN, "results", RUN_STARTED, str(CONFIG_FILE)):
        print(line, file=sys.stderr)
    link = dashboard_link(RESULTS)
    if link:
        print(f"Dask dashboard (while the run lasted): {link}", file=sys.stderr)


def skip_exit_collection():
    """gc.freeze() the heap of a process about to exit: the interpreter's final garbage
    collection then skips it. Imports (Snakemake, distributed, xarray, matplotlib) and the
    DAG make a heap whose collection at exit took seconds (measured ~0.5-4 s, growing
    with machine load; docs/scaling.md, "Pipeline overhead"); nothing of it needs
    collecting, the process ends."""
    gc.freeze()


def print_max_failures_message():
    """The one max_failures message (attnrmt.sweep.failures.FailureBudget), for the
    Snakefile's onerror, when the run stopped because of it."""
    message = FAILURE_BUDGET.exceeded(RESULTS)
    if message:
        print(f"attnrmt: {message}", file=sys.stderr)
