"""Anisotropic tables (docs/model.md, "Anisotropic tables"): validation, the spectrum's
layout, and the covariance of the drawn noise.

Covariance check: ``V = 40000`` rows of ``d = 20`` at snr 0; the sample covariance's
entries have standard error ``<= sqrt(2 / V) lambda_max ~ 0.007 lambda_max``, so 0.05
relative is ~7 SE. Dropping ``sqrt(lambda)`` or the reflection makes it fail.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from attnrmt.model.table import sample_table
from attnrmt.model.table_laws import covariance_spectrum, validate_table

POWER = {"kind": "anisotropic", "spectrum": "power", "beta": 1.0}


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ({**POWER, "signal": "middle"}, "table.signal='middle'"),
        ({**POWER, "spectrum": "powr", "signal": "top"}, "did you mean 'power'"),
        ({**POWER, "beta": -1, "signal": "top"}, "table.beta=-1"),
        ({**POWER, "ratio": 2, "signal": "top"}, "table.ratio"),
        ({"kind": "anisotropic", "spectrum": [1, 0], "signal": "top"}, "positive numbers"),
        ({"kind": "anisotropic", "spectrum": "two_level", "ratio": 2, "signal": "top"}, "fraction"),
    ],
)
def test_validation_names_the_key(spec: Any, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment.replace("(", r"\(")):
        validate_table(spec)


def test_spectrum_layout_unit_mean_and_signal_first() -> None:
    lam = covariance_spectrum(validate_table({**POWER, "signal": "bottom"}), 10)
    assert lam is not None
    np.testing.assert_allclose(lam.mean(), 1.0)
    assert lam[0] == lam.min() and lam[9] == lam.max() == pytest.approx(10 * lam[0])
    law = validate_table({"kind": "anisotropic", "spectrum": [3, 1], "signal": "top"})
    np.testing.assert_allclose(covariance_spectrum(law, 4), [1.5, 1.5, 0.5, 0.5])
    with pytest.raises(ValueError, match="d=5 must be a multiple"):
        covariance_spectrum(law, 5)


@pytest.mark.parametrize("signal", ["top", "bottom", "random"])
def test_noise_has_the_covariance(signal: str) -> None:
    law = validate_table({**POWER, "signal": signal})
    table = sample_table(20, 40000, 0.0, np.random.default_rng(3), table=law)
    cov = table.embeddings.T @ table.embeddings / 40000
    lam = covariance_spectrum(law, 20)
    assert lam is not None
    np.testing.assert_allclose(np.linalg.eigvalsh(cov), np.sort(lam), rtol=0.05, atol=0.01)
    if signal == "random":  # u = e_1 is not an eigenvector: cov e_1 has other entries
        assert np.abs(cov[1:, 0]).max() > 0.05
    else:
        assert cov[0, 0] == pytest.approx(lam[0], rel=0.05)
        assert np.abs(cov[1:, 0]).max() < 0.05
