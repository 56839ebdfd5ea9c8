"""snr axes placed by the theory (attnrmt.sweep.spec.placed; docs/getting-started.md,
"snr placed by the theory"): the placed grid is the theory's thresholds times the span,
a threshold <= 0 gets the one point below, and a bad spec is named with its key."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from attnrmt.contract import TRANSITIONS, VARIANTS
from attnrmt.sweep import ConfigError, plan_run
from attnrmt.sweep.spec.config import load_valid_config, validate_config
from attnrmt.sweep.spec.placed import place_points
from attnrmt.theory.predict import predict_point

MARKOV = {"kind": "markov", "r": 0.5}
SPAN = [0.5, 2.5]


def placed_config(positional: str = "iid", **snr: Any) -> dict[str, Any]:
    spec = {"around": list(TRANSITIONS), "span": SPAN, "points": 12, **snr}
    return {
        "run": "placed",
        "positional_models": {"mk5": MARKOV},
        "sweeps": {"s": {"d": [100, 200], "positional": positional, "snr": spec}},
    }


def theory_thresholds(positional: Any) -> list[float]:
    """Both transitions' thresholds of both variants at delta = gamma = 0.5, T = 8, mean."""
    point = predict_point(0.5, 0.5, 1.0, 8, positional, "mean", True, VARIANTS)
    return [
        float(point[f"threshold_snr_{transition}"].sel(variant=variant))
        for variant in VARIANTS
        for transition in TRANSITIONS
    ]


def test_placed_grid_is_thresholds_times_span() -> None:
    thresholds = theory_thresholds("iid")  # all > 0: paper 1.21, 1.78; finite_vocab 0.71, 1.28
    assert min(thresholds) > 0
    valid = validate_config(placed_config())
    snr = valid.sweeps["s"].axes["snr"]
    expected = np.linspace(SPAN[0] * min(thresholds), SPAN[1] * max(thresholds), 12)
    # 12 significant digits: the axis normalisation (docs/architecture.md, "Cell identity")
    np.testing.assert_allclose(snr, expected, rtol=1e-11, atol=0)
    assert valid.config["sweeps"]["s"]["snr"] == snr  # the filled config holds the values
    assert sorted(valid.sweeps["s"].snr_placed["thresholds"].values()) == sorted(thresholds)
    assert plan_run(valid.config, valid.sweeps).sweeps["s"].axes["snr"] == snr


def test_threshold_at_or_below_zero_gets_one_point_below() -> None:
    thresholds = theory_thresholds(MARKOV)  # finite_vocab population -0.018
    positive = [t for t in thresholds if t > 0]
    assert len(positive) == 3
    snr = validate_config(placed_config("mk5")).sweeps["s"].axes["snr"]
    assert snr[0] == 0.0 and len(snr) == 12
    expected = np.linspace(SPAN[0] * min(positive), SPAN[1] * max(positive), 11)
    np.testing.assert_allclose(snr[1:], expected, rtol=1e-11, atol=0)


def test_place_points_needs_a_positive_threshold() -> None:
    with pytest.raises(ValueError, match="no predicted threshold > 0"):
        place_points([-0.1, 0.0], SPAN, 4)
    assert place_points([1.0], [0.5, 2.0], 4) == [0.5, 1.0, 1.5, 2.0]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"around": ["pop"]}, "sweeps.s.snr.around[0]='pop'"),
        ({"span": [2.0, 0.5]}, "sweeps.s.snr.span=[2.0, 0.5]: must be [low, high]"),
        ({"points": 1}, "sweeps.s.snr.points=1: must be >= 2"),
        ({"num": 3}, "sweeps.s.snr: unknown key 'num'"),
    ],
)
def test_bad_placed_spec_names_key_and_value(change: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as error:
        validate_config(placed_config(**change))
    assert message in str(error.value)


def test_placed_axis_needs_one_setting() -> None:
    config = placed_config()
    config["sweeps"]["s"]["weights"] = ["mean", "last"]
    with pytest.raises(ConfigError, match=r"sweeps\.s\.weights=\['mean', 'last'\]: .* one setting"):
        validate_config(config)


def test_plan_shows_placed_points(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from attnrmt import cli

    config = tmp_path / "placed.yaml"
    config.write_text(yaml.safe_dump(placed_config("mk5")), encoding="utf-8")
    args = ["plan", str(config), "--results", str(tmp_path), "--no-calibrate"]
    assert cli.main(args) == 0
    out = capsys.readouterr().out
    snr = validate_config(placed_config("mk5")).sweeps["s"].axes["snr"]
    assert "s: snr placed at 0.5-2.5 x thresholds (paper population 0.4825" in out
    assert ", ".join(f"{value:.4g}" for value in snr) in out
    assert cli.main([*args, "--json"]) == 0
    row = json.loads(capsys.readouterr().out)["sweeps"][0]
    assert row["snr_placed"]["snr"] == snr and row["snr_placed"]["span"] == SPAN


#: The hand-placed range (first, last snr) of each sweep of the finite-size study's design
#: (docs/thresholds.md, "Design of the study").
HAND_RANGES = {
    "fss_iid_mean": (0.55, 3.0),
    "fss_markov_mean": (0.0, 1.1),
    "fss_label_optimal": (0.3, 2.3),
}


def test_placed_finite_size_config_spans_the_hand_design() -> None:
    """configs/finite-size-placed.yaml places each sweep's axis over the hand-placed
    design's range within 0.15 snr at each end (a tenth of the narrowest range)."""
    configs = Path(__file__).resolve().parents[3] / "configs"
    placed = load_valid_config(configs / "finite-size-placed.yaml").sweeps
    assert set(placed) == set(HAND_RANGES)
    for name, (first, last) in HAND_RANGES.items():
        snr = placed[name].axes["snr"]
        assert placed[name].snr_placed is not None and len(snr) == 15
        assert abs(snr[0] - first) <= 0.15 and abs(snr[-1] - last) <= 0.15
