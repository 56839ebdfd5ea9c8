"""Config loading (attnrmt.sweep.spec.config): schema defaults, normalisation, readable
errors (key path + value), run names."""

from __future__ import annotations

import copy
import resource
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from attnrmt.contract import round_significant
from attnrmt.sweep import ConfigError, load_config
from attnrmt.sweep.spec.config import (
    apply_schema,
    load_valid_config,
    resolve_sweeps,
    snr_values,
    validate_config,
)
from attnrmt.sweep.spec.schema import SCHEMA_PATH, load_schema
from tests.sweep.spec.conftest import SMALL, small_config

REPO = Path(__file__).resolve().parents[3]


def minimal_config(**sweep: Any) -> dict[str, Any]:
    return {"sweeps": {"s": dict(sweep)}}


def test_minimal_config_gets_every_default() -> None:
    config = load_config(minimal_config())
    assert config["run"] == "default"
    assert config["seed"] == 2026
    assert config["positional_models"] == {} and config["weight_models"] == {}
    assert config["execution"] == {
        "block_size": "auto",
        "block_seconds": 60,
        "max_failures": 0.05,
        "max_cells": 10_000_000,
        "max_core_days": 10_000,
    }
    analysis_schema = load_schema()["properties"]["analysis"]["properties"]
    assert config["analysis"] == {
        name: entry["default"] for name, entry in analysis_schema.items() if "default" in entry
    }
    assert config["dask"]["mode"] == "local"
    assert config["dask"]["threads_per_worker"] == 1
    # worker-job settings default to null: dask-jobqueue's site configuration decides
    assert config["dask"]["jobqueue"]["walltime"] is None
    assert config["dask"]["jobqueue"]["n_workers"] == 2
    assert config["sweeps"]["s"] == {
        "d": [400],
        "delta": [0.5],
        "gamma": [0.5],
        "T": [8],
        "positional": ["iid"],
        "weights": ["mean"],
        "snr": [1.0],
        "centered": [True],
        "replicates": 1,
        "top_k": 3,
        "spectrum": "full",
        "noise": "independent",
    }


def test_scalars_become_lists_and_linspace_is_expanded() -> None:
    config = load_config(minimal_config(d=50, delta=1, snr={"start": 0, "stop": 0.3, "num": 4}))
    sweep = config["sweeps"]["s"]
    assert sweep["d"] == [50]
    assert sweep["delta"] == [1.0] and isinstance(sweep["delta"][0], float)
    assert sweep["snr"] == [0.0, 0.1, 0.2, 0.3]


def test_linspace_and_typed_list_give_identical_axes() -> None:
    from_linspace = load_config(minimal_config(snr={"start": 0.0, "stop": 3.0, "num": 31}))
    typed = [round(0.1 * i, 10) for i in range(31)]
    from_list = load_config(minimal_config(snr=typed))
    assert from_linspace["sweeps"]["s"]["snr"] == from_list["sweeps"]["s"]["snr"]


def test_snr_values_matches_numpy_linspace() -> None:
    values = snr_values({"start": 0.0, "stop": 3.0, "num": 16})
    expected = np.linspace(0.0, 3.0, 16)
    assert [round_significant(v) for v in values] == [round_significant(v) for v in expected]
    assert snr_values({"start": 2.0, "stop": 5.0, "num": 1}) == [2.0]


def test_load_config_accepts_path_str_and_mapping_without_mutating() -> None:
    raw = small_config()
    snapshot = copy.deepcopy(raw)
    from_mapping = load_config(raw)
    assert raw == snapshot
    assert load_config(SMALL) == from_mapping == load_config(str(SMALL))


def test_semantic_checks_pass_on_loaded_config() -> None:
    resolve_sweeps(load_config(SMALL))


def test_custom_models_that_are_valid_are_accepted() -> None:
    r = 0.5
    markov_R = [[r ** abs(i - j) for j in range(3)] for i in range(3)]
    config = load_config(
        {
            "positional_models": {"cust": {"kind": "custom", "R": markov_R}},
            "weight_models": {"w3": {"kind": "custom", "values": [1, 2, 3]}},
            "sweeps": {"s": {"d": 20, "T": 3, "positional": "cust", "weights": ["w3", "last"]}},
        }
    )
    assert config["sweeps"]["s"]["weights"] == ["w3", "last"]


