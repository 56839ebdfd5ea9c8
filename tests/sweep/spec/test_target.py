"""Precision targets (attnrmt.sweep.spec.target) and their rounds (attnrmt.sweep.compute.rounds;
docs/architecture.md, "Rounds"): validation names key and value, the next design follows
the 1/sqrt(R) law, the snr rules and the budget, and a round's files resume a run."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml

from attnrmt.cli import status_plan
from attnrmt.sweep import ConfigError
from attnrmt.sweep.compute import rounds
from attnrmt.sweep.spec.config import load_valid_config, validate_config
from attnrmt.sweep.spec.target import SAFETY, Target, distance, next_design, replicates_per_d

CONFIG: dict[str, Any] = {
    "run": "aim",
    "sweeps": {
        "s": {
            "d": [40],
            "snr": [0.0, 1.0, 2.0, 3.0],
            "replicates": 2,
            "target": {"threshold_halfwidth": 0.1, "budget_cpu_hours": 1.0},
        }
    },
}
BOTH = ("population", "sample")
TARGET = Target(dict.fromkeys(BOTH, 0.1), dict.fromkeys(BOTH, False), 1.0, BOTH, 4.0)


def row(halfwidth: float, estimate: float = 1.0, bound: str = "none", n: int = 3) -> dict:
    low, high = estimate - halfwidth, estimate + halfwidth
    out = {"estimate": estimate, "ci_low": low, "ci_high": high, "bound": bound, "n_detected": n}
    return out | {"transition": "sample"}


def cells(replicates: list[int], snr: Any) -> float:
    return sum(replicates) * len(snr)  # one CPU second a cell


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ({"threshold_halfwidth": 0}, "sweeps.s.target.threshold_halfwidth=0: must be > 0"),
        (
            {"threshold_halfwidth": 1.5, "relative": True},
            "sweeps.s.target.threshold_halfwidth=1.5: a relative half-width",
        ),
        ({"threshold_halfwidth": 0.1, "budget_cpu_hours": -1}, "budget_cpu_hours=-1"),
        ({"threshold_halfwidth": 0.1, "transitions": ["pop"]}, "sweeps.s.target.transitions"),
        ({"threshold_halfwidth": 0.1, "replicates": 3}, "unknown key 'replicates'"),
        (
            {"threshold_halfwidth": {"sample": 0.1}},
            "sweeps.s.target.threshold_halfwidth={'sample': 0.1}: must give every transition",
        ),
    ],
)
def test_a_bad_target_is_named_with_key_and_value(target: dict, message: str) -> None:
    config = copy.deepcopy(CONFIG)
    config["sweeps"]["s"]["target"] = target
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace(".", r"\.")):
        validate_config(config)


def test_replicates_follow_the_inverse_square_root_law() -> None:
    design = next_design(TARGET, [4], [0.0, 1.0, 2.0, 3.0], [row(0.15, n=4)], cells, 0.0)
    assert design == ([int(-(-4 * 1.5**2 * SAFETY // 1))], [0.0, 1.0, 2.0, 3.0])  # 11
    capped = next_design(TARGET, [4], [0.0, 1.0, 2.0, 3.0], [row(1.0, n=4)], cells, 0.0)
    assert capped is not None and capped[0] == [16]  # max_growth 4


def test_a_met_target_asks_for_nothing() -> None:
    rows = [row(0.099), row(0.05)]
    assert max(distance(TARGET, r) for r in rows) == pytest.approx(0.99)
    assert next_design(TARGET, [4], [0.0, 1.0, 2.0], rows, cells, 0.0) is None


def test_bounds_and_thin_lines_get_snr_points() -> None:
    snr = [1.0, 2.0, 3.0]
    below = {**row(0.0), "bound": "below"}
    above = {**row(0.0), "bound": "above"}
    assert next_design(TARGET, [2], snr, [below], cells, 0.0) == ([2], [0.0, 1.0, 2.0, 3.0])
    assert next_design(TARGET, [2], snr, [above], cells, 0.0) == ([2], [1.0, 2.0, 3.0, 4.0])
    thin = {**row(0.05, estimate=1.2), "n_detected": 2}  # met, but in another row: far
    far = {**row(0.3, estimate=1.1), "n_detected": 2}
    design = next_design(TARGET, [2], snr, [thin, far], cells, 0.0)
    assert design is not None and design[1] == [1.0, 1.5, 2.0, 2.5, 3.0]
    extrapolated = {**row(0.3, estimate=1.0), "n_detected": 3}  # lowest detected: 3.0
    design = next_design(TARGET, [2], [0.0, 1.0, 3.0, 4.0, 5.0], [extrapolated], cells, 0.0)
    assert design is not None and design[1] == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]


def test_the_budget_caps_the_round() -> None:
    target = Target({"sample": 0.1}, {"sample": False}, 10 / 3600, ("sample",), 4.0)  # 10 s
    snr = [0.0, 1.0]
    assert next_design(target, [2], snr, [row(1.0, n=2)], cells, 4.0) == ([5], snr)  # 6 s left
    assert next_design(target, [2], snr, [row(1.0, n=2)], cells, 10.0) is None


def thresholds_csv(run_dir: Path, halfwidth: float) -> None:
    frame = pd.DataFrame(
        [
            {"sweep": "s", "transition": t, "d": 40, "finite_size": "none", "bound": "none"}
            | {"estimate": 1.0, "ci_low": 1 - halfwidth, "ci_high": 1 + halfwidth}
            | {"n_detected": 3, "positional": "iid", "weights": "mean"}
            for t in ("population", "sample")
        ]
    )
    run_dir.mkdir(parents=True, exist_ok=True)
    frame.to_csv(run_dir / "thresholds.csv", index=False)


def test_rounds_advance_resume_and_stop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("aim.yaml").write_text(yaml.safe_dump(CONFIG))
    run_dir = tmp_path / "results" / "aim"
    n, path = rounds.current_round(run_dir, "aim.yaml", "aim")
    valid = load_valid_config(path)
    targets = rounds.targeted(valid)
    assert (n, path.name, list(targets)) == (0, "round-0.yaml", ["s"])

    thresholds_csv(run_dir, 0.2)
    rounds.advance(run_dir, 0, valid, targets)
    following = rounds.advance(run_dir, 0, valid, targets)  # a resumed round 0: its rows again
    assert following is not None and following.name == "round-1.yaml"
    assert load_valid_config(following).sweeps["s"].replicates == 4  # 2 x min(2^2, max_growth 2)
    assert rounds.current_round(run_dir, "aim.yaml", "aim") == (1, following)  # resumed
    assert status_plan("aim.yaml", "results")[0].sweeps["s"].n_cells == 4 * 4  # round 1's

    thresholds_csv(run_dir, 0.05)  # round 1 met every target: no round 2
    assert rounds.advance(run_dir, 1, load_valid_config(following), targets) is None
    table = pd.read_csv(run_dir / "rounds" / "rounds.csv")
    assert table["round"].tolist() == [0, 0, 1, 1]
    assert table["next"].tolist()[-1] == "met"
    log = tmp_path / "rounds.log"
    figure = rounds.rounds_figure(run_dir / "rounds" / "rounds.csv", tmp_path / "rounds.png", log)
    assert "4 rows" in log.read_text()  # the rule's log names what was drawn
    lines = figure.axes[0].get_lines()  # one per target (rounds 0 and 1), then the goal
    assert [list(line.get_xdata()) for line in lines[:2]] == [[0, 1], [0, 1]] and len(lines) == 3
    assert rounds.round_status_lines(run_dir)[:2] == [
        f"round: 1 ({following})",
        "targets after round 1 (half-width / goal):",
    ]

    edited = copy.deepcopy(CONFIG)  # another target: the rounds start again from round 0
    edited["sweeps"]["s"]["target"]["threshold_halfwidth"] = 0.01
    Path("aim.yaml").write_text(yaml.safe_dump(edited))
    assert rounds.current_round(run_dir, "aim.yaml", "aim")[0] == 0
    assert not following.exists()


def test_a_target_per_transition() -> None:
    config = copy.deepcopy(CONFIG)
    config["sweeps"]["s"]["target"] = {
        "threshold_halfwidth": {"population": 0.025, "sample": 0.05},
        "relative": {"population": False, "sample": True},
    }
    target = rounds.targeted(validate_config(config))["s"]
    near_zero = {**row(0.02, estimate=-0.02), "transition": "population"}
    assert distance(target, near_zero) == pytest.approx(0.8)  # 0.02 / 0.025
    assert distance(target, row(0.02, estimate=0.2)) == pytest.approx(2.0)  # 0.02 / (5% x 0.2)


def test_replicates_per_d_buy_the_limit_at_the_least_price() -> None:
    # shares 1, 1 at 10 replicates, a replicate at the second d costing 4x: the variance
    # 0.2 must fall 4x (distance 2) to 0.05; Lagrange gives 60 and 30 (price 180, variance
    # 10/60 + 10/30 = 0.5 of the 10-replicate units), one R at every d would need 40 (200)
    assert replicates_per_d([10, 10], [1.0, 1.0], [1.0, 4.0], 2.0, 10.0) == [60, 30]
    # growth capped at 4x: the round stops the first d at 40 on its way to 60 and keeps
    # the second at its design's 30 (a round never goes past the design at any d)
    assert replicates_per_d([10, 10], [1.0, 1.0], [1.0, 4.0], 2.0, 4.0) == [40, 30]
    assert replicates_per_d([10, 10], [1.0, 0.0], [1.0, 4.0], 2.0, 10.0) == [40, 10]  # kept


def test_a_round_computes_thresholds_and_only_the_last_draws(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from attnrmt.driver import _execute_rounds

    monkeypatch.chdir(tmp_path)
    Path("aim.yaml").write_text(yaml.safe_dump(CONFIG))
    run_dir = tmp_path / "results" / "aim"
    targets = rounds.targeted(validate_config(CONFIG))
    calls: list[tuple[str, bool]] = []

    def steps(plan: Any, valid: Any, path: Path, last: bool) -> Any:
        calls.append((path.name, last))
        thresholds_csv(run_dir, 0.2 if len(calls) == 1 else 0.05)  # round 1 meets it
        return type("Outcome", (), {"code": 0})()

    _execute_rounds(targets, "aim.yaml", run_dir, "aim", steps)
    assert calls == [("round-0.yaml", False), ("round-1.yaml", False), ("round-1.yaml", True)]


LADDER = [250, 500, 1000, 2000, 4000]


def test_a_limit_spreads_its_replicates_over_d_by_leverage_and_price(tmp_path: Path) -> None:
    """A d -> inf limit at twice its goal, per-d CIs from a planted ladder: the next round
    writes ``replicates: {d: count}``, which (1) keeps every cell of this round, (2) meets
    the goal under the 1/sqrt(R) law with each d's variance share (w_d s_d)^2 (w_d: the
    limit's derivative in d's threshold, here by central differences), and (3) costs less
    than one count at every d for the same variance."""
    from attnrmt.analysis.thresholds import finite_size_fit
    from attnrmt.sweep.spec.plan import plan_sweep

    config = copy.deepcopy(CONFIG)
    sweep = config["sweeps"]["s"]
    sweep.update(d=LADDER, replicates=12, noise="shared", spectrum="top", top_k=3)
    sweep["snr"] = [1.0, 1.2, 1.4, 1.6, 1.8, 2.0]
    sweep["target"] = {"threshold_halfwidth": 0.05, "transitions": ["sample"], "max_growth": 50}
    run_dir, d = tmp_path / "run", np.array(LADDER, dtype=float)
    estimate = 1.28 + 0.16 * d ** (-1 / 3)
    halfwidth = np.array([0.03, 0.035, 0.04, 0.045, 0.05])
    common = {"sweep": "s", "transition": "sample", "bound": "none", "n_detected": 4}
    common |= {"delta": 0.5, "gamma": 0.5, "T": 4, "positional": "iid", "weights": "mean"}
    rows = [
        common
        | {"d": x, "finite_size": "none", "estimate": e, "extrapolated": e}
        | {"ci_low": e - h, "ci_high": e + h}
        for x, e, h in zip(LADDER, estimate, halfwidth, strict=True)
    ]
    rows.append(common | {"d": np.inf, "finite_size": "d->inf", "estimate": 1.28, "ci_low": 1.18})
    rows[-1] |= {"ci_high": 1.38, "extrapolated": 1.28}  # half-width 0.1: distance 2
    run_dir.mkdir()
    pd.DataFrame(rows).to_csv(run_dir / "thresholds.csv", index=False)
    path = tmp_path / "round-0.yaml"
    path.write_text(yaml.safe_dump(config))
    valid = load_valid_config(path)
    following = rounds.advance(run_dir, 0, valid, rounds.targeted(valid))
    assert following is not None
    spread = yaml.safe_load(following.read_text())["sweeps"]["s"]["replicates"]
    counts = np.array([spread[x] for x in LADDER])
    grown = load_valid_config(following).sweeps["s"]
    before = plan_sweep(valid.sweeps["s"], 1, 1).cell_keys()
    assert set(before) <= set(plan_sweep(grown, 1, 1).cell_keys())  # (1)
    sd = halfwidth / 1.96

    def limit(e: np.ndarray) -> float:
        return finite_size_fit(d, e, weights=sd**-2)["a"]

    step = 1e-6 * np.eye(d.size)
    lever = np.array([(limit(estimate + e) - limit(estimate - e)) / 2e-6 for e in step])
    share = (lever * sd) ** 2
    assert np.sum(share * 12 / counts) <= np.sum(share) / 4 * 1.001  # (2)
    price = [
        rounds.design_seconds(grown, [int(c == x) for c in LADDER], grown.axes["snr"])
        for x in LADDER
    ]
    assert np.dot(counts, price) < 0.9 * 48 * np.sum(price)  # (3)


@pytest.mark.parametrize("counts", [{40: 3, 80: 2}, {"d40": 3}, {41: 3}])
def test_replicates_per_d_must_name_every_d(counts: dict) -> None:
    config = copy.deepcopy(CONFIG)
    config["sweeps"]["s"]["replicates"] = counts
    with pytest.raises(ConfigError, match=r"sweeps\.s\.replicates=.*must give every d of \[40\]"):
        validate_config(config)
    config["sweeps"]["s"]["replicates"] = {"40": 3}  # a JSON config's keys
    assert validate_config(config).sweeps["s"].per_d == (3,)
