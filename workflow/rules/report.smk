# Report: figures declared with report() and captioned in report/*.rst (next to rules/), so that
# `snakemake --report results/<run>/report.html` collects them. One library call.
# The report opens on an overview (report/workflow.rst, plus the landing-page
# entries of attnrmt.sweep.report.summary.report_overview via profiles/default/report-metadata.yaml).
import os

import attnrmt.sweep.report.summary

REPORT_FIGURES = list(FIGURES)
FIGURE_FORMATS = list(config["analysis"]["figure_formats"])
# The table each figure draws: a figure whose table has no data is a placeholder, left out.
FIGURE_TABLES = {
    "spectra": "bulk",
    "outlier_vs_snr": "comparison",
    "phase_diagram": "thresholds",
    "pooling": "pooling",
    "causal_weights": "causal",
    "downstream": "downstream",
    "finite_size": "thresholds",
    "centring": "centring",
    "classes_spikes": "classes_spikes",  # K classes
    "universality": "universality",
}
os.environ[attnrmt.sweep.report.summary.RUN_DIR_VARIABLE] = RESULTS

report: "../report/workflow.rst"


rule figures:
    input:
        tables=expand(f"{RESULTS}/{{name}}.csv", name=ANALYSIS_TABLES),
        analysis=expand(f"{RESULTS}/{{sweep}}/analysis.zarr", sweep=GATHERED_SWEEPS),
    output:
        **figure_outputs(),
    params:
        settings=config.get("analysis", {}),
        weight_models=config.get("weight_models", {}),
        sweeps=GATHERED_SWEEPS,
    log:
        f"{RESULTS}/logs/figures/figures.log",
    run:
        import attnrmt.analysis.figures  # matplotlib: imported by this rule only

        attnrmt.analysis.figures.make_figures(
            RESULTS,
            params.sweeps,
            f"{RESULTS}/figures",
            params.settings,
            params.weight_models,
            log[0],
        )
