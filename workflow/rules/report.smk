# Report: figures declared with report() and captioned in workflow/report/*.rst, so that
# `snakemake --report results/<run>/report.html` collects them. One library call.
# The report opens on an overview (workflow/report/workflow.rst, plus the landing-page
# entries of attnrmt.summary.report_overview via profiles/default/report-metadata.yaml).
import os

import attnrmt.summary

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
}
os.environ[attnrmt.summary.RUN_DIR_VARIABLE] = RESULTS

report: "../report/workflow.rst"


def figure_outputs():
    """One report() output per figure (PNG, shown in the report) plus the other formats."""
    outputs = {}
    for name in REPORT_FIGURES:
        outputs[name] = report_if_data(
            f"{RESULTS}/figures/{name}.png",
            f"{RESULTS}/{FIGURE_TABLES[name]}.csv",
            caption=f"../report/{name}.rst",
            category="Figures",
            labels={"figure": name},
        )
        for fmt in FIGURE_FORMATS:
            if fmt != "png":
                outputs[f"{name}_{fmt}"] = f"{RESULTS}/figures/{name}.{fmt}"
    return outputs


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
