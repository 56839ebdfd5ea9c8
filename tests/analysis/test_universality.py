"""The universality verdict (attnrmt.analysis.universality) on planted data: laws drawn
from the Gaussian cells' own law are called within Monte-Carlo error, laws with a planted
shift are called different, at the planted quantity and d only; the tests it combines
match scipy's on raw samples."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from attnrmt.analysis.universality import (
    INPUT_COLUMNS,
    fisher_combined,
    threshold_p_values,
    universality_inputs,
    universality_table,
    universality_verdict,
    welch_p_values,
)
from attnrmt.sweep.spec.schema import with_defaults
from tests.analysis.synthetic import make_synthetic

SEM = 0.01
N = 10
SNR = np.linspace(0.5, 3.0, 10)
D = (100, 200)
LAWS = {  # sweep -> (kind, parameter, fourth moment, planted shift in SEMs at d = 200)
    "gauss": ("gaussian", np.nan, 3.0, 0.0),
    "signs": ("rademacher", np.nan, 1.0, 0.0),
    "t10": ("student_t", 10.0, 4.0, 0.0),
    "t5": ("student_t", 5.0, 9.0, 6.0),
    "t3": ("student_t", 3.0, np.inf, 30.0),
}


def _inputs(seed: int = 5) -> pd.DataFrame:
    """sample_outlier rows: every sweep's replicate means are N(truth, SEM^2), a law's
    truth moved by its planted shift x SEM x sqrt(2) at d = 200 only."""
    rng = np.random.default_rng(seed)
    rows = []
    for sweep, (kind, parameter, m4, shift) in LAWS.items():
        for d in D:
            truth = 1.0 + SNR + 0.02 * (d == 100)
            planted = shift * SEM * np.sqrt(2) * (d == 200)
            for snr, mean in zip(
                SNR, truth + planted + SEM * rng.standard_normal(SNR.size), strict=True
            ):
                rows.append(
                    {
                        "sweep": sweep, "law": sweep, "kind": kind, "parameter": parameter,
                        "fourth_moment": m4, "quantity": "sample_outlier", "empirical": mean,
                        "empirical_sem": SEM * rng.uniform(0.8, 1.2), "n": N,
                        "low": np.nan, "high": np.nan, "theory": 1.0 + snr, "d": d,
                        "delta": 0.5, "gamma": 0.5, "T": 8, "positional": "iid",
                        "weights": "mean", "snr": snr, "centered": True,
                    }
                )  # fmt: skip
    return pd.DataFrame(rows, columns=list(INPUT_COLUMNS))


def test_planted_shifts_are_found_where_planted() -> None:
    table = universality_table(_inputs())
    assert set(table["sweep"]) == {"signs", "t10", "t5", "t3"}  # the reference is not a law
    consistent = table.set_index(["sweep", "d"])["consistent"]
    # seed 5 (measured): p-values of the unshifted tests 0.36 .. 0.88 (a false "differs"
    # has probability <= 0.01 per law by construction); the shift of 6 combined SEMs at 10
    # points gives p = 1e-41 (t5) and the shift of 30 p = 6e-146 (t3), against alpha = 0.005
    assert consistent.to_dict() == {
        ("signs", 100): True, ("signs", 200): True, ("t10", 100): True, ("t10", 200): True,
        ("t5", 100): True, ("t5", 200): False, ("t3", 100): True, ("t3", 200): False,
    }  # fmt: skip
    assert (table["alpha"] == 0.01 / 2).all()  # Bonferroni over the law's two tests
    t5 = table[(table["sweep"] == "t5") & (table["d"] == 200)].iloc[0]
    assert t5["max_abs_z"] > 6.0  # planted 6 combined SEMs (plus noise)
    # errors against the theory: the planted shift, on top of the Gaussian cells' own
    assert t5["mean_abs_error"] == pytest.approx(6 * SEM * np.sqrt(2), abs=0.01)
    assert t5["gaussian_mean_abs_error"] < 2 * SEM

    verdict = universality_verdict(table).set_index("sweep")
    assert verdict.loc["signs", "verdict"] == "within Monte-Carlo error of the Gaussian theory"
    assert verdict.loc["t5", "verdict"] == "differs from the Gaussian theory"
    assert verdict.loc["t5", "differs"].startswith("sample_outlier@d=200 (p=")
    assert verdict.loc["t5", "at_largest_d"] == "d=200: sample_outlier"
    assert verdict.loc["signs", "at_largest_d"] == "d=200: within"
    # the end summary prints the verdicts as computed here, one line per law and family
    from attnrmt.sweep.report.summary import universality_lines

    lines = universality_lines(verdict.reset_index())
    assert lines[0] == "  signs  within Monte-Carlo error of the Gaussian theory (d=200: within)"
    assert lines[-1] == "  " + verdict.loc["t5", "family"] and len(lines) == 5
    assert verdict.loc["t10", "family"] == (
        "student_t (nu): within Monte-Carlo error for nu >= 10; differs from nu <= 5"
    )


def test_false_alarm_rate_is_at_most_the_family_level() -> None:
    """40 planted-null data sets: the two laws drawn like the Gaussian cells are called
    "differs" in at most ~1% of them (2 laws x 40 sets: binomial(80, 0.01) exceeds 4 with
    probability 0.0013). Measured: 0 false alarms in 2 x 200 sets (the Welch tests are
    conservative here: 2.5% of the per-(law, d) p-values below 0.05)."""
    false_alarms = 0
    for seed in range(40):
        inputs = _inputs(seed)
        null = inputs[inputs["sweep"].isin(["gauss", "signs", "t10"])]
        table = universality_table(null)
        false_alarms += int((~table.groupby("sweep")["consistent"].all()).sum())
    assert false_alarms <= 4


def test_no_gaussian_sweep_gives_no_rows() -> None:
    inputs = _inputs()
    assert universality_table(inputs[inputs["kind"] != "gaussian"]).empty
    assert universality_verdict(universality_table(inputs.iloc[:0])).empty


def test_welch_p_values_match_scipy_on_raw_samples() -> None:
    rng = np.random.default_rng(0)
    a, b = rng.normal(0.0, 1.0, 9), rng.normal(0.7, 2.0, 14)
    expected = stats.ttest_ind(a, b, equal_var=False).pvalue
    got = welch_p_values(
        a.mean(), a.std(ddof=1) / 3.0, 9, b.mean(), b.std(ddof=1) / np.sqrt(14), 14
    )
    assert float(got) == pytest.approx(expected, rel=1e-12)
    assert np.isnan(welch_p_values(1.0, 0.0, 5, 1.0, 0.0, 5))


def test_fisher_and_threshold_tests() -> None:
    assert fisher_combined(np.array([0.5])) == pytest.approx(0.5)
    assert fisher_combined(np.array([np.nan, 0.04, 0.04])) == pytest.approx(
        stats.combine_pvalues([0.04, 0.04], method="fisher").pvalue
    )
    assert np.isnan(fisher_combined(np.array([np.nan])))
    law = pd.DataFrame({"empirical": [1.0, np.nan, np.nan], "low": [0.9, -np.inf, -np.inf],
                        "high": [1.1, 0.5, 1.0]})  # fmt: skip
    gaussian = pd.DataFrame({"empirical": [1.0, 0.7, 0.7], "low": [0.6, 0.6, 0.6],
                             "high": [0.8, 0.8, 0.8]})  # fmt: skip
    p, z = threshold_p_values(law, gaussian)
    # equal estimates: z = 0, p = 1; a bound below 0.5 excludes [0.6, 0.8]: p = 0;
    # a bound below 1.0 overlaps it: p = 1 (no z for a bound)
    assert p.tolist() == [1.0, 0.0, 1.0] and z[0] == 0.0 and np.isnan(z[1:]).all()


def test_through_the_analysis_of_real_shaped_stores() -> None:
    """Synthetic stores (attnrmt.analysis.synthetic) through sweep_tables and
    across_sweep_tables, as write_tables runs them: a law whose cells are drawn like the
    Gaussian ones (another seed) keeps its outliers and overlaps within Monte-Carlo error;
    one whose spikes follow the paper variant instead differs in its outliers."""
    import json

    from attnrmt.analysis.pipeline import across_sweep_tables, analysis_dataset, sweep_tables

    grid = dict(d=(100,), snr=tuple(np.linspace(0.6, 3.0, 7)), replicates=6)
    laws = {
        "gauss": ({"kind": "gaussian"}, dict(seed=0)),
        "same": ({"kind": "rademacher"}, dict(seed=1)),
        "off": ({"kind": "sparse", "p": 0.1}, dict(seed=2, variant="paper")),
    }
    inputs = []
    for sweep, (law, options) in laws.items():
        cells, theory = make_synthetic(**grid, **options)
        cells.attrs.update(table_name=sweep, table_law=json.dumps(law), replicates=6)
        analysis = analysis_dataset(cells, theory, with_defaults({"bootstrap": 20}, "analysis"))
        tables = sweep_tables(
            sweep, cells, theory, analysis, with_defaults({"bootstrap": 20}, "analysis")
        )
        inputs.append(
            universality_inputs(
                sweep, cells.attrs, tables["comparison"], tables["thresholds"], analysis
            )
        )
    tables = across_sweep_tables(inputs, with_defaults({"bootstrap": 20}, "analysis"))
    table = tables["universality"].set_index(["law", "quantity", "d"]).sort_index()
    assert set(table.index.get_level_values("law")) == {"same", "off"}
    assert table.loc[("off", "sample_outlier"), "consistent"].eq(False).all()
    for quantity in ("population_outlier", "sample_outlier", "sample_overlap"):
        assert table.loc[("same", quantity), "consistent"].eq(True).all(), quantity
    verdict = tables["universality_verdict"].set_index("law")
    assert verdict.loc["off", "verdict"] == "differs from the Gaussian theory"
    assert "sample_outlier@d=100" in verdict.loc["off", "differs"]
    assert verdict.loc["off", "family"].startswith("sparse (p): differs from p <= 0.1")


def _along_table(datasets: dict[str, Any]) -> Any:
    """Synthetic stores of one grid as one store with the ``table`` dimension after
    ``weights`` (docs/data-contract.md, "Table laws"), as a sweep with ``table: [...]``
    stores them."""
    import xarray as xr

    from attnrmt.contract import ALL_AXES

    joined = xr.concat(
        [ds.expand_dims(table=[name]) for name, ds in datasets.items()],
        dim="table",
        data_vars="minimal",
        coords="minimal",
        compat="override",
        join="override",
    )
    order = [*ALL_AXES, "variant"]
    return joined.transpose(
        *sorted(joined.dims, key=lambda dim: order.index(dim) if dim in order else len(order))
    )


def test_laws_along_the_table_dimension_of_one_sweep() -> None:
    """One sweep whose ``table`` axis holds the three laws of the test above: the same
    verdicts, every law compared with the ``gaussian`` cells of its own sweep, one row per
    (law, quantity, d) with the sweep's name. Broken on purpose (scratch edit): the law of
    each row taken from the sweep's first law instead of its ``table`` coordinate made
    every input row "gaussian", and this test failed on the inputs' laws; one bootstrap
    stream for the whole sweep (instead of one per law) failed on the CI bounds."""
    import json

    from attnrmt.analysis.pipeline import across_sweep_tables, analysis_dataset, sweep_tables

    grid = dict(d=(100,), snr=tuple(np.linspace(0.6, 3.0, 7)), replicates=6)
    laws = {
        "gaussian": ({"kind": "gaussian"}, dict(seed=0)),
        "same": ({"kind": "rademacher"}, dict(seed=1)),
        "off": ({"kind": "sparse", "p": 0.1}, dict(seed=2, variant="paper")),
    }
    made = {name: make_synthetic(**grid, **options) for name, (_, options) in laws.items()}
    cells = _along_table({name: pair[0] for name, pair in made.items()})
    theory = _along_table({name: pair[1] for name, pair in made.items()})
    summary = {"table": {name: law for name, (law, _) in laws.items()}}
    cells.attrs.update(model_summary=json.dumps(summary), replicates=6)
    assert (
        cells["top_eigenvalues"].dims.index("table")
        == cells["top_eigenvalues"].dims.index("weights") + 1
    )
    analysis = analysis_dataset(cells, theory, with_defaults({"bootstrap": 20}, "analysis"))
    assert "table" in analysis["bulk_ks"].dims
    # each law's bootstrap resamples are those of a one-law sweep (one stream per law)
    alone = analysis_dataset(*made["same"], with_defaults({"bootstrap": 20}, "analysis"))
    for name in ("threshold_ci_low", "threshold_ci_high", "threshold_estimate"):
        np.testing.assert_array_equal(
            analysis[name].sel(table="same").values, alone[name].values, err_msg=name
        )
    tables = sweep_tables(
        "laws", cells, theory, analysis, with_defaults({"bootstrap": 20}, "analysis")
    )
    assert set(tables["comparison"]["table"]) == set(laws)
    inputs = universality_inputs(
        "laws", cells.attrs, tables["comparison"], tables["thresholds"], analysis
    )
    assert set(inputs["law"]) == set(laws) and "table" not in inputs
    tables = across_sweep_tables([inputs], with_defaults({"bootstrap": 20}, "analysis"))
    table = tables["universality"].set_index(["law", "quantity", "d"]).sort_index()
    assert set(table.index.get_level_values("law")) == {"same", "off"}
    assert set(tables["universality"]["sweep"]) == {"laws"}
    assert table.loc[("off", "sample_outlier"), "consistent"].eq(False).all()
    for quantity in ("population_outlier", "sample_outlier", "sample_overlap"):
        assert table.loc[("same", quantity), "consistent"].eq(True).all(), quantity
    verdict = tables["universality_verdict"].set_index("law")
    assert verdict.loc["off", "verdict"] == "differs from the Gaussian theory"
    assert verdict.loc["same", "verdict"] == "within Monte-Carlo error of the Gaussian theory"
