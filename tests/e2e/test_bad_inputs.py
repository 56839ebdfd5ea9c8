"""Bad inputs everywhere a user can give them: config, command line, Python API.

One table (:data:`CASES`) drives one parametrised test: every bad input must fail with an
error that names the culprit (the config key path or argument, and the value), and leave
nothing behind (no ``results/`` directory). Config cases go through
:func:`attnrmt.sweep.load_config`, a handful through a real ``snakemake -n`` of the
Snakefile; CLI cases run the ``attnrmt`` console script; API cases call the library.

``docs/bad-inputs.md`` is generated from the same table: regenerate it with
``python tests/e2e/test_bad_inputs.py`` (``test_docs_in_sync`` fails when it is stale).
"""

from __future__ import annotations

import copy
import importlib
import os
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from attnrmt.workflow import SNAKEFILE
from tests.e2e.helpers import assert_no_crash_report

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
DOCS = REPO / "docs" / "bad-inputs.md"

#: A small valid config; each config case changes one thing in a copy of it.
BASE_CONFIG: dict[str, Any] = {
    "run": "bad-inputs",
    "seed": 3,
    "positional_models": {
        "prefix4": {"kind": "prefix", "L": 4},
        "mk": {"kind": "markov", "r": 0.5},
    },
    "weight_models": {"causal1": {"kind": "causal_limit", "tau": 1.0}},
    "sweeps": {
        "main": {
            "d": [20, 30],
            "delta": 0.5,
            "gamma": 0.5,
            "T": 8,
            "positional": ["iid", "prefix4", "mk"],
            "weights": ["mean", "causal1"],
            "snr": [0.0, 1.0],
            "replicates": 1,
            "top_k": 2,
        }
    },
    "execution": {"block_size": 4},
}

_DELETE = object()

#: K classes: a second sweep for the K-class cases (label model ``lab3`` added by each).
K_SWEEP: dict[str, Any] = {
    "d": [20],
    "T": 4,
    "classes": {"K": 3},
    "positional": ["iid", "lab3"],
    "snr": [1.0],
    "top_k": 2,
}


@dataclass(frozen=True)
class Case:
    """One bad input.

    Attributes
    ----------
    id : str
        Test id (also the row name in docs/bad-inputs.md).
    surface : str
        ``config`` (load_config), ``snakemake`` (real ``snakemake -n``), ``cli`` or ``api``.
    bad : str
        What is wrong, for the docs.
    culprit : tuple of str
        Substrings the error message must contain (the key path or argument, and the
        offending value).
    patch : mapping
        Config cases: ``{"key.path": new value}`` (``_DELETE`` removes the key); a key
        path ``"<file>"`` replaces the whole file text.
    argv : sequence of str
        CLI cases: arguments after ``attnrmt``. ``{config}`` is replaced by the path of a
        config file written from ``patch`` (a valid one when ``patch`` is empty).
    call : tuple
        API cases: ``(module, function, kwargs)``.
    error : str
        API cases: expected exception type name.
    """

    id: str
    surface: str
    bad: str
    culprit: tuple[str, ...]
    patch: Mapping[str, Any] = field(default_factory=dict)
    argv: Sequence[str] = ()
    call: tuple[str, str, Mapping[str, Any]] | None = None
    error: str = "ValueError"
    xfail: str = ""


CELL = {
    "d": 20,
    "delta": 0.5,
    "gamma": 0.5,
    "T": 4,
    "positional": {"kind": "iid"},
    "weights": "mean",
    "snr": 1.0,
}
SPIKE = {"delta": 0.5, "gamma": 0.5, "snr": 1.0, "alpha": 1.0, "kappa": 1.0}


def _cell(**changes: Any) -> tuple[str, str, dict[str, Any]]:
    return ("attnrmt.model", "simulate_cell", {**CELL, **changes})


def _spike(**changes: Any) -> tuple[str, str, dict[str, Any]]:
    return ("attnrmt.theory", "spike", {**SPIKE, **changes})


