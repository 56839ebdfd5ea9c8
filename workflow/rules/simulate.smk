# Simulation: one job per block (a Dask client), then one gather per sweep.
import attnrmt.sweep.report.failed_cells
import attnrmt.sweep.store


rule simulate_block:
    output:
        f"{RESULTS}/{{sweep}}/fragments/{{block}}.npz",
    # No `params:` with the block's cells: Snakemake keeps every job's params for the whole
    # run (0.7 MB per block of 1000 tiny cells, 0.7 GB at 10^6); the output's name, the block
    # key, is already a content key of the root seed and the cells (attnrmt.sweep.spec.plan).
    log:
        f"{RESULTS}/logs/simulate_block/{{sweep}}/{{block}}.log",
    # A block job is a Dask client that waits on the run's cluster: it holds no core
    # (threads: 0), so the next blocks are already queued on the cluster while one is
    # writing its fragment. `dask_clients` (set in the profiles) bounds how many blocks
    # are in flight at once.
    threads: 0
    resources:
        dask_clients=1,
    run:
        simulate_block_job(wildcards, output[0], log[0], resources)


rule gather_cells:
    input:
        sweep_fragments,
    output:
        directory(f"{RESULTS}/{{sweep}}/cells.zarr"),
    params:
        config_sha256=sweep_config_sha256,
    log:
        f"{RESULTS}/logs/gather_cells/{{sweep}}.log",
    run:
        gather_sweep_cells(wildcards, input, output[0], log[0])




# Cells whose last attempt failed (empty when all finished). It runs after every block it
# waits for; with skip_failed the skipped blocks are not among them, so the table lists
# them beside the results of everything that finished.
rule failed_cells:
    input:
        gathered_fragments,
    output:
        report_if_data(
            f"{RESULTS}/failed_cells.csv",
            caption="../report/failed_cells.rst",
            category="Tables",
            labels={"table": "failed_cells"},
        ),
    params:
        skipped={sweep: sorted(keys) for sweep, keys in SKIPPED_BLOCKS.items()},
    log:
        f"{RESULTS}/logs/failed_cells.log",
    run:
        attnrmt.sweep.report.failed_cells.write_failed_cells_table(PLAN, RESULTS, output[0])
