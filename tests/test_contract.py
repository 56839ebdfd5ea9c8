"""The data contract's attribute table: CF/UDUNITS-parsable units and a long_name for every
stored variable, applied by the theory and analysis writers."""

from __future__ import annotations

import cf_units
import numpy as np
import pytest
import xarray as xr

from attnrmt.analysis.pipeline import analysis_dataset
from attnrmt.contract import LONG_NAME_WIDTH, TOP_K_FIELDS, VARIABLE_ATTRS, with_variable_attrs
from attnrmt.sweep.spec.schema import with_defaults
from attnrmt.sweep.store.grid import CELL_ATTRS
from attnrmt.theory import THEORY_VARIABLES
from tests.analysis.synthetic import make_synthetic

#: Names whose values are strings or booleans: CF gives them no units.
LABELS = {
    "positional",
    "weights",
    "centered",
    "variant",
    "transition",
    "cell_key",
    "table",
    "no_theory",
}


#: Names with a physical dimension: wall time and memory (everything else is dimensionless).
DIMENSIONAL = {"compute_seconds": "s", "peak_memory_bytes": "byte"}


@pytest.mark.parametrize("name", sorted(VARIABLE_ATTRS))
def test_every_entry_has_a_short_long_name_a_comment_and_units_where_dimensional(
    name: str,
) -> None:
    attrs = VARIABLE_ATTRS[name]
    assert set(attrs) <= {"long_name", "units", "comment"}, name
    assert attrs["long_name"].strip() and attrs["comment"].strip(), name
    label = attrs["long_name"] + (f" [{attrs['units']}]" if "units" in attrs else "")
    assert len(label) <= LONG_NAME_WIDTH, (name, label)  # one line on a plot axis
    if name in LABELS or name not in DIMENSIONAL:
        # CF 1.10, section 3.1: a dimensionless variable needs no units (xarray's plots
        # would append "[1]"); strings and booleans have none
        assert "units" not in attrs, name
        return
    cf_units.Unit(attrs["units"])  # raises on anything UDUNITS cannot parse
    assert attrs["units"] == DIMENSIONAL[name], name


def test_xarray_labels_every_variable_with_its_short_name_on_one_line() -> None:
    """What ``.plot`` writes on an axis: the long_name, ``[units]`` only where dimensional."""
    from xarray.plot.utils import label_from_attrs

    cells, theory = make_synthetic(d=(40, 60), snr=(0.0, 1.0, 2.0), replicates=2)
    analysis = analysis_dataset(cells, theory, with_defaults({"bootstrap": 20}, "analysis"))
    for dataset in (with_variable_attrs(cells), theory, analysis):
        for name, variable in dataset.variables.items():
            label = label_from_attrs(xr.DataArray(variable, name=name))
            units = VARIABLE_ATTRS[name].get("units")
            expected = VARIABLE_ATTRS[name]["long_name"] + (f" [{units}]" if units else "")
            assert label == expected, (name, label)
    assert label_from_attrs(analysis.d) == "dimension d"
    assert label_from_attrs(with_variable_attrs(cells).compute_seconds) == "compute time [s]"


def test_the_comment_says_on_which_scale_a_number_lives() -> None:
    """Without units, a number's comment says what kind of dimensionless number it is."""
    kinds = ("dimensionless", "count", "fraction", "index", "ratio")
    for name, attrs in VARIABLE_ATTRS.items():
        if name not in LABELS and "units" not in attrs:
            assert any(kind in attrs["comment"] for kind in kinds), (name, attrs["comment"])


def test_the_table_covers_every_stored_name() -> None:
    cells, theory = make_synthetic(d=(40, 60), snr=(0.0, 1.0, 2.0, 3.0), replicates=3)
    analysis = analysis_dataset(cells, theory, with_defaults({"bootstrap": 20}, "analysis"))
    names = {*cells.variables, *theory.variables, *analysis.variables}
    names |= {*CELL_ATTRS, *TOP_K_FIELDS, *THEORY_VARIABLES}
    assert names - set(VARIABLE_ATTRS) == set()


def test_writers_apply_the_table() -> None:
    cells, theory = make_synthetic(d=(40, 60), snr=(0.0, 1.0, 2.0, 3.0), replicates=3)
    analysis = analysis_dataset(cells, theory, with_defaults({"bootstrap": 20}, "analysis"))
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