CASES: tuple[Case, ...] = (
    # ----------------------------------------------------------------- config: schema
    Case(
        "config-d-below-2",
        "config",
        "`d` below 2 in a sweep",
        ("sweeps.main.d", "1"),
        {"sweeps.main.d": [1, 20]},
    ),
    Case(
        "config-d-not-a-number",
        "config",
        "`d` given as text",
        ("sweeps.main.d", "'abc'"),
        {"sweeps.main.d": "abc"},
    ),
    Case(
        "config-delta-negative",
        "config",
        "negative vocabulary ratio `delta`",
        ("sweeps.main.delta", "-0.5"),
        {"sweeps.main.delta": -0.5},
    ),
    Case(
        "config-gamma-zero",
        "config",
        "`gamma` = 0 (infinitely many samples)",
        ("sweeps.main.gamma", "0"),
        {"sweeps.main.gamma": 0},
    ),
    Case(
        "config-T-zero",
        "config",
        "sequence length `T` = 0",
        ("sweeps.main.T", "0"),
        {"sweeps.main.T": [0]},
    ),
    Case(
        "config-snr-negative",
        "config",
        "negative `snr`",
        ("sweeps.main.snr", "-1"),
        {"sweeps.main.snr": -1},
    ),
    Case(
        "config-snr-overflow",
        "config",
        "`snr` so large that S overflows float64",
        ("sweeps.main.snr[1]", "1e+200", "<= 1e+100"),
        {"sweeps.main.snr": [1.0, 1e200]},
    ),
    Case(
        "config-snr-range-incomplete",
        "config",
        "`snr: {start, stop}` without `num`",
        ("sweeps.main.snr", "num"),
        {"sweeps.main.snr": {"start": 0, "stop": 1}},
    ),
    Case(
        "config-replicates-zero",
        "config",
        "`replicates: 0`",
        ("sweeps.main.replicates", "0"),
        {"sweeps.main.replicates": 0},
    ),
    Case(
        "config-unknown-key-typo",
        "config",
        "a misspelt sweep key (`dd` for `d`)",
        ("sweeps.main", "dd"),
        {"sweeps.main.dd": 3},
    ),
    Case(
        "config-no-sweeps",
        "config",
        "`sweeps: {}` (nothing to run)",
        ("sweeps", "{}"),
        {"sweeps": {}},
    ),
    Case("config-seed-negative", "config", "negative root `seed`", ("seed", "-1"), {"seed": -1}),
    Case(
        "config-run-path-traversal",
        "config",
        "a run name that escapes results/",
        ("run", "'../evil'"),
        {"run": "../evil"},
    ),
    Case(
        "config-centered-string",
        "config",
        "`centered: yes-please` (not a boolean)",
        ("sweeps.main.centered", "yes-please"),
        {"sweeps.main.centered": "yes-please"},
    ),
    Case(
        "config-block-size-zero",
        "config",
        "`execution.block_size: 0`",
        ("execution.block_size", "0"),
        {"execution.block_size": 0},
    ),
    Case(
        "config-dask-mode-unknown",
        "config",
        "unknown `dask.mode`",
        ("dask.mode", "kubernetes"),
        {"dask.mode": "kubernetes"},
    ),
    Case(
        "config-markov-r-one",
        "config",
        "Markov correlation `r` = 1.5",
        ("positional_models.mk.r", "1.5"),
        {"positional_models.mk.r": 1.5},
    ),
    Case(
        "config-label-missing-L",
        "config",
        "label model with `rho0` but no `L`",
        ("positional_models.lab", "rho0"),
        {
            "positional_models.lab": {"kind": "label", "rho0": 0.6},
            "sweeps.main.positional": ["lab"],
        },
    ),
    # ----------------------------------------------------------------- config: semantics
    Case(
        "config-top-k-above-d",
        "config",
        "`top_k` larger than the smallest `d`",
        ("sweeps.main.top_k", "100"),
        {"sweeps.main.top_k": 100},
    ),
    Case(
        "config-unknown-positional",
        "config",
        "a sweep naming an undefined positional model",
        ("sweeps.main.positional", "'nosuch'"),
        {"sweeps.main.positional": ["iid", "nosuch"]},
    ),
    Case(
        "config-unknown-weights",
        "config",
        "a sweep naming an undefined weight model",
        ("sweeps.main.weights", "'nosuchw'"),
        {"sweeps.main.weights": ["nosuchw"]},
    ),
    Case(
        "config-prefix-longer-than-T",
        "config",
        "prefix length `L` > `T`",
        ("positional_models.prefix4.L", "100"),
        {"positional_models.prefix4.L": 100},
    ),
    Case(
        "config-duplicate-axis-value",
        "config",
        "the same `d` twice",
        ("sweeps.main.d", "40"),
        {"sweeps.main.d": [40, 40]},
    ),
    Case(
        "config-custom-weights-wrong-length",
        "config",
        "custom weights whose length is not `T`",
        ("weight_models.w2", "values"),
        {
            "weight_models.w2": {"kind": "custom", "values": [1.0, 2.0]},
            "sweeps.main.weights": ["w2"],
        },
    ),
    Case(
        "config-custom-R-not-realisable",
        "config",
        "a custom sign correlation `R` that no Gaussian sign model realises",
        ("positional_models.bad3", "R"),
        {
            "positional_models.bad3": {
                "kind": "custom",
                "R": [[1, -1, -1], [-1, 1, -1], [-1, -1, 1]],
            },
            "sweeps.main.positional": ["bad3"],
            "sweeps.main.T": 3,
        },
    ),
    Case(
        "config-delta-too-large-for-d",
        "config",
        "`delta` so large that the vocabulary has fewer than 2 tokens",
        ("delta", "100"),
        {"sweeps.main.delta": 100},
    ),
    Case(
        "config-misspelt-top-level-key",
        "config",
        "`sweps:` for `sweeps:`",
        ("config: unknown top-level key 'sweps' (did you mean 'sweeps'?)",),
        {"sweeps": _DELETE, "sweps": BASE_CONFIG["sweeps"]},
    ),
    Case(
        "config-misspelt-model-key",
        "config",
        "`{kind: markov, rr: 0.5}` (`rr` for `r`)",
        ("positional_models.mk: unknown key 'rr' (did you mean 'r'?)",),
        {"positional_models.mk": {"kind": "markov", "rr": 0.5}},
    ),
    Case(
        "config-misspelt-noise-value",
        "config",
        "`noise: shard` (for `shared`)",
        ("sweeps.main.noise='shard': must be one of independent, shared (did you mean 'shared'?)",),
        {"sweeps.main.noise": "shard"},
    ),
    Case(
        "config-several-problems",
        "config",
        "two mistakes at once: both are named",
        ("seed=-1: must be >= 0", "execution.block_size=0: must be an integer >= 1 or auto"),
        {"seed": -1, "execution.block_size": 0},
    ),
    Case(
        "config-quoted-number",
        "config",
        'a quoted number (`snr: "1.5"`)',
        ("sweeps.main.snr='1.5'", "a quoted number is text: write it without quotes"),
        {"sweeps.main.snr": "1.5"},
    ),
    Case(
        "config-default-top-k-above-d",
        "config",
        "`d: [2, 30]` without `top_k`: the default top_k = 3 is too large",
        ("sweeps.main.top_k=3: must be <= min(d)=2", "not set in the config: this is its default"),
        {"sweeps.main.top_k": _DELETE, "sweeps.main.d": [2, 30]},
    ),
    # ----------------------------------------------------------------- config: K classes
    Case(
        "config-classes-misspelt",
        "config",
        "`clases:` for `classes:` in a sweep",
        ("sweeps.main: unknown key 'clases' (did you mean 'classes'?)",),
        {"sweeps.main.clases": {"K": 3}},
    ),
    Case(
        "config-classes-unknown-preset",
        "config",
        "a Gram preset that does not exist (`simplx`)",
        ("sweeps.kc.classes.means='simplx'", "did you mean 'simplex'?"),
        {
            "label_models": {"lab3": {"kind": "prefix", "L": 2}},
            "sweeps.kc": {**K_SWEEP, "classes": {"K": 3, "means": "simplx"}},
        },
    ),
    Case(
        "config-classes-gram-not-psd",
        "config",
        "a class-mean Gram matrix with a negative eigenvalue",
        ("sweeps.kc.classes.means=", "positive semidefinite"),
        {
            "label_models": {"lab3": {"kind": "prefix", "L": 2}},
            "sweeps.kc": {**K_SWEEP, "classes": {"K": 2, "means": [[1, 2], [2, 1]]}},
        },
    ),
    Case(
        "config-classes-d-below-K",
        "config",
        "`d` smaller than the number of classes",
        ("sweeps.kc.d[0]=4: must be >= classes.K=5",),
        {
            "label_models": {"lab3": {"kind": "prefix", "L": 2}},
            "sweeps.kc": {**K_SWEEP, "d": [4], "top_k": 4, "classes": {"K": 5}},
        },
    ),
    Case(
        "config-label-model-p-wrong-length",
        "config",
        "label probabilities `p` not of length K",
        ("label_models.lab3.p=[0.5, 0.5]: must be a list of length 3",),
        {"label_models": {"lab3": {"kind": "iid", "p": [0.5, 0.5]}}, "sweeps.kc": K_SWEEP},
    ),
    Case(
        "config-label-model-misspelt",
        "config",
        "a sweep with classes naming an undefined label model (`lab4` for `lab3`)",
        ("sweeps.kc.positional[1]='lab4': no label model named 'lab4'", "did you mean 'lab3'?"),
        {
            "label_models": {"lab3": {"kind": "prefix", "L": 2}},
            "sweeps.kc": {**K_SWEEP, "positional": ["iid", "lab4"]},
        },
    ),
    # table laws (sweep key `table`, section `table_models`)
    Case(
        "config-misspelt-table-law",
        "config",
        "a sweep naming `table: radmacher` (misspelt built-in law)",
        ("sweeps.main.table='radmacher'", "(did you mean 'rademacher'?)"),
        {"sweeps.main.table": "radmacher"},
    ),
    Case(
        "config-misspelt-table-law-in-list",
        "config",
        "a sweep naming `table: [gaussian, radmacher]` (a misspelt law on the table axis)",
        ("sweeps.main.table[1]='radmacher'", "(did you mean 'rademacher'?)"),
        {"sweeps.main.table": ["gaussian", "radmacher"]},
    ),
    Case(
        "config-repeated-table-law",
        "config",
        "a sweep naming `table: [gaussian, gaussian]` (a law twice on the table axis)",
        ("sweeps.main.table[1]='gaussian'", "duplicate of sweeps.main.table[0]"),
        {"sweeps.main.table": ["gaussian", "gaussian"]},
    ),
    Case(
        "config-misspelt-table-kind",
        "config",
        "`table_models.t3: {kind: studnet_t, nu: 3}`",
        ("table_models.t3.kind='studnet_t'", "(did you mean 'student_t'?)"),
        {"table_models.t3": {"kind": "studnet_t", "nu": 3}, "sweeps.main.table": "t3"},
    ),
    Case(
        "config-student-t-nu-two",
        "config",
        "`student_t` with `nu: 2` (no unit variance)",
        ("table_models.t2.nu=2", "must be > 2"),
        {"table_models.t2": {"kind": "student_t", "nu": 2}, "sweeps.main.table": "t2"},
    ),
    Case(
        "config-sparse-p-above-one",
        "config",
        "`sparse` with `p: 1.5`",
        ("table_models.sp.p=1.5", "must lie in (0, 1]"),
        {"table_models.sp": {"kind": "sparse", "p": 1.5}, "sweeps.main.table": "sp"},
    ),
    Case(
        "config-misspelt-table-parameter",
        "config",
        "`{kind: student_t, nuu: 3}` (`nuu` for `nu`)",
        ("table_models.t3: unknown key 'nuu' (did you mean 'nu'?)",),
        {"table_models.t3": {"kind": "student_t", "nuu": 3}},
    ),
    # ----------------------------------------------------------------- real snakemake -n
    Case(
        "snakemake-sweeps-not-a-mapping",
        "snakemake",
        "`sweeps` given as a list",
        ("sweeps=['a', 'b']: must be a mapping",),
        {"sweeps": ["a", "b"]},
    ),
    Case(
        "snakemake-d-below-2",
        "snakemake",
        "`d` below 2, through the Snakefile",
        ("sweeps.main.d[0]=1: must be >= 2",),
        {"sweeps.main.d": [1]},
    ),
    Case(
        "snakemake-unknown-weights",
        "snakemake",
        "an undefined weight model, through the Snakefile",
        ("sweeps.main.weights[0]='nosuchw': no weight model named 'nosuchw'",),
        {"sweeps.main.weights": ["nosuchw"]},
    ),
    Case(
        "snakemake-unknown-key",
        "snakemake",
        "a misspelt top-level key (`sweep`)",
        ("config: unknown top-level key 'sweep' (did you mean 'sweeps'?)",),
        {"sweep": {"x": {}}},
    ),
    Case(
        "snakemake-top-k-above-d",
        "snakemake",
        "`top_k` > `d`, through the Snakefile",
        ("sweeps.main.top_k=100: must be <= min(d)=20",),
        {"sweeps.main.top_k": 100},
    ),
    Case(
        "snakemake-misspelt-model-key",
        "snakemake",
        "`rr` for `r`, through the Snakefile",
        ("positional_models.mk: unknown key 'rr' (did you mean 'r'?)",),
        {"positional_models.mk": {"kind": "markov", "rr": 0.5}},
    ),
    Case(
        "snakemake-several-problems",
        "snakemake",
        "two mistakes, through the Snakefile",
        ("seed=-1: must be >= 0", "execution.block_size=0: must be an integer >= 1 or auto"),
        {"seed": -1, "execution.block_size": 0},
    ),
    Case(
        "snakemake-quoted-number",
        "snakemake",
        "a quoted number in the config file: rejected as by `attnrmt validate`",
        ("sweeps.main.snr='1.5'", "a quoted number is text: write it without quotes"),
        {"sweeps.main.snr": "1.5"},
    ),
    Case(
        "snakemake-default-top-k-above-d",
        "snakemake",
        "the default `top_k` too large for `d`, through the Snakefile",
        ("sweeps.main.top_k=3: must be <= min(d)=2", "not set in the config: this is its default"),
        {"sweeps.main.top_k": _DELETE, "sweeps.main.d": [2, 30]},
    ),
    # ----------------------------------------------------------------- command line
    Case(
        "cli-validate-missing-file",
        "cli",
        "`attnrmt validate` of a missing file",
        ("nosuch.yaml", "not found"),
        argv=("validate", "nosuch.yaml"),
    ),
    Case(
        "cli-validate-bad-d",
        "cli",
        "`attnrmt validate` of a config with `d: [1]`",
        ("sweeps.main.d", "1"),
        {"sweeps.main.d": [1]},
        argv=("validate", "{config}"),
    ),
    Case(
        "cli-validate-not-yaml",
        "cli",
        "`attnrmt validate` of a file that is not YAML",
        ("config.yaml", "not valid YAML"),
        {"<file>": "sweeps: {main: [unclosed\n"},
        argv=("validate", "{config}"),
    ),
    Case(
        "cli-validate-yaml-line-column",
        "cli",
        "a YAML syntax error: file, line and column",
        ("config.yaml', line 3, column 15: not valid YAML",),
        {"<file>": "run: x\nsweeps:\n  a: {d: [2, 3}\n"},
        argv=("validate", "{config}"),
    ),
    Case(
        "cli-validate-quoted-number",
        "cli",
        "a quoted number, as Snakemake reports it",
        ("sweeps.main.snr='1.5'", "a quoted number is text: write it without quotes"),
        {"sweeps.main.snr": "1.5"},
        argv=("validate", "{config}"),
    ),
    Case(
        "cli-validate-several-problems",
        "cli",
        "two mistakes: one line each",
        (
            "validate: error: seed=-1: must be >= 0",
            "validate: error: execution.block_size=0: must be an integer >= 1 or auto",
        ),
        {"seed": -1, "execution.block_size": 0},
        argv=("validate", "{config}"),
    ),
    Case(
        "cli-theory-config-unknown-model",
        "cli",
        "`attnrmt theory --config FILE --positional` naming a model the file lacks",
        ("--positional", "'nosuch'"),
        argv=("theory", "--config", "{config}", "--positional", "nosuch"),
    ),
    Case(
        "cli-plan-unknown-weights",
        "cli",
        "`attnrmt plan` of a config naming an undefined model",
        ("sweeps.main.weights", "'nosuchw'"),
        {"sweeps.main.weights": ["nosuchw"]},
        argv=("plan", "--no-calibrate", "{config}"),
    ),
    Case(
        "cli-plan-no-config",
        "cli",
        "`attnrmt plan` without a config",
        ("config", "required"),
        argv=("plan",),
    ),
    Case(
        "cli-theory-delta-negative",
        "cli",
        "`attnrmt theory --delta -1`",
        ("delta=-1",),
        argv=("theory", "--delta", "-1"),
    ),
    Case(
        "cli-theory-gamma-text",
        "cli",
        "`attnrmt theory --gamma abc`",
        ("--gamma", "'abc'"),
        argv=("theory", "--gamma", "abc"),
    ),
    Case(
        "cli-theory-T-zero", "cli", "`attnrmt theory --T 0`", ("T=0",), argv=("theory", "--T", "0")
    ),
    Case(
        "cli-theory-d-negative",
        "cli",
        "`attnrmt theory --d -5`",
        ("d=-5",),
        argv=("theory", "--d", "-5"),
    ),
    Case(
        "cli-theory-positional-bad-json",
        "cli",
        "`--positional` that is broken JSON",
        ("{bad", "JSON"),
        argv=("theory", "--positional", "{bad"),
    ),
    Case(
        "cli-theory-prefix-longer-than-T",
        "cli",
        "`--positional` prefix with `L` > `T`",
        ("positional.L=20", "T=8"),
        argv=("theory", "--positional", '{"kind": "prefix", "L": 20}'),
    ),
    Case(
        "cli-theory-weights-unknown",
        "cli",
        "`attnrmt theory --weights nosuch`",
        ("weights", "'nosuch'"),
        argv=("theory", "--weights", "nosuch"),
    ),
    Case(
        "cli-theory-variant-unknown",
        "cli",
        "`attnrmt theory --variant bogus`",
        ("--variant", "'bogus'"),
        argv=("theory", "--variant", "bogus"),
    ),
    Case(
        "cli-unknown-command",
        "cli",
        "`attnrmt frobnicate`",
        ("'frobnicate'",),
        argv=("frobnicate",),
    ),
    # ----------------------------------------------------------------- Python API
    Case("api-simulate-d-1", "api", "`simulate_cell(d=1)`", ("d=1",), call=_cell(d=1)),
    Case("api-simulate-d-float", "api", "`simulate_cell(d=2.5)`", ("d=2.5",), call=_cell(d=2.5)),
    Case(
        "api-simulate-gamma-nan",
        "api",
        "`simulate_cell(gamma=nan)`",
        ("gamma=nan",),
        call=_cell(gamma=float("nan")),
    ),
    Case(
        "api-simulate-markov-r-1",
        "api",
        "Markov model with `r=1`",
        ("positional.r=1",),
        call=_cell(positional={"kind": "markov", "r": 1}),
    ),
    Case(
        "api-simulate-unknown-weights",
        "api",
        "`weights='nosuch'`",
        ("weights", "'nosuch'"),
        call=_cell(weights="nosuch"),
    ),
    Case(
        "api-simulate-custom-weights-length",
        "api",
        "custom weights of the wrong length",
        ("weights.values", "T=4"),
        call=_cell(weights={"kind": "custom", "values": [1, 2]}),
    ),
    Case(
        "api-simulate-snr-overflow",
        "api",
        "`simulate_cell(snr=1e200)`",
        ("snr=1e+200", "<= 1e+100"),
        call=_cell(snr=1e200),
    ),
    Case("api-simulate-top-k", "api", "`top_k` > `d`", ("top_k=50",), call=_cell(top_k=50)),
    Case("api-simulate-seed-negative", "api", "negative seed", ("seed=-3",), call=_cell(seed=-3)),
    Case(
        "api-simulate-centered-string",
        "api",
        "`centered='yes'`",
        ("centered='yes'",),
        call=_cell(centered="yes"),
    ),
    Case(
        "api-spike-delta-0",
        "api",
        "`theory.spike(delta=0, ...)`",
        ("delta=0",),
        call=_spike(delta=0),
    ),
    Case(
        "api-spike-variant",
        "api",
        "`theory.spike(..., variant='bogus')`",
        ("variant='bogus'",),
        call=_spike(variant="bogus"),
    ),
    Case(
        "api-spike-kappa-0", "api", "`theory.spike(kappa=0)`", ("kappa=0",), call=_spike(kappa=0.0)
    ),
    Case(
        "api-bulk-density-delta",
        "api",
        "`bulk_density(x, delta=-1, gamma)`",
        ("delta=-1",),
        call=("attnrmt.theory", "bulk_density", {"x": [0.5, 1.0], "delta": -1, "gamma": 0.5}),
    ),
    Case(
        "api-bulk-density-x-nan",
        "api",
        "`bulk_density` at x = NaN",
        ("x=", "nan"),
        call=("attnrmt.theory", "bulk_density", {"x": [float("nan")], "delta": 0.5, "gamma": 0.5}),
    ),
    Case(
        "api-bulk-edges-gamma-inf",
        "api",
        "`bulk_edges(gamma=inf)`",
        ("gamma=inf",),
        call=("attnrmt.theory", "bulk_edges", {"delta": 0.5, "gamma": float("inf")}),
    ),
    Case(
        "api-load-config-missing-file",
        "api",
        "`load_config` of a file that does not exist",
        ("no-such-config.yaml", "not found"),
        call=("attnrmt.sweep", "load_config", {"source": "no-such-config.yaml"}),
        error="ConfigError",
    ),
)


