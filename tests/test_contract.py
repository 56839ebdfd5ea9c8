"""The data contract's attribute table: CF/UDUNITS-parsable units and a long_name for every
stored variable, applied by the theory and analysis writers."""

from __future__ import annotations

import cf_units
import numpy as np
import pytest

from attnrmt.analysis.pipeline import analysis_dataset
from attnrmt.analysis.synthetic import make_synthetic
from attnrmt.contract import TOP_K_FIELDS, VARIABLE_ATTRS, with_variable_attrs
from attnrmt.sweep import store
from attnrmt.theory import THEORY_VARIABLES

#: Names whose values are strings or booleans: CF gives them no units.
LABELS = {"positional", "weights", "centered", "variant", "transition", "cell_key"}


@pytest.mark.parametrize("name", sorted(VARIABLE_ATTRS))
def test_every_entry_has_a_long_name_and_udunits_units(name: str) -> None:
    attrs = VARIABLE_ATTRS[name]
    assert attrs["long_name"].strip(), name
    if name in LABELS:
        assert "units" not in attrs, name
        return
    unit = cf_units.Unit(attrs["units"])  # raises on anything UDUNITS cannot parse
    assert unit.is_dimensionless() or unit.is_convertible("s"), (name, attrs["units"])
    if unit.is_dimensionless() and name not in {"replicate", "k", "eig", "position", "boot"}:
        # a dimensionless number says on which scale it lives (or that it is one)
        assert any(
            word in attrs["long_name"] for word in ("dimensionless", "count", "fraction", "flag")
        ), name


def test_the_table_covers_every_stored_name() -> None:
    cells, theory = make_synthetic(d=(40, 60), snr=(0.0, 1.0, 2.0, 3.0), replicates=3)
    analysis = analysis_dataset(cells, theory, {"bootstrap": 20})
    names = {*cells.variables, *theory.variables, *analysis.variables}
    names |= {*store.CELL_ATTRS, *TOP_K_FIELDS, *THEORY_VARIABLES}
    assert names - set(VARIABLE_ATTRS) == set()


def test_writers_apply_the_table() -> None:
    cells, theory = make_synthetic(d=(40, 60), snr=(0.0, 1.0, 2.0, 3.0), replicates=3)
    analysis = analysis_dataset(cells, theory, {"bootstrap": 20})
    for dataset in (theory, analysis):
        for name, variable in dataset.variables.items():
            for key, value in VARIABLE_ATTRS[name].items():
                assert variable.attrs[key] == value, (name, key)
    assert analysis["threshold_bound"].attrs["flag_meanings"].split()[0] == "none"


def test_with_variable_attrs_leaves_its_input_alone() -> None:
    cells, _ = make_synthetic(d=(40,), snr=(1.0,), replicates=2)
    cells["alpha"].attrs = {"units": "kappa", "note": "kept"}
    labelled = with_variable_attrs(cells)
    assert cells["alpha"].attrs == {"units": "kappa", "note": "kept"}
    assert labelled["alpha"].attrs == {**VARIABLE_ATTRS["alpha"], "note": "kept"}
    assert np.shares_memory(labelled["alpha"].values, cells["alpha"].values)
