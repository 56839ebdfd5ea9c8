# Theory: predictions on each sweep's axes (depends on the config only, never on cells).
import attnrmt.sweep.store


rule theory:
    output:
        directory(f"{RESULTS}/{{sweep}}/theory.zarr"),
    params:
        config_sha256=sweep_config_sha256,
    log:
        f"{RESULTS}/logs/theory/{{sweep}}.log",
    run:
        attnrmt.sweep.store.write_theory(
            PLAN.sweeps[wildcards.sweep], output[0], PLAN.seed, log[0]
        )