# --------------------------------------------------------------------------- helpers


def patched_config(patch: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of :data:`BASE_CONFIG` with ``patch`` applied (dotted key paths)."""
    config = copy.deepcopy(BASE_CONFIG)
    for dotted, value in patch.items():
        *parents, last = dotted.split(".")
        node = config
        for key in parents:
            node = node.setdefault(key, {})
        if value is _DELETE:
            node.pop(last, None)
        else:
            node[last] = copy.deepcopy(value)
    return config


def write_config(directory: Path, patch: Mapping[str, Any]) -> Path:
    """Write the patched config (or the raw ``<file>`` text) to ``directory/config.yaml``."""
    path = directory / "config.yaml"
    if "<file>" in patch:
        path.write_text(patch["<file>"])
    else:
        path.write_text(yaml.safe_dump(patched_config(patch), sort_keys=False))
    return path


def run_config_case(case: Case, tmp: Path) -> str:
    """Message of the :class:`ConfigError` raised by ``load_config`` (fails if none)."""
    from attnrmt.sweep import ConfigError, load_config

    with pytest.raises(ConfigError) as info:
        load_config(patched_config(case.patch))
    return str(info.value)


#: Prefix of every config problem the Snakefile reports (one line per problem).
SNAKEMAKE_PREFIX = "attnrmt: invalid configuration: "


def run_snakemake_case(case: Case, tmp: Path) -> str:
    """The ``attnrmt: invalid configuration:`` lines of a failing ``snakemake -n``.

    Fails when Snakemake accepts the config, prints a crash report (a Python traceback or
    Snakemake's own error report: :func:`tests.e2e.helpers.assert_no_crash_report`), or
    reports the problem without the prefix (the culprit must be named in a prefixed line,
    with its full key path, not found anywhere in Snakemake's output).
    """
    config = write_config(tmp, case.patch)
    proc = subprocess.run(
        [
            str(BIN / "snakemake"),
            "-n",
            "--cores",
            "1",
            "--snakefile",
            str(SNAKEFILE),
            "--directory",
            str(tmp),
            "--configfile",
            str(config),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0, f"snakemake -n accepted a bad config:\n{output[-2000:]}"
    assert_no_crash_report(output, "snakemake -n of a bad config")
    problems = [line for line in output.splitlines() if line.startswith(SNAKEMAKE_PREFIX)]
    assert problems, f"no {SNAKEMAKE_PREFIX!r} line:\n{output[-3000:]}"
    return "\n".join(problems)


def run_cli_case(case: Case, tmp: Path) -> str:
    """Output of a failing ``attnrmt`` command (fails on success or on a crash report)."""
    config = write_config(tmp, case.patch)
    argv = [arg.replace("{config}", str(config)) for arg in case.argv]
    proc = subprocess.run(
        [str(BIN / "attnrmt"), *argv], capture_output=True, text=True, timeout=120, cwd=tmp
    )
    assert proc.returncode != 0, f"attnrmt {argv} accepted bad input:\n{proc.stdout[-2000:]}"
    assert_no_crash_report(proc.stdout + proc.stderr, f"attnrmt {' '.join(argv)}")
    return proc.stdout + proc.stderr


def run_api_case(case: Case, tmp: Path) -> str:
    """Message of the exception raised by the API call (fails if none or wrong type)."""
    assert case.call is not None
    module, name, kwargs = case.call
    function: Callable[..., Any] = getattr(importlib.import_module(module), name)
    with pytest.raises(Exception) as info:
        function(**kwargs)
    assert type(info.value).__name__ == case.error, f"{type(info.value).__name__}: {info.value}"
    return str(info.value)


RUNNERS: dict[str, Callable[[Case, Path], str]] = {
    "config": run_config_case,
    "snakemake": run_snakemake_case,
    "cli": run_cli_case,
    "api": run_api_case,
}


def _files(directory: Path) -> set[Path]:
    return {p.relative_to(directory) for p in directory.rglob("*")}


# --------------------------------------------------------------------------- tests


def _params() -> list[Any]:
    return [
        pytest.param(
            case,
            id=case.id,
            marks=[pytest.mark.xfail(reason=case.xfail, strict=True)] if case.xfail else [],
        )
        for case in CASES
    ]


@pytest.mark.parametrize("case", _params())
def test_bad_input_fails_clearly_and_writes_nothing(
    case: Case, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each bad input raises an error naming the culprit and writes no results."""
    monkeypatch.chdir(tmp_path)
    before = _files(tmp_path)
    message = RUNNERS[case.surface](case, tmp_path)
    for needle in case.culprit:
        assert needle in message, f"error does not name {needle!r}:\n{message[-3000:]}"
    assert not (tmp_path / "results").exists(), "a bad input created results/"
    created = {
        p for p in _files(tmp_path) - before if p.parts[0] not in (".snakemake", "config.yaml")
    }
    assert not created, f"a bad input wrote files: {sorted(map(str, created))}"


def test_table_is_large_and_ids_unique() -> None:
    """At least 25 bad inputs, across every surface, ids unique."""
    assert len(CASES) >= 25
    assert len({case.id for case in CASES}) == len(CASES)
    assert {case.surface for case in CASES} == set(RUNNERS)


SURFACE_TITLES = {
    "config": "Config file, checked by `attnrmt.sweep.load_config` (schema and semantics)",
    "snakemake": "Config file, through a real `snakemake -n` of the Snakefile",
    "cli": "Command line (`attnrmt ...`)",
    "api": "Python API",
}


def _example_error(case: Case) -> str:
    return " ".join(f"`{c}`" for c in case.culprit)


def render_docs() -> str:
    """docs/bad-inputs.md, generated from :data:`CASES`."""
    lines = [
        "# Bad inputs and the errors they give",
        "",
        "<!-- Generated from tests/e2e/test_bad_inputs.py (CASES) by"
        " `python tests/e2e/test_bad_inputs.py`; do not edit by hand. -->",
        "",
        "Every input below is rejected **before anything is computed or written** (no",
        "`results/` directory appears) with an error that names the culprit: the config key",
        "path (e.g. `sweeps.main.d[0]`) or the argument, and the offending value. Each row",
        "is a case of the parametrised test `tests/e2e/test_bad_inputs.py`, which checks exactly",
        "that; the last column lists the pieces the message must contain.",
        "",
        "Config errors come from `attnrmt.sweep.spec.config.validate_config` (raising",
        "`ConfigError`, which lists **every** problem, one line each): the Snakefile calls",
        "the same function once, so `snakemake -n` prints each problem on a line starting",
        "`attnrmt: invalid configuration:` (no traceback), and `attnrmt validate CONFIG`",
        "prints the same messages without Snakemake. A misspelt key is named with a",
        "suggestion at every level; a problem with a value the config does not set says it",
        "is the default. Python API errors are `ValueError` naming `argument=value`.",
        "",
        "One rule for values that look like numbers, everywhere: in a config FILE a quoted",
        'number or boolean (`snr: "1.5"`, `centered: "true"`) is text, as YAML means it,',
        "and is rejected; values from Snakemake's command line (`--config key=value`, a",
        "profile's `config:`) arrive as strings whatever was meant, so the Snakefile gives",
        "them the schema's type back. A YAML syntax error is named with file, line and",
        "column by `attnrmt validate` (and `make run`, which validates first); Snakemake's",
        "own reader of `--configfile` only says the file is not valid YAML.",
        "",
    ]
    for surface, title in SURFACE_TITLES.items():
        rows = [case for case in CASES if case.surface == surface]
        if not rows:
            continue
        lines += [f"## {title}", "", "| case | bad input | error names |", "|---|---|---|"]
        for case in rows:
            lines.append(f"| `{case.id}` | {case.bad} | {_example_error(case)} |")
        lines.append("")
    return "\n".join(lines)


def test_docs_in_sync() -> None:
    """docs/bad-inputs.md is the rendering of :data:`CASES`."""
    assert DOCS.read_text() == render_docs(), (
        "docs/bad-inputs.md is stale: run `python tests/e2e/test_bad_inputs.py`"
    )


if __name__ == "__main__":
    DOCS.write_text(render_docs())
    print(f"wrote {os.path.relpath(DOCS)} ({len(CASES)} cases)")
