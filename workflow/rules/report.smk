# Report: figures declared with report() and captioned in report/*.rst (next to rules/), so that
# `snakemake --report results/<run>/report.html` collects them. One library call.
# The report opens on an overview (report/workflow.rst, plus the landing-page
# entries of attnrmt.sweep.report.summary.report_overview via profiles/default/report-metadata.yaml).
import os

import attnrmt.sweep.report.summary

FIGURE_FORMATS = list(config["analysis"]["figure_formats"])
os.environ[attnrmt.sweep.report.summary.RUN_DIR_VARIABLE] = RESULTS

report: "../report/workflow.rst"


# Each sweep's figures from its own stores and tables only (one rule per sweep, so that the
# report can leave out each sweep's placeholder figures): adding a point to one sweep
# redraws that sweep's figures only (docs/architecture.md, "Only what changed is redrawn").
for SWEEP in GATHERED_SWEEPS:

    rule:
        name:
            f"figures_{SWEEP}"
        input:
            stores=[sweep_path(SWEEP, f"{store}.zarr") for store in ("cells", "theory", "analysis")],
            tables=[sweep_path(SWEEP, f"tables/{name}.csv") for name in SWEEP_TABLES],
        output:
            **figure_outputs(sweep_path(SWEEP, "figures"), SWEEP_FIGURES, SWEEP),
        params:
            sweep=SWEEP,
            settings=analysis_settings(),
            weight_models=sweep_weight_models(SWEEP),
        log:
            f"{RESULTS}/logs/figures/{SWEEP}.log",
        run:
            import attnrmt.analysis.figures  # matplotlib: imported by the figure rules only

            attnrmt.analysis.figures.make_figures(
                RESULTS,
                params.sweep,
                sweep_path(params.sweep, "figures"),
                params.settings,
                params.weight_models,
                log[0],
            )


# The figures drawn from several sweeps (the run-wide universality.csv).
rule run_figures:
    input:
        f"{RESULTS}/universality.csv",
    output:
        **figure_outputs(f"{RESULTS}/figures", RUN_FIGURES, "all sweeps"),
    params:
        settings=analysis_settings(),
    log:
        f"{RESULTS}/logs/figures/run.log",
    run:
        import attnrmt.analysis.figures

        attnrmt.analysis.figures.make_run_figures(
            RESULTS, f"{RESULTS}/figures", params.settings, log[0]
        )


# How each CI narrowed round by round (a run whose sweeps state a target; the driver writes
# rounds/rounds.csv between rounds: docs/architecture.md, "Rounds").
rule rounds_figure:
    input:
        f"{RESULTS}/rounds/rounds.csv",
    output:
        report(f"{RESULTS}/figures/rounds.png", caption="../report/rounds.rst", category="Rounds"),
    log:
        f"{RESULTS}/logs/figures/rounds.log",
    run:
        import attnrmt.sweep.compute.rounds

        attnrmt.sweep.compute.rounds.rounds_figure(input[0], output[0], log[0])
