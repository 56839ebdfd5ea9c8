# attnrmt sweep pipeline (pipeline.md). Thin: config, validation, includes, rule all.
#
#   snakemake --cores all --workflow-profile profiles/default [--configfile my.yaml]
#
# A --configfile given on the command line REPLACES config.yaml (a config file is a
# complete experiment); --config key=value entries (e.g. the profiles' dask settings)
# are merged on top.
import sys

from snakemake.utils import min_version, validate

min_version("9.0")

if not workflow.overwrite_configfiles:

    configfile: "config.yaml"


from attnrmt.sweep.cli_types import restore_scalar_types
from attnrmt.sweep.config import ConfigError, apply_schema, check_config, load_schema

# --config / profile `config:` values arrive as strings (YAML BaseLoader): retype them.
restore_scalar_types(config, load_schema())

try:
    apply_schema(config)  # one readable line naming the key and value on a schema error
    validate(config, "workflow/schemas/config.schema.yaml")  # fills defaults in place
    check_config(config)  # semantics: names exist, L <= T, |r| < 1, realisable R, ...
except ConfigError as config_error:
    print(f"attnrmt: invalid configuration: {config_error}", file=sys.stderr)
    sys.exit(1)


include: "workflow/rules/common.smk"
include: "workflow/rules/simulate.smk"
include: "workflow/rules/theory.smk"
include: "workflow/rules/analyze.smk"
include: "workflow/rules/report.smk"


rule all:
    input:
        ALL_TARGETS,
    default_target: True


# Simulation and theory stores only (no analysis): `snakemake stores`.
rule stores:
    input:
        STORE_TARGETS,


onsuccess:
    shutdown_run_cluster(RESULTS, wait=False)


onerror:
    shutdown_run_cluster(RESULTS, wait=False)
    for line in store_finished_cells(PLAN, RESULTS):
        print(f"attnrmt: {line}", file=sys.stderr)
