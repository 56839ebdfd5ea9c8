"""The sweep key ``table`` (docs/data-contract.md, "Table laws"): validation with key path,
value and suggestion; a Gaussian sweep keeps every key, seed and kwarg it had; another law
enters the key, the kwargs, the config hash and the models."""

from __future__ import annotations

import pytest

from attnrmt.sweep.spec.config import ConfigError, load_valid_config
from attnrmt.sweep.spec.plan import _CELL_FIELDS, Cell, plan_run

T3 = {"t3": {"kind": "student_t", "nu": 3.0}}


def _plan(tiny_config, table=None, table_models=None):
    config = tiny_config(sweep={} if table is None else {"table": table})
    if table_models is not None:
        config["table_models"] = table_models
    valid = load_valid_config(config)
    return plan_run(valid.config, valid.sweeps).sweeps["grid"]


def _error(tiny_config, table, table_models=None) -> str:
    config = tiny_config(sweep={"table": table})
    if table_models is not None:
        config["table_models"] = table_models
    with pytest.raises(ConfigError) as raised:
        load_valid_config(config)
    return str(raised.value)


def test_misspelt_law_is_named_with_a_suggestion(tiny_config) -> None:
    message = _error(tiny_config, "t33", T3)
    assert "sweeps.grid.table='t33'" in message and "(did you mean 't3'?)" in message
    message = _error(tiny_config, "unifrom")
    assert "sweeps.grid.table='unifrom'" in message and "(did you mean 'uniform'?)" in message


@pytest.mark.parametrize(
    ("law", "pieces"),
    [
        ({"kind": "student_t", "nu": 2}, ("table_models.bad.nu=2", "must be > 2")),
        ({"kind": "student_t", "nu": -3.5}, ("table_models.bad.nu=-3.5", "must be > 2")),
        ({"kind": "student_t"}, ("table_models.bad=", "needs 'nu'")),
        ({"kind": "sparse", "p": 0}, ("table_models.bad.p=0", "(0, 1]")),
        ({"kind": "studnet_t", "nu": 3}, ("table_models.bad.kind='studnet_t'", "'student_t'?")),
        ({"kind": "sparse", "nu": 3}, ("table_models.bad=", "unexpected parameter 'nu'")),
        ({"kind": "student_t", "nuu": 3}, ("table_models.bad: unknown key 'nuu'", "'nu'?")),
    ],
)
def test_bad_law_is_named_with_key_and_value(tiny_config, law, pieces) -> None:
    message = _error(tiny_config, "bad", {"bad": law})
    for piece in pieces:
        assert piece in message, message


def test_unused_bad_law_is_still_refused_and_reported_once(tiny_config) -> None:
    config = tiny_config()
    config["table_models"] = {"bad": {"kind": "student_t", "nu": 1.0}}
    with pytest.raises(ConfigError) as raised:
        load_valid_config(config)
    assert raised.value.problems == (
        "table_models.bad.nu=1.0: must be > 2 (a Student t of unit variance needs nu > 2)",
    )
    config["table_models"] = {"gaussian": {"kind": "sparse", "p": 0.5}}
    with pytest.raises(ConfigError, match="'gaussian' is a built-in table law"):
        load_valid_config(config)


def test_gaussian_keeps_every_key_seed_and_kwarg(tiny_config) -> None:
    plain = _plan(tiny_config)
    gaussian = _plan(tiny_config, "gaussian")
    assert gaussian.cell_keys() == plain.cell_keys()
    assert [b.key for b in gaussian.blocks] == [b.key for b in plain.blocks]
    assert gaussian.blocks[0].cells.block_params(3) == plain.blocks[0].cells.block_params(3)
    assert "table" not in plain.models and plain.table is None
    assert "table" not in plain.cells[0].simulate_kwargs()
    # naming the law is a config change (the stores say which law), not a cell change
    assert gaussian.models["table"] == {"gaussian": {"kind": "gaussian"}}
    assert gaussian.config_sha256 != plain.config_sha256


def test_other_law_enters_key_kwargs_and_hash(tiny_config) -> None:
    plain = _plan(tiny_config)
    heavy = _plan(tiny_config, "t3", T3)
    signs = _plan(tiny_config, "rademacher")
    keys = [set(p.cell_keys()) for p in (plain, heavy, signs)]
    assert not keys[0] & keys[1] and not keys[0] & keys[2] and not keys[1] & keys[2]
    params = heavy.blocks[0].cells.block_params(3)
    assert all(p["kwargs"]["table"] == {"kind": "student_t", "nu": 3.0} for p in params)
    assert heavy.cells[0].simulate_kwargs()["table"] == {"kind": "student_t", "nu": 3.0}
    assert heavy.models["table"] == {"t3": {"kind": "student_t", "nu": 3.0}}
    # the plan's hashed-per-line keys equal the key of a Cell built from its fields
    first = heavy.cells[0]
    rebuilt = Cell(
        **{name: getattr(first, name) for name in _CELL_FIELDS if name != "table_spec"},
        table_spec={"kind": "student_t", "nu": 3.0},
    )
    assert rebuilt.key == heavy.grid.key_hex(0)
    assert Cell(**{n: getattr(first, n) for n in _CELL_FIELDS if n != "table_spec"}).key in keys[0]
    assert len({p.config_sha256 for p in (plain, heavy, signs)}) == 3