def test_snakemake_validate_fills_the_same_defaults() -> None:
    from snakemake.utils import validate

    raw = small_config()
    by_snakemake = copy.deepcopy(raw)
    validate(by_snakemake, str(SCHEMA_PATH))
    assert by_snakemake == apply_schema(raw)


def test_config_yaml_at_repo_root_is_valid_and_uses_every_model() -> None:
    valid = load_valid_config(REPO / "config.yaml")
    assert valid.config["run"] == "default"
    # the bulk sweep reaches N T/V < 8 on purpose (test_small_token_counts_are_warned_about)
    assert [w.split(":")[0] for w in valid.warnings] == ["sweeps.bulk"]


def test_validating_the_default_config_imports_no_simulation_code() -> None:
    """The Snakemake process validates the config at every start; it never simulates, so
    validation must not import the cell (scipy and all): the model package loads a module
    on first use of one of its names. In a fresh interpreter (a clean sys.modules)."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from attnrmt.sweep.spec.config import load_valid_config\n"
        f"load_valid_config({str(REPO / 'config.yaml')!r})\n"
        "print(sorted(m for m in ('attnrmt.model.cell', 'scipy.sparse', 'scipy.linalg') "
        "if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_model_package_exports_every_public_name_lazily() -> None:
    import importlib

    import attnrmt.model as model

    assert sorted(model.__all__) == sorted(model._EXPORTS)
    for name in model.__all__:
        home = importlib.import_module(model._EXPORTS[name])
        assert getattr(model, name) is getattr(home, name), name
    with pytest.raises(AttributeError, match="no_such_name"):
        model.no_such_name  # noqa: B018


def _set(config: dict, path: tuple, value: Any) -> dict:
    node = config
    for key in path[:-1]:
        node = node.setdefault(key, {})
    node[path[-1]] = value
    return config


BAD_SWEEP_VALUES = [
    # (path under the small config, value, substrings the message must contain)
    (
        ("sweeps", "transition", "positional"),
        ["prefix9"],
        [
            "sweeps.transition.positional[0]='prefix9'",
            "no positional model named 'prefix9'",
            "known: iid, prefix4",
        ],
    ),
    (
        ("sweeps", "transition", "weights"),
        ["mean", "nope"],
        ["sweeps.transition.weights[1]='nope'", "no weight model named 'nope'", "harmonic"],
    ),
    (("sweeps", "transition", "d"), [1, 40], ["sweeps.transition.d[0]=1", ">= 2"]),
    (
        ("sweeps", "transition", "d"),
        "abc",
        ["sweeps.transition.d='abc'", "an integer >= 2 or a non-empty list"],
    ),
    (("sweeps", "transition", "d"), [], ["sweeps.transition.d=[]"]),
    (("sweeps", "transition", "delta"), [0.5, 0.0], ["sweeps.transition.delta[1]=0.0", "> 0"]),
    (("sweeps", "transition", "gamma"), -1, ["sweeps.transition.gamma=-1", "> 0"]),
    (("sweeps", "transition", "snr"), [-0.5], ["sweeps.transition.snr[0]=-0.5", ">= 0"]),
    (("sweeps", "transition", "snr"), {"start": 0, "stop": 1}, ["sweeps.transition.snr", "'num'"]),
    (
        ("sweeps", "transition", "snr"),
        {"start": 0, "stop": 1, "num": 0},
        ["sweeps.transition.snr.num=0", ">= 1"],
    ),
    (("sweeps", "transition", "snr"), "1e-3", ["sweeps.transition.snr='1e-3'", "1.0e-3"]),
    (
        ("sweeps", "transition", "snr"),
        [0.1, 0.10000000000001],
        ["sweeps.transition.snr[1]=0.10000000000001", "duplicate of sweeps.transition.snr[0]"],
    ),
    (("sweeps", "transition", "d"), [40, 40.0], ["sweeps.transition.d[1]=40.0", "duplicate"]),
    (
        ("sweeps", "transition", "weights"),
        ["mean", "mean"],
        ["sweeps.transition.weights[1]='mean'", "duplicate"],
    ),
    (
        ("sweeps", "transition", "delta"),
        [0.5, 100],
        ["sweeps.transition.delta[1]=100.0", "V = 2 round(d/(2 delta)) = 0", "d=40"],
    ),
    (
        ("sweeps", "transition", "gamma"),
        [50],
        ["sweeps.transition.gamma[0]=50.0", "N = round(d/gamma) = 1", "d=40"],
    ),
    (("sweeps", "transition", "replicates"), 0, ["sweeps.transition.replicates=0", ">= 1"]),
    (("sweeps", "transition", "top_k"), 41, ["sweeps.transition.top_k=41", "min(d)=40"]),
    (("sweeps", "transition", "top_k"), 0, ["sweeps.transition.top_k=0", ">= 1"]),
    (("sweeps", "transition", "T"), [2], ["positional_models.prefix4.L=4", "T=2"]),
    (
        ("sweeps", "transition", "centered"),
        ["yes please"],
        ["sweeps.transition.centered[0]='yes please'", "true or false"],
    ),
    (
        ("sweeps", "transition", "dd"),
        [3],
        ["sweeps.transition", "unknown key 'dd'", "did you mean 'd'"],
    ),
    (("positional_models", "mk", "r"), 1.0, ["positional_models.mk.r=1.0", "< 1"]),
    (
        ("positional_models", "mk", "kind"),
        "markow",
        ["positional_models.mk.kind='markow'", "markov"],
    ),
    (
        ("positional_models", "lab"),
        {"kind": "label", "rho0": 0.5},
        ["positional_models.lab=", "'rho0' and 'L'"],
    ),
    (("positional_models", "prefix4", "r"), 0.5, ["positional_models.prefix4", "unknown key 'r'"]),
    (
        ("positional_models", "cust"),
        {"kind": "custom", "R": [[1, -1, -1], [-1, 1, -1], [-1, -1, 1]]},
        ["positional_models.cust.R=[[1, -1, -1]", "not realisable"],
    ),
    (
        ("weight_models", "w3"),
        {"kind": "custom", "values": [1, 2, 3]},
        ["weight_models.w3.values=[1, 2, 3]", "length T=3"],
    ),  # then used with T=8 below
    (
        ("weight_models", "mean"),
        {"kind": "causal_limit", "tau": 1},
        ["weight_models.mean", "built-in"],
    ),
    (
        ("weight_models", "bad"),
        {"kind": "causal_limit", "tau": "hot"},
        ["weight_models.bad.tau='hot'", "a number"],
    ),
    (("run",), "../evil", ["run='../evil'", "safe in a file path"]),
    (("run",), "a/b", ["run='a/b'", "safe in a file path"]),
    (("seed",), -1, ["seed=-1", ">= 0"]),
    (("seed",), 1.5, ["seed=1.5", "an integer"]),
    (("execution", "block_size"), 0, ["execution.block_size=0", ">= 1"]),
    (("execution", "workers"), 4, ["execution", "unknown key 'workers'"]),
    (("execution", "max_failures"), 0, ["execution.max_failures=0", "a count >= 1"]),
    (("execution", "max_failures"), -0.5, ["execution.max_failures=-0.5", "a fraction"]),
    (("execution", "max_failures"), "many", ["execution.max_failures='many'", "or null"]),
    (("dask", "mode"), "cloud", ["dask.mode='cloud'", "local, address, job, slurm"]),
    (("sweeps",), {}, ["sweeps={}"]),
    (("sweeps", "bad/name"), {}, ["sweeps: name 'bad/name'"]),
    (("positional_models", "9 x"), {"kind": "iid"}, ["positional_models: name '9 x'"]),
    (("foo",), 1, ["unknown top-level key 'foo'"]),
]


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    BAD_SWEEP_VALUES,
    ids=[".".join(map(str, case[0])) + f"={case[1]!r}"[:40] for case in BAD_SWEEP_VALUES],
)
def test_bad_config_message_names_key_and_value(path: tuple, value: Any, expected: list) -> None:
    config = _set(small_config(), path, value)
    if path == ("weight_models", "w3"):
        config["sweeps"]["transition"]["weights"] = ["w3"]
        expected = ["weight_models.w3.values=[1, 2, 3]", "length T=8", "T=8"]
    with pytest.raises(ConfigError) as caught:
        load_config(config)
    message = str(caught.value)
    assert "\n" not in message
    for fragment in expected:
        assert fragment in message, message


def test_custom_R_for_another_T_names_the_sweep() -> None:
    config = small_config()
    config["positional_models"]["cust"] = {"kind": "custom", "R": [[1.0, 0.2], [0.2, 1.0]]}
    config["sweeps"]["transition"]["positional"] = ["cust"]
    expected = r"positional_models\.cust\.R=.*used by sweeps\.transition with T=8"
    with pytest.raises(ConfigError, match=expected):
        load_config(config)


def test_unused_custom_model_is_still_checked_at_its_own_size() -> None:
    config = small_config()
    config["weight_models"]["zero"] = {"kind": "custom", "values": [0, 0]}
    expected = r"weight_models\.zero\.values=\[0, 0\]: must not be all zero"
    with pytest.raises(ConfigError, match=expected):
        load_config(config)


def test_config_error_is_a_value_error() -> None:
    assert issubclass(ConfigError, ValueError)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("sweeps: [unclosed", "not valid YAML"),
        ("- a\n- b\n", "must hold a mapping"),
        ("", "must hold a mapping"),
    ],
)
def test_unreadable_files_raise_config_error(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match=expected):
        load_config(path)


def test_missing_file_raises_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "nope.yaml")


def test_every_problem_is_listed_not_the_first_and_a_count() -> None:
    config = _set(small_config(), ("seed",), -1)
    config["run"] = "a/b"
    config["sweeps"]["transition"]["weights"] = ["nope"]
    config["sweeps"]["markov"]["d"] = [1]
    with pytest.raises(ConfigError) as caught:
        load_config(config)
    problems = caught.value.problems
    assert len(problems) == 3, problems  # schema problems first; semantics need a valid schema
    assert [p.split("=")[0] for p in problems] == ["run", "seed", "sweeps.markov.d[0]"]
    assert str(caught.value).startswith("3 problems: (1) run='a/b'")
    config["run"], config["seed"], config["sweeps"]["markov"]["d"] = "ok", 1, [40]
    config["sweeps"]["transition"]["top_k"] = 99
    with pytest.raises(ConfigError) as caught:
        load_config(config)
    assert [p.split("=")[0] for p in caught.value.problems] == [
        "sweeps.transition.top_k",
        "sweeps.transition.weights[0]",
    ]
    with pytest.raises(ConfigError) as caught:  # every axis of a sweep is checked
        load_config(minimal_config(d=[40, 40], weights=["mean", "mean"]))
    assert [p.split("=")[0] for p in caught.value.problems] == [
        "sweeps.s.d[1]",
        "sweeps.s.weights[1]",
    ]


@pytest.mark.parametrize(
    ("patch", "expected"),
    [
        ({"sweps": "<sweeps>"}, "config: unknown top-level key 'sweps' (did you mean 'sweeps'?)"),
        (
            {"positional_models": {"mk": {"kind": "markov", "rr": 0.5}}},
            "positional_models.mk: unknown key 'rr' (did you mean 'r'?)",
        ),
        (
            {"weight_models": {"c": {"kind": "causal_limit", "tua": 1.0}}},
            "weight_models.c: unknown key 'tua' (did you mean 'tau'?)",
        ),
        ({"analysis": {"bootstap": 10}}, "analysis: unknown key 'bootstap' (did you mean"),
        (
            {"dask": {"jobqueue": {"walltme": "1:00"}}},
            "dask.jobqueue: unknown key 'walltme' (did you",
        ),
    ],
    ids=["top", "positional-model", "weight-model", "analysis", "dask-jobqueue"],
)
def test_misspelt_key_is_named_with_a_suggestion_at_every_level(patch: dict, expected: str) -> None:
    config = small_config()
    for key, value in patch.items():
        config[key] = config.pop("sweeps") if value == "<sweeps>" else value
    with pytest.raises(ConfigError) as caught:
        load_config(config)
    assert caught.value.problems[0].startswith(expected), caught.value.problems
    assert not any("missing required key" in p for p in caught.value.problems)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ('snr: "1.5"', "sweeps.s.snr='1.5'"),
        ('d: "200"', "sweeps.s.d='200'"),
        ('centered: "true"', "sweeps.s.centered='true'"),
    ],
)
def test_quoted_numbers_in_a_file_are_text_and_rejected(
    tmp_path: Path, line: str, expected: str
) -> None:
    path = tmp_path / "q.yaml"
    path.write_text(f"sweeps:\n  s:\n    {line}\n", encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    (problem,) = caught.value.problems
    assert problem.startswith(expected) and "write it without quotes" in problem


def test_an_error_about_a_default_says_it_is_the_default() -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(minimal_config(d=[2, 50]))
    (problem,) = caught.value.problems
    assert problem == (
        "sweeps.s.top_k=3: must be <= min(d)=2 "
        "(sweeps.s.top_k is not set in the config: this is its default)"
    )
    with pytest.raises(ConfigError) as caught:
        load_config(minimal_config(d=[2, 50], top_k=3))
    assert "default" not in str(caught.value)


def test_defined_but_unused_models_are_warned_about() -> None:
    config = small_config()  # defines positional model `lab`, which no sweep uses
    config["weight_models"]["spare"] = {"kind": "causal_limit", "tau": 2.0}
    warnings = unused_model_warnings(config)
    assert [w.split(":")[0] for w in warnings] == ["positional_models.lab", "weight_models.spare"]
    assert all("defined but used by no sweep (sweeps use: " in w for w in warnings)
    config["sweeps"]["transition"]["positional"].append("lab")
    del config["weight_models"]["spare"]
    assert unused_model_warnings(config) == []


def unused_model_warnings(config: dict[str, Any]) -> list[str]:
    """The warnings but the finite-T one (small_config's markov sweep has T delta/gamma < 8)."""
    return [w for w in validate_config(config).warnings if "N T/V" not in w]


def test_small_token_counts_are_warned_about() -> None:
    # T delta / gamma = 8 * 0.5 / 0.5 = 8 is at the bound: no warning; 4 * 0.5 / 0.5 is below
    assert validate_config(minimal_config(T=[8], delta=[0.5], gamma=[0.5])).warnings == ()
    (warning,) = validate_config(minimal_config(T=[4, 8], delta=[0.5], gamma=[0.5])).warnings
    assert warning.startswith("sweeps.s: 1 of 2 (delta, gamma, T) settings have N T/V")
    assert "lowest 4 at delta=0.5, gamma=0.5, T=4" in warning
    # below d = 100 the edge's own fluctuations exceed the tail: no warning
    assert validate_config(minimal_config(d=[20, 99], T=[4], delta=[0.5])).warnings == ()


def test_yaml_syntax_error_names_file_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("run: x\nsweeps:\n  s: {d: [2, 3}\n", encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert str(caught.value).startswith(f"config file {str(path)!r}, line 3, column 15:")


SWEEP_YAML = "sweeps:\n  s:\n    d: [20]\n    positional: iid\n    weights: mean\n"


def test_a_key_given_twice_is_refused_naming_the_key_and_both_lines(tmp_path: Path) -> None:
    """Plain YAML keeps the last of two equal keys silently (``stop: 3`` would win); the
    config loader refuses it, at the second one, naming the first."""
    path = tmp_path / "twice.yaml"
    path.write_text(
        SWEEP_YAML + "    snr: {start: 0, stop: 2, num: 11, stop: 3}\n", encoding="utf-8"
    )
    assert yaml.safe_load(path.read_text())["sweeps"]["s"]["snr"]["stop"] == 3  # silent
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert str(caught.value) == (
        f"config file {str(path)!r}, line 6, column 39: not valid YAML: duplicate key 'stop' "
        "(first at line 6, column 21): YAML would keep only the last value; remove one"
    )
    block = tmp_path / "block.yaml"  # block style, and at the top level
    block.write_text("run: a\n" + SWEEP_YAML + "run: b\n", encoding="utf-8")
    with pytest.raises(
        ConfigError,
        match=r"line 7, column 1: .*duplicate key 'run' "
        r"\(first at line 1, column 1\)",
    ):
        load_config(block)
    merged = tmp_path / "merged.yaml"  # a key merged in with << may be overridden
    merged.write_text("base: &b {start: 0, stop: 2, num: 3}\n", encoding="utf-8")
    assert yaml.load(merged.read_text(), Loader=yaml.SafeLoader)  # plain YAML
    from attnrmt.sweep.spec.config import read_config_source

    merged.write_text("x: &b {start: 0, num: 3}\ny: {<<: *b, num: 4, stop: 1}\n", encoding="utf-8")
    assert read_config_source(merged)["y"] == {"start": 0, "num": 4, "stop": 1}


def test_an_unknown_key_beside_a_missing_one_is_named_too(tmp_path: Path) -> None:
    """``step`` is no key of an snr range: the message names it with the keys allowed, not
    only the missing ``num``; a misspelt key (``stpo`` for ``stop``) gets its hint alone."""
    path = tmp_path / "step.yaml"
    path.write_text(SWEEP_YAML + "    snr: {start: 0, stop: 2, step: 0.2}\n", encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert list(caught.value.problems) == [
        "sweeps.s.snr: unknown key 'step' (did you mean 'stop'?) (allowed: start, stop, num); "
        "sweeps.s.snr: missing required key 'num'"
    ]
    path.write_text(SWEEP_YAML + "    snr: {start: 0, stpo: 2, num: 3}\n", encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert list(caught.value.problems) == [
        "sweeps.s.snr: unknown key 'stpo' (did you mean 'stop'?) (allowed: start, stop, num)"
    ]


def test_run_name_is_the_file_stem_when_run_is_absent(tmp_path: Path) -> None:
    config = small_config()
    del config["run"]
    path = tmp_path / "my-sweep.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    assert load_config(path)["run"] == "my-sweep"
    assert load_config(config)["run"] == "default"  # a mapping has no file: schema default
    unsafe = tmp_path / "my sweep.yaml"
    unsafe.write_text(yaml.safe_dump(config), encoding="utf-8")
    with pytest.raises(ConfigError, match="run: not set, and the config file's name 'my sweep'"):
        load_config(unsafe)
    config["run"] = "explicit"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    assert load_config(path)["run"] == "explicit"


def test_plan_run_reuses_the_resolved_sweeps() -> None:
    from attnrmt.sweep import plan_run

    valid = validate_config(small_config())
    planned = plan_run(valid.config, valid.sweeps)
    assert [c.key for c in planned.sweeps["transition"].cells] == [
        c.key for c in plan_run(valid.config).sweeps["transition"].cells
    ]


def test_an_alias_bomb_is_refused_before_it_expands(tmp_path: Path) -> None:
    """'Billion laughs', 9 levels of 9 aliases (9^9 values): refused naming the file,
    without building the expansion (which would take gigabytes: the peak memory stays
    under 256 MiB more than before)."""
    lines = ['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for level, name in enumerate("bcdefghi"):
        previous = "abcdefghi"[level]
        lines.append(f"{name}: &{name} [{', '.join([f'*{previous}'] * 9)}]")
    path = tmp_path / "bomb.yaml"
    path.write_text("\n".join(lines) + "\n")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(ConfigError, match=r"bomb\.yaml.*aliases .* expand to more than"):
        load_config(path)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 2**18  # KiB


def test_a_byte_that_is_not_utf8_is_named_with_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes(b"run: x\nsweeps:\n  g:\n    note: caf\xe9\n")
    with pytest.raises(ConfigError) as raised:
        load_config(path)
    assert str(raised.value) == (
        f"config file {str(path)!r}, line 4, column 14: byte 0xe9 is not UTF-8: "
        "save the file as UTF-8"
    )


def test_the_quoted_number_hint_only_for_a_quoted_number(tmp_path: Path) -> None:
    """Unquoted ``1.0e308`` is a string to YAML (an exponent needs a sign): the hint says
    that, not that it was quoted; a quoted ``"3"`` still gets the quoted-number hint."""
    text = yaml.safe_dump(small_config())
    path = tmp_path / "c.yaml"
    for value, hint in (("1.0e308", "give the exponent a sign"), ('"3"', "a quoted number")):
        path.write_text(text.replace("\nseed: 7\n", f"\nseed: {value}\n"))
        with pytest.raises(ConfigError, match=hint) as raised:
            load_config(path)
        if value == "1.0e308":
            assert "quoted" not in str(raised.value)
