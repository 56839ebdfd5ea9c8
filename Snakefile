# attnrmt sweep pipeline (docs/architecture.md). Thin: config, validation, includes, rule all.
#
#   snakemake [TARGET] --cores all [--configfile my.yaml]   (targets before --configfile)
#
# A --configfile given on the command line REPLACES config.yaml (a config file is a
# complete experiment); --config key=value entries (e.g. the profiles' dask settings)
# are merged on top.
import sys

from snakemake.utils import min_version

min_version("9.0")

if not workflow.overwrite_configfiles:

    configfile: "config.yaml"


from attnrmt.sweep.config import ConfigError, RunDirConflict, claim_run_dir, snakemake_config
from attnrmt.sweep.failures import mark_run_started
from attnrmt.sweep.runlock import claim_directory

# The one validation (schema + defaults + semantics; attnrmt.sweep.config): every problem
# on its own line, `config` replaced by the filled config, VALID.sweeps reused by the plan.
try:
    VALID = snakemake_config(config, workflow.configfiles)
    CONFIG_FILE = workflow.configfiles[-1] if workflow.configfiles else "config.yaml"
    claim_run_dir(f"results/{config['run']}", CONFIG_FILE, write=False)
except RunDirConflict as conflict:
    print(f"attnrmt: {conflict}", file=sys.stderr)
    sys.exit(1)
except ConfigError as config_error:
    for problem in config_error.problems:
        print(f"attnrmt: invalid configuration: {problem}", file=sys.stderr)
    sys.exit(1)
for warning in VALID.warnings:
    print(f"attnrmt: warning: {warning}", file=sys.stderr)


# A SIGKILLed run's Snakemake lock is removed when no live Snakemake works here.
if workflow.is_main_process:
    claim_directory()


include: "workflow/rules/common.smk"
include: "workflow/rules/simulate.smk"
include: "workflow/rules/theory.smk"
include: "workflow/rules/analyze.smk"
include: "workflow/rules/report.smk"


rule all:
    input:
        get_final_output(),
    default_target: True


# Simulation and theory stores only (no analysis): `snakemake stores`.
rule stores:
    input:
        get_store_output(),


# The run folder records its config file (results/<run>/.attnrmt-run.json) when a run
# starts (not on -n or --report); a run of another config file with the same run name is
# refused above.
onstart:
    claim_run_dir(RESULTS, CONFIG_FILE)
    mark_run_started(RESULTS)  # failure records older than this do not count (max_failures)
    # SIGINT/SIGTERM stop the run's cluster work within seconds; a run still alive 30 s
    # later exits after releasing its own directory locks
    stop_on_signals(release_locks=workflow.persistence.unlock,
                    batch_workers=ClusterSettings.from_config(config.get("dask")).is_jobqueue)
    start_block_job_watch(workflow)  # profiles/slurm: a block job SLURM never runs stops the run


onsuccess:
    shutdown_run_cluster(RESULTS, wait=False)
    print_end_summary()
    skip_exit_collection()


onerror:
    shutdown_run_cluster(RESULTS, wait=False)
    print_max_failures_message()
    for line in store_finished_cells(PLAN, RESULTS):
        print(f"attnrmt: {line}", file=sys.stderr)
    skip_exit_collection()
