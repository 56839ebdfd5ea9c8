# Shared helpers: the run plan (built once, at DAG time, from the config the Snakefile
# validated: VALID), paths, input functions and the final targets (get_final_output).
import os
import re
import sys
import time

from attnrmt.contract import PLACEHOLDER_FIGURE, RUN_FIGURES, SWEEP_FIGURES, SWEEP_TABLES, TABLES
from attnrmt.workflow import hooks
from attnrmt.sweep.store.layout import RunLayout
from attnrmt.sweep.compute.blocks import run_block
from attnrmt.sweep.compute.cluster import (
    BlocksLeft,
    ClusterSettings,
    cancel_rate_limiter_wakeups,
    dashboard_link,
    shutdown_run_cluster,
    stop_on_signals,
)
from attnrmt.sweep.compute.cluster.blockwatch import start_block_job_watch
from attnrmt.sweep.compute.failures import FailureBudget, describe_skipped, failed_blocks
from attnrmt.sweep.spec.plan import plan_run
from attnrmt.sweep.store import gather_cells
from attnrmt.sweep.store.cell_cache import cache_root
from attnrmt.sweep.store.fragments import raise_for_lost_fragments
from attnrmt.sweep.store.zarr_io import stop_zarr_io

RUN_STARTED = time.time()  # parse time of the main Snakemake process: the run's start

PLAN = plan_run(config, VALID.sweeps)  # no second round of semantic checks
RUN = PLAN.run
LAYOUT = RunLayout.of(RUN)  # every path under results/<run>/ (attnrmt.sweep.store.layout)
RESULTS = str(LAYOUT.root)
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
# the shared cell cache (attnrmt.sweep.store.cell_cache): None when off
CELL_CACHE = cache_root(VALID.config)
# sweeps with a block to gather: the ones stored, analysed and reported
GATHERED_SWEEPS = [name for name in SWEEPS if len(BLOCKS[name]) > len(SKIPPED_BLOCKS[name])]




def sweep_path(sweep, name):
    """results/<run>/<sweep>/<name>."""
    return str(LAYOUT.sweep(sweep).root / name)


def fragment_path(sweep, block_key):
    """Fragment of one block: results/<run>/<sweep>/fragments/<block>.npz."""
    return str(LAYOUT.sweep(sweep).fragment(block_key))


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
    return BLOCKS[wildcards.sweep][wildcards.block].cells.block_params(PLAN.seed)


def sweep_config_sha256(wildcards):
    """sha256 of the sweep's canonical config (reruns gather/theory when it changes)."""
    return PLAN.sweeps[wildcards.sweep].config_sha256


def granted_cores():
    """Snakemake's --cores (caps the run's local Dask cluster); None when not set."""
    try:
        return workflow.cores
    except Exception:  # no --cores (e.g. a cluster executor with --jobs)
        return None


# Fragments this run's block jobs have still to write (used by the driving process only).
BLOCKS_LEFT = BlocksLeft(path for sweep in GATHERED_SWEEPS for path in fragments_to_gather(sweep))


def get_store_output():
    """Input of the stores target: theory.zarr of every sweep, cells.zarr of every gathered one."""
    return [sweep_path(sweep, "theory.zarr") for sweep in SWEEPS] + [
        sweep_path(sweep, "cells.zarr") for sweep in GATHERED_SWEEPS
    ]


def get_final_output():
    """Input of the default target: the stores, analysis stores, tables, each sweep's
    figures, the run's figures and failed cells."""
    formats = list(dict.fromkeys(["png", *config["analysis"]["figure_formats"]]))
    return [
        *get_store_output(),
        *(sweep_path(sweep, "analysis.zarr") for sweep in GATHERED_SWEEPS),
        *(f"{RESULTS}/{name}.csv" for name in TABLES),
        f"{RESULTS}/failed_cells.csv",
        *(
            sweep_path(sweep, f"figures/{name}.{fmt}")
            for sweep in GATHERED_SWEEPS
            for name in SWEEP_FIGURES
            for fmt in formats
        ),
        *(f"{RESULTS}/figures/{name}.{fmt}" for name in RUN_FIGURES for fmt in formats),
        *([f"{RESULTS}/figures/rounds.png"] if os.path.isfile(f"{RESULTS}/rounds/rounds.csv") else []),
    ]


def report_if_data(path, table=None, **report_kwargs):
    """report(path, ...) when `table` (default: path itself) has data, else plain path:
    the report leaves out analyses the run has no data for instead of showing
    placeholder tables and figures (decided when `--report` parses the workflow)."""
    if hooks.table_has_data(table or path):
        return report(path, **report_kwargs)
    return path


def analysis_settings():
    """The config's analysis block (schema-filled); params: so a change reruns the rules."""
    return config.get("analysis", {})


def sweep_weight_models(sweep):
    """The weight models a sweep uses (params: a model only another sweep uses is no
    change of this sweep's products)."""
    weights = config["sweeps"][sweep]["weights"]
    used = {weights} if isinstance(weights, str) else set(weights)
    return {name: spec for name, spec in config.get("weight_models", {}).items() if name in used}


def figure_outputs(folder, names, sweep):
    """One output per figure of `names` in `folder`: its PNG, in the report unless it is a
    placeholder (its description says so; decided when `--report` parses the workflow),
    plus the other formats."""
    outputs = {}
    for name in names:
        png = f"{folder}/{name}.png"
        outputs[name] = png
        if not hooks.file_contains(png, PLACEHOLDER_FIGURE.encode()):
            outputs[name] = report(
                png,
                caption=f"../report/{name}.rst",
                category="Figures",
                labels={"figure": name, "sweep": sweep},
            )
        for fmt in FIGURE_FORMATS:
            if fmt != "png":
                outputs[f"{name}_{fmt}"] = f"{folder}/{name}.{fmt}"
    return outputs


def simulate_block_job(wildcards, fragment, log_path, resources):
    """Body of the block job: run the block on the run's cluster
    (attnrmt.sweep.compute.blocks.run_block), then the driving process's after-block chores
    (attnrmt.workflow.hooks.after_block)."""
    run_block(
        block_cells(wildcards), fragment, RESULTS, config.get("dask"), log_path,
        granted_cores(), failure_budget=FAILURE_BUDGET,
        mem_mb=getattr(resources, "mem_mb", None), cell_cache=CELL_CACHE,
    )
    hooks.after_block(fragment, PLAN, RESULTS, BLOCKS_LEFT, workflow.remote_exec)


def report_finished_cells():
    """Store every sweep's finished cells and say so (attnrmt.workflow.hooks): for the
    Snakefile's onerror and a stopped run's exit (stop_on_signals)."""
    hooks.report_finished_cells(PLAN, RESULTS)


def gather_sweep_cells(wildcards, fragments, receipt, log_path):
    """Body of the gather: the sweep's fragments into its cell table
    (attnrmt.sweep.store.gather_cells); an input found damaged (and not restored from its
    cache copy) was moved aside, so the job fails naming it and the rerun recomputes its
    cells (attnrmt.sweep.store.fragments.raise_for_lost_fragments)."""
    gather_cells(PLAN.sweeps[wildcards.sweep], fragments, receipt, PLAN.seed, log_path)
    raise_for_lost_fragments(fragments)
