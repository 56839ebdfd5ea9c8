# Shared helpers: the run plan (built once, at DAG time), paths and input functions.
# Rule files extend ALL_TARGETS with their final outputs.
import re
import sys

from attnrmt.sweep.blocks import block_params
from attnrmt.sweep.cluster import shutdown_run_cluster
from attnrmt.sweep.failures import describe_skipped, failed_blocks
from attnrmt.sweep.plan import plan_run
from attnrmt.sweep.table_writer import store_finished_cells

PLAN = plan_run(config)
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
# sweeps with a block to gather: the ones stored, analysed and reported
GATHERED_SWEEPS = [name for name in SWEEPS if len(BLOCKS[name]) > len(SKIPPED_BLOCKS[name])]
ALL_TARGETS = []  # final outputs of every stage (rule all)
STORE_TARGETS = []  # cells.zarr and theory.zarr of every sweep (rule stores)


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
