"""The one-vs-rest ridge readout of K classes (attnrmt.model.readout,
ridge_readout_accuracy_multiclass; docs/model.md, "K-class readout")."""

from __future__ import annotations

import numpy as np
import pytest

from attnrmt.model.readout import ridge_readout_accuracy, ridge_readout_accuracy_multiclass
from tests.model.conftest import classes_cell


@pytest.mark.parametrize("shape", [(200, 5), (40, 60)])  # primal (d <= n) and dual (d > n)
def test_two_classes_are_the_binary_readout_exactly(shape: tuple[int, int]) -> None:
    rng = np.random.default_rng(7)
    features = rng.standard_normal(shape)
    classes = rng.integers(0, 2, size=shape[0])
    features[:, 0] += 0.8 * (1 - 2 * classes)  # class 0 = sign +1, a weak signal
    binary = ridge_readout_accuracy(features, 1.0 - 2.0 * classes)
    assert ridge_readout_accuracy_multiclass(features, classes, 2) == binary
    assert 0.0 < binary < 1.0  # neither all right nor all wrong: both classes predicted


def test_separable_classes_are_read_out_and_noise_is_at_chance() -> None:
    rng = np.random.default_rng(3)
    n, d, K = 600, 10, 4
    classes = rng.integers(0, K, size=n)
    centres = 6.0 * np.eye(K, d)
    separable = centres[classes] + rng.standard_normal((n, d))
    assert ridge_readout_accuracy_multiclass(separable, classes, K) == 1.0
    noise = rng.standard_normal((n, d))
    # chance is 1/4; 300 test rows give a binomial sd of 0.025: 0.25 +- 0.1 is 4 sd
    assert abs(ridge_readout_accuracy_multiclass(noise, classes, K) - 0.25) < 0.1


def test_bad_inputs_are_named() -> None:
    features = np.zeros((10, 2))
    with pytest.raises(ValueError, match=r"classes: must be integers in 0\.\.K-1"):
        ridge_readout_accuracy_multiclass(features, np.full(10, 3), 3)
    with pytest.raises(ValueError, match="need \\(N, d\\), \\(N,\\)"):
        ridge_readout_accuracy_multiclass(features, np.zeros(9), 3)


def test_a_prefix_label_cell_reads_out_its_shared_label() -> None:
    """The shared label of a long prefix dominates the pooled vector at a strong signal:
    the readout is far above chance (1/3); iid labels have no sequence class (NaN)."""
    common = dict(d=30, delta=0.5, gamma=0.2, T=4, K=3, means="simplex", weights="mean")
    prefix = classes_cell(**common, labels={"kind": "prefix", "L": 4}, snr=8.0, seed=1)
    # measured 1.0 at this seed; with L = T the label is the whole sequence's, so a
    # readout below 0.8 would mean the wrong target or a broken fit
    assert prefix.downstream_accuracy > 0.8
    assert np.isnan(classes_cell(**common, labels="iid", snr=8.0).downstream_accuracy)
