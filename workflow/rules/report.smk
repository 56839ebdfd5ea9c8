# Report: figures declared with report() and captioned in workflow/report/*.rst, so that
# `snakemake --report results/<run>/report.html` collects them. One library call.
import attnrmt.analysis.figures

REPORT_FIGURES = list(attnrmt.analysis.figures.FIGURES)
FIGURE_FORMATS = list(config.get("analysis", {}).get("figure_formats", ["png", "pdf"]))


def figure_outputs():
    """One report() output per figure (PNG, shown in the report) plus the other formats."""
    outputs = {}
    for name in REPORT_FIGURES:
        outputs[name] = report(
            f"{RESULTS}/figures/{name}.png",
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
        attnrmt.analysis.figures.make_figures(
            RESULTS,
            params.sweeps,
            f"{RESULTS}/figures",
            params.settings,
            params.weight_models,
            log[0],
        )
