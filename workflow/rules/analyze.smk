# Analysis: per sweep analysis.zarr (bulk fit, thresholds, finite size) and its tables
# (<sweep>/tables/*.csv), then the run's tables (comparison.csv, thresholds.csv, ...: the
# sweeps' concatenated). Each rule body is one library call; the analysis is imported there,
# not at parse time (docs/scaling.md, "Pipeline overhead"). Per sweep so that a change of
# one sweep redoes that sweep's products only (docs/architecture.md, "Only what changed is
# redrawn").
ANALYSIS_TABLES = list(TABLES)


rule analyze_sweep:
    input:
        cells=f"{RESULTS}/{{sweep}}/cells.zarr",
        theory=f"{RESULTS}/{{sweep}}/theory.zarr",
    output:
        directory(f"{RESULTS}/{{sweep}}/analysis.zarr"),
    params:
        settings=analysis_settings(),
    log:
        f"{RESULTS}/logs/analyze_sweep/{{sweep}}.log",
    run:
        import attnrmt.analysis.pipeline

        attnrmt.analysis.pipeline.analyze_sweep(
            input.cells, input.theory, output[0], params.settings, log[0]
        )


rule sweep_tables:
    input:
        cells=f"{RESULTS}/{{sweep}}/cells.zarr",
        theory=f"{RESULTS}/{{sweep}}/theory.zarr",
        analysis=f"{RESULTS}/{{sweep}}/analysis.zarr",
    output:
        **{name: f"{RESULTS}/{{sweep}}/tables/{name}.csv" for name in SWEEP_TABLES},
    params:
        settings=analysis_settings(),
        weight_models=lambda wildcards: sweep_weight_models(wildcards.sweep),
    log:
        f"{RESULTS}/logs/sweep_tables/{{sweep}}.log",
    run:
        import attnrmt.analysis.pipeline

        attnrmt.analysis.pipeline.write_sweep_tables(
            RESULTS,
            wildcards.sweep,
            {name: output[name] for name in SWEEP_TABLES},
            params.settings,
            params.weight_models,
            log[0],
        )


rule analysis_tables:
    input:
        expand(f"{RESULTS}/{{sweep}}/tables/{{name}}.csv", sweep=GATHERED_SWEEPS, name=SWEEP_TABLES),
    output:
        comparison=report_if_data(
            f"{RESULTS}/comparison.csv",
            caption="../report/comparison.rst",
            category="Tables",
            labels={"table": "comparison"},
        ),
        thresholds=report_if_data(
            f"{RESULTS}/thresholds.csv",
            caption="../report/thresholds.rst",
            category="Tables",
            labels={"table": "thresholds"},
        ),
        summary=report_if_data(
            f"{RESULTS}/summary.csv",
            caption="../report/summary.rst",
            category="Tables",
            labels={"table": "summary"},
        ),
        bulk=report_if_data(
            f"{RESULTS}/bulk.csv",
            caption="../report/bulk.rst",
            category="Tables",
            labels={"table": "bulk"},
        ),
        pooling=f"{RESULTS}/pooling.csv",
        pooling_order=report_if_data(
            f"{RESULTS}/pooling_order.csv",
            caption="../report/pooling_order.rst",
            category="Tables",
            labels={"table": "pooling_order"},
        ),
        causal=f"{RESULTS}/causal.csv",
        causal_verdict=report_if_data(
            f"{RESULTS}/causal_verdict.csv",
            caption="../report/causal_verdict.rst",
            category="Tables",
            labels={"table": "causal_verdict"},
        ),
        downstream=f"{RESULTS}/downstream.csv",
        downstream_ranking=report_if_data(
            f"{RESULTS}/downstream_ranking.csv",
            caption="../report/downstream_ranking.rst",
            category="Tables",
            labels={"table": "downstream_ranking"},
        ),
        centring=report_if_data(
            f"{RESULTS}/centring.csv",
            caption="../report/centring_table.rst",
            category="Tables",
            labels={"table": "centring"},
        ),
        # ---- K classes
        classes_thresholds=report_if_data(
            f"{RESULTS}/classes_thresholds.csv",
            caption="../report/classes_thresholds.rst",
            category="K classes",
            labels={"table": "classes_thresholds"},
        ),
        classes_spikes=report_if_data(
            f"{RESULTS}/classes_spikes.csv",
            caption="../report/classes_spikes_table.rst",
            category="K classes",
            labels={"table": "classes_spikes"},
        ),
        # ---- end K classes
        universality=report_if_data(
            f"{RESULTS}/universality.csv",
            caption="../report/universality_table.rst",
            category="Tables",
            labels={"table": "universality"},
        ),
        universality_verdict=report_if_data(
            f"{RESULTS}/universality_verdict.csv",
            caption="../report/universality_verdict.rst",
            category="Tables",
            labels={"table": "universality_verdict"},
        ),
    params:
        settings=analysis_settings(),
        sweeps=GATHERED_SWEEPS,
    log:
        f"{RESULTS}/logs/analysis_tables/tables.log",
    run:
        import attnrmt.analysis.pipeline

        attnrmt.analysis.pipeline.write_tables(
            RESULTS,
            params.sweeps,
            {name: output[name] for name in ANALYSIS_TABLES},
            params.settings,
            log[0],
        )
