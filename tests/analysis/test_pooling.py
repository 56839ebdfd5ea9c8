"""Pooling ordering, real causal attention, downstream task and centring
(docs/model.md, "What the pipeline tests")."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from attnrmt.analysis.attention import (
    attention_weight_models,
    causal_verdict,
    causal_weights_table,
    relative_distance,
)
from attnrmt.analysis.centring import centring_table
from attnrmt.analysis.pipeline import ci_settings
from attnrmt.analysis.pooling import (
    downstream_ranking,
    downstream_table,
    ordering_table,
    pooling_table,
    spearman,
)
from attnrmt.model import causal_limit_weights, harmonic_weights
from attnrmt.sweep.spec.schema import with_defaults
from tests.analysis.synthetic import make_synthetic

P4 = {"p4": {"kind": "prefix", "L": 4}}
WEIGHTS = {"optimal": "optimal", "c1": {"kind": "causal_limit", "tau": 1.0}, "mean": "mean"}


def test_pooling_order_follows_alpha_over_kappa_for_prefix(ci) -> None:
    cells, _ = make_synthetic(
        d=(200,),
        snr=(1.0, 2.0),
        positional=P4,
        weights=WEIGHTS,
        replicates=4,
        variant="finite_vocab",
        noise=0.002,
    )
    pool = pooling_table("s", cells, **ci)
    assert {"alpha_over_kappa", "recovery", "recovery_ci_low", "recovery_ci_high"} <= set(pool)
    ak = pool.groupby("weights")["alpha_over_kappa"].mean()
    assert ak["optimal"] == pytest.approx(4.0)  # lambda_max of prefix(4) R
    assert ak["mean"] == pytest.approx(2.5)  # (8 + 12) / 8
    order = ordering_table(pool, ["optimal", "c1", "mean"])
    assert order["order_holds_alpha_kappa"].all()
    assert order["order_holds_recovery"].all()
    assert order["ranking_alpha_kappa"].iloc[0] == "optimal > c1 > mean"


def test_ordering_table_detects_a_reversal() -> None:
    pool = pd.DataFrame(
        {
            "sweep": "s",
            "positional": "mk",
            "snr": 1.0,
            "weights": ["optimal", "c1", "mean"],
            "alpha_over_kappa": [3.0, 2.0, 2.5],
            "recovery": [0.6, 0.3, 0.5],
            "recovery_ci_low": [0.55, 0.25, 0.45],
            "recovery_ci_high": [0.65, 0.35, 0.55],
        }
    )
    row = ordering_table(pool, ["optimal", "c1", "mean"]).iloc[0]
    assert not row["order_holds_alpha_kappa"] and not row["order_holds_recovery"]
    assert row["ranking_recovery"] == "optimal > mean > c1"


def test_relative_distance_is_scale_free() -> None:
    w = causal_limit_weights(8, 1.0)
    assert relative_distance(3 * w, w) == pytest.approx(0.0)
    assert relative_distance(harmonic_weights(8), w) > 0.05


def test_causal_attention_converges_to_causal_limit_in_synthetic_data(ci) -> None:
    models = {"att": {"kind": "causal_attention", "tau": 1.0}}
    assert attention_weight_models({**models, "c": {"kind": "causal_limit"}}) == {"att": 1.0}
    check_causal_convergence((0,), ci)
    cells, _ = make_synthetic(d=(50,), snr=(1.0,), positional=P4, weights=models, replicates=1)
    assert causal_weights_table("s", cells, {}, **ci).empty


def check_causal_convergence(seeds: tuple[int, ...], ci: dict | None = None) -> None:
    """The synthetic jitter of the attention weights is ~ d^(-1/2) (16 replicates per d)."""
    if ci is None:  # benchmarks/seed_groups.py calls without the fixture
        ci = ci_settings(with_defaults(None, "analysis"))
    for seed in seeds:
        causal_convergence(seed, ci)


def causal_convergence(seed: int, ci: dict) -> None:
    """Measured log-log slope over 100 seeds: -0.500 +- 0.045 (sd) with 16 replicates, range
    -0.60 to -0.38; the tolerance 0.15 is 3.3 sd. (With the 4 replicates this test had, the
    sd was 0.088 and 2 of 40 disjoint seeds failed.) Pass rate with 16 replicates over
    disjoint seeds (benchmarks/seed_groups.py): 40/40 (seeds 0-39). Breaking
    ``causal_verdict`` on purpose: fitting log10(d) against ln(distance) gives -1.15 and
    fails; an exponent off by 1.5x (-0.35) passes at this tolerance (catching it would need
    ~4x the replicates)."""
    models = {"att": {"kind": "causal_attention", "tau": 1.0}}
    cells, _ = make_synthetic(
        d=(50, 200, 800), snr=(1.0,), positional=P4, weights=models, replicates=16, seed=seed
    )
    table = causal_weights_table("s", cells, models, **ci)
    assert set(table["reference"]) == {"harmonic", "causal_limit"}
    limit = table[table["reference"] == "causal_limit"].sort_values("d")
    assert limit["distance"].is_monotonic_decreasing
    verdict = causal_verdict(table)
    assert set(verdict["closest_reference"]) == {"causal_limit"}
    slope = verdict.set_index("reference").loc["causal_limit", "loglog_slope_in_d"]
    assert slope == pytest.approx(-0.5, abs=0.15)  # synthetic jitter ~ d^(-1/2)


def test_spearman_known_values() -> None:
    assert spearman([1, 2, 3], [10, 20, 30]) == pytest.approx(1.0)
    assert spearman([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert np.isnan(spearman([1, 1, 1], [1, 2, 3]))
    assert np.isnan(spearman([1], [2]))


def test_downstream_accuracy_ranks_like_alpha_over_kappa(ci) -> None:
    label = {"lab": {"kind": "label", "rho0": 0.8, "L": 4}}
    cells, _ = make_synthetic(
        d=(100,),
        snr=(0.5,),
        positional={**label, "iid": {"kind": "iid"}},
        weights=WEIGHTS,
        replicates=4,
    )
    table = downstream_table("s", cells, **ci)
    assert set(table["positional"]) == {"lab"}  # only label models have an accuracy
    assert ((table["ci_low"] <= table["accuracy"]) & (table["accuracy"] <= table["ci_high"])).all()
    ranking = downstream_ranking(table)
    assert ranking["spearman"].iloc[0] == pytest.approx(1.0)


def test_centring_table_finds_the_mean_spike_on_top(small_synthetic) -> None:
    cells, theory = make_synthetic(
        d=(200,),
        snr=(0.5, 1.0),
        positional=P4,
        weights={"mean": "mean"},
        centered=(True, False),
        replicates=2,
        noise=0.001,
    )
    table = centring_table("s", cells, theory)
    assert len(table) == 2
    # mean pooling: theta_mean = T delta = 4 > theta_signal; the mean spike is on top
    assert (table["top_is_mean_fraction"] == 1.0).all()
    np.testing.assert_allclose(
        table["top_eigenvalue_uncentred"], table["mean_spike_theory"], rtol=0.01
    )
    assert (table["top_overlap_signal_centred"] > table["top_overlap_signal_uncentred"]).all()
    only_centred, th = small_synthetic
    assert centring_table("s", only_centred, th).empty


# disjoint seed groups: python -m benchmarks.seed_groups tests.analysis.test_pooling
SEED_GROUP_CHECKS = {"causal_convergence": (check_causal_convergence, (0,))}
