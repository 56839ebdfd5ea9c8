"""The dask: block as settings (run/cluster/settings.py)."""

from __future__ import annotations

import pytest

from attnrmt.sweep.compute.cluster import (
    ClusterSettings,
    dashboard_address,
)


def test_settings_defaults_come_from_the_schema_and_bind_to_loopback() -> None:
    settings = ClusterSettings.from_config({})
    assert (settings.mode, settings.n_workers, settings.threads_per_worker) == ("local", None, 1)
    assert settings.dashboard == "127.0.0.1:0"
    assert settings.jobqueue == {"n_workers": 2}  # the schema's only jobqueue default
    assert ClusterSettings.from_config({"dashboard": False}).dashboard is None
    with pytest.raises(ValueError, match=r"dask\.mode"):
        ClusterSettings.from_config({"mode": "cloud"})


def test_a_validated_dask_block_is_taken_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    """The walk: the validated config carries the defaults, so the block job does not
    return to the schema for them (docs/architecture.md, "The walk")."""
    from attnrmt.sweep.compute.cluster import settings as module
    from attnrmt.sweep.spec.config import load_config

    dask = load_config({"sweeps": {"s": {}}})["dask"]
    expected = ClusterSettings.from_config({})
    monkeypatch.setattr(module, "schema_defaults", lambda: pytest.fail("schema read again"))
    assert ClusterSettings.from_config(dask) == expected


@pytest.mark.parametrize(
    ("setting", "address"),
    [
        (True, "127.0.0.1:0"),
        (8787, "127.0.0.1:8787"),
        ("8787", "127.0.0.1:8787"),
        (":8787", "127.0.0.1:8787"),
        ("0.0.0.0:8787", "0.0.0.0:8787"),
        ("off", None),
        (False, None),
    ],
)
def test_dashboard_address_is_loopback_unless_an_address_is_given(setting, address) -> None:
    assert dashboard_address(setting) == address
