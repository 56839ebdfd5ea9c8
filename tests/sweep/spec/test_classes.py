"""K-class sweeps through validation and the plan (attnrmt.sweep.spec.classes): every
misspelling named with a suggestion, bad values named with key and value, K-class cells
keyed by K, G and the label law, and two-class sweeps keyed as before."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest

from attnrmt.model import simulate_cell
from attnrmt.sweep.compute.blocks import compute_cell
from attnrmt.sweep.spec.config import ConfigError, validate_config
from attnrmt.sweep.spec.plan import RunPlan
from attnrmt.sweep.spec.plan import plan_run as _plan_run
from tests.conftest import build_tiny_config

K_SWEEP: dict[str, Any] = {
    "d": [12],
    "T": [3],
    "classes": {"K": 3, "means": "simplex"},
    "positional": ["iid", "pre2"],
    "weights": ["mean"],
    "snr": [0.0, 2.0],
    "replicates": 2,
    "top_k": 3,
}


def k_config(**changes: Any) -> dict[str, Any]:
    """The tiny config with a second, K-class sweep ``k`` (label model ``pre2``)."""
    config = build_tiny_config(label_models={"pre2": {"kind": "prefix", "L": 2}})
    config["sweeps"]["k"] = {**copy.deepcopy(K_SWEEP), **changes}
    return config


def plan_run(config: dict[str, Any]) -> RunPlan:
    """Validate (defaults filled) and plan."""
    valid = validate_config(config)
    return _plan_run(valid.config, valid.sweeps)


def problems(config: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as caught:
        validate_config(config)
    return str(caught.value)


# ---------------------------------------------------------------------- validation


def test_a_k_class_sweep_validates_with_its_canonical_specs() -> None:
    valid = validate_config(k_config())
    sweep = valid.sweeps["k"]
    assert sweep.classes == {
        "K": 3,
        "means": [[1.0, -0.5, -0.5], [-0.5, 1.0, -0.5], [-0.5, -0.5, 1.0]],
        "means_name": "simplex",
    }
    spec = sweep.positional_specs[("pre2", 3)]
    assert spec["kind"] == "classes" and spec["K"] == 3
    assert spec["labels"] == {"L": 2, "kind": "prefix", "p": [1 / 3, 1 / 3, 1 / 3]}
    assert valid.sweeps["grid"].classes is None
    assert [w for w in valid.warnings if "N T/V" not in w] == []  # only the finite-T warning


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (
            lambda c: c["sweeps"]["k"].update(clases=c["sweeps"]["k"].pop("classes")),
            "sweeps.k: unknown key 'clases' (did you mean 'classes'?)",
        ),
        (
            lambda c: c["sweeps"]["k"]["classes"].update(KK=3),
            "sweeps.k.classes: unknown key 'KK' (did you mean 'K'?)",
        ),
        (
            lambda c: c["sweeps"]["k"]["classes"].update(means="simplx"),
            "sweeps.k.classes.means='simplx': no Gram preset named 'simplx' "
            "(did you mean 'simplex'?)",
        ),
        (
            lambda c: c.update(label_model=c.pop("label_models")),
            "config: unknown top-level key 'label_model' (did you mean 'label_models'?)",
        ),
        (
            lambda c: c["label_models"]["pre2"].update(LL=2),
            "label_models.pre2: unknown key 'LL' (did you mean 'L'?)",
        ),
        (
            lambda c: c["sweeps"]["k"].update(positional=["pre3"]),
            "sweeps.k.positional[0]='pre3': no label model named 'pre3' (did you mean 'pre2'?)",
        ),
        (
            lambda c: c["sweeps"]["k"].update(positional=["prefix2"]),
            "it is a positional (sign) model: a sweep with classes names label models",
        ),
    ],
)
def test_misspellings_are_named_with_a_suggestion(edit: Any, expected: str) -> None:
    config = k_config()
    edit(config)
    assert expected in problems(config)


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (
            lambda c: c["sweeps"]["k"]["classes"].update(K=1),
            "sweeps.k.classes.K=1: must be >= 2",
        ),
        (
            lambda c: c["sweeps"]["k"]["classes"].update(means=[[1, 0], [0, 1]]),
            "sweeps.k.classes.means=[[1, 0], [0, 1]]: a Gram matrix must be 3 x 3 (K=3)",
        ),
        (
            lambda c: c["sweeps"]["k"]["classes"].update(means=[[1, 0, 0], [0, 1, 0], [0, 0, -1]]),
            "must be positive semidefinite",
        ),
        (
            lambda c: c["label_models"]["pre2"].update(L=4),
            "label_models.pre2.L=4: must be <= T=3 (used by sweeps.k with T=3, K=3)",
        ),
        (
            lambda c: c["label_models"]["pre2"].update(p=[0.5, 0.5]),
            "label_models.pre2.p=[0.5, 0.5]: must be a list of length 3",
        ),
        (
            lambda c: c["label_models"].update(mk={"kind": "markov", "r": -0.9}),
            "label_models.mk.r=-0.9: must be a number in [-1/(K-1), 1)",
        ),
        (lambda c: c["sweeps"]["k"].update(d=[2]), "sweeps.k.d[0]=2: must be >= classes.K=3"),
        (
            lambda c: c["sweeps"]["k"].update(top_k=2, centered=[True, False]),
            "sweeps.k.top_k=2: must be >= 3, the spikes of K=3 classes (K uncentred)",
        ),
        (
            lambda c: c["sweeps"]["k"].update(spectrum="top"),
            "sweeps.k.spectrum='top': a sweep with classes has only the full route",
        ),
    ],
)
def test_bad_values_are_named_with_key_and_value(edit: Any, expected: str) -> None:
    config = k_config()
    edit(config)
    if "mk" in config["label_models"]:
        config["sweeps"]["k"]["positional"] = ["mk"]
    assert expected in problems(config)


def test_an_unused_label_model_is_a_warning() -> None:
    config = k_config(positional=["iid"])
    warnings = [w for w in validate_config(config).warnings if "N T/V" not in w]
    assert warnings == ["label_models.pre2: defined but used by no sweep with classes"]


# ---------------------------------------------------------------------- the plan


def test_two_class_keys_do_not_change_when_a_k_class_sweep_is_added() -> None:
    alone = plan_run(build_tiny_config()).sweeps["grid"]
    beside = plan_run(k_config()).sweeps["grid"]
    assert alone.cell_keys() == beside.cell_keys()
    assert alone.config_sha256 == beside.config_sha256
    assert [block.key for block in alone.blocks] == [block.key for block in beside.blocks]
    assert beside.classes is None


def test_k_class_keys_depend_on_k_gram_and_labels() -> None:
    keys = set(plan_run(k_config()).sweeps["k"].cell_keys())
    for changed in (
        k_config(classes={"K": 4, "means": "simplex"}),
        k_config(classes={"K": 3, "means": "orthogonal"}),
        k_config(positional=["iid", "pre1"]),
    ):
        changed.setdefault("label_models", {})["pre1"] = {"kind": "prefix", "L": 1}
        other = set(plan_run(changed).sweeps["k"].cell_keys())
        assert keys != other
    # the simplex preset and its explicit matrix are the same cells
    explicit = k_config(
        classes={"K": 3, "means": [[1, -0.5, -0.5], [-0.5, 1, -0.5], [-0.5, -0.5, 1]]}
    )
    assert set(plan_run(explicit).sweeps["k"].cell_keys()) == keys


def test_a_block_job_computes_a_k_class_cell_with_spike_fields() -> None:
    plan = plan_run(k_config())
    params = plan.sweeps["k"].blocks[0].cells.block_params(plan.seed)[-1]  # iid, snr 2
    record = compute_cell(params["kwargs"], params["seed"])
    assert record["spike_overlap_table"].shape == (2,)  # K - 1 spikes, centred
    assert np.all((record["spike_overlap_table"] >= 0) & (record["spike_overlap_table"] <= 1))
    # same seed: same numbers
    again = simulate_cell(**params["kwargs"], seed=params["seed"]).to_dict()
    for name, value in again.items():
        if name != "compute_seconds":
            np.testing.assert_array_equal(value, record[name])
    # iid labels, mean weights: Cov(Y) = (kappa/K) J, so alpha = K/(K-1) tr Cov(Y) = kappa
    assert record["alpha"] == pytest.approx(record["kappa"], rel=1e-12)


def test_a_k_class_cell_refuses_a_non_gaussian_table() -> None:
    """The K-class model draws Gaussian or file tables only: another law is an error."""
    plan = plan_run(k_config())
    params = plan.sweeps["k"].blocks[0].cells.block_params(plan.seed)[0]
    with pytest.raises(ValueError, match="Gaussian or file tables only"):
        simulate_cell(**{**params["kwargs"], "table": {"kind": "rademacher"}}, seed=params["seed"])
    assert np.isfinite(
        simulate_cell(**{**params["kwargs"], "table": "gaussian"}, seed=params["seed"]).kappa
    )


def test_a_k_class_sweep_takes_gaussian_tables_and_file_tables_of_its_shape() -> None:
    """A ``file`` law of K = 3 classes at (V, d) = (180, 60) is accepted; a Rademacher law,
    another K or another d is refused naming the key, the file's K and shape."""
    from pathlib import Path

    data = Path(__file__).parents[2] / "data"
    laws = {
        "t3": {"kind": "file", "path": str(data / "small_table3.npy")},
        "r": {"kind": "rademacher"},
    }
    laws["t3"]["labels"] = str(data / "small_table3_labels.npy")
    shape = {"d": [60], "delta": [1 / 3], "top_k": 2}
    valid = validate_config({**k_config(**shape, table=["gaussian", "t3"]), "table_models": laws})
    assert valid.sweeps["k"].table_specs["t3"]["kind"] == "file"
    text = problems({**k_config(**shape, table=["r"]), "table_models": laws})
    assert "sweeps.k.table='r': a sweep with classes has Gaussian or file tables only" in text
    text = problems({**k_config(table="t3"), "table_models": laws})
    assert "sweeps.k.table='t3': its file has 3 classes and (V, d) = (180, 60)" in text
    assert "(V, d) in [(24, 12)]" in text
    four = {"K": 4, "means": "simplex"}
    text = problems({**k_config(**shape, classes=four, table="t3"), "table_models": laws})
    assert "the sweep needs K = 4" in text
