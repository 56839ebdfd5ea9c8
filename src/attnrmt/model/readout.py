"""Downstream task: ridge-regression readout of the sequence label y
(docs/model.md, "What the pipeline tests").

Pure function of arrays; used by :func:`attnrmt.model.simulate_cell` for ``label`` models.
"""

from __future__ import annotations

import numpy as np

from attnrmt._validation import check_finite_array, check_open_interval, check_positive

DEFAULT_RIDGE = 1.0
DEFAULT_TRAIN_FRACTION = 0.5


def ridge_readout_accuracy(
    features: np.ndarray,
    labels: np.ndarray,
    *,
    train_fraction: float = DEFAULT_TRAIN_FRACTION,
    ridge: float = DEFAULT_RIDGE,
) -> float:
    """Test accuracy of a ridge-regression classifier of ``labels`` from ``features``.

    Procedure (deterministic, no randomness: the rows are already i.i.d.):

    1. Split: the first ``floor(train_fraction * N)`` rows train, the rest test.
    2. Standardise every feature with the training mean and standard deviation
       (a feature with zero training spread is only centred).
    3. Fit ``beta = argmin (1/n) ||X beta - (y - ybar)||^2 + ridge ||beta||^2`` on the
       training rows (``ybar`` the training label mean, acting as intercept); i.e.
       ``(X^T X + n ridge I) beta = X^T (y - ybar)``, solved in the primal (``d <= n``) or
       the dual (``d > n``) form, whichever is smaller. Because the features are
       standardised, ``ridge`` is a scale-free per-sample penalty; the default 1.0 is a
       moderate shrinkage for the proportional regime ``d ~ n``.
    4. Predict ``sign(X_test beta + ybar)`` (0 counts as +1).

    Parameters
    ----------
    features : ndarray (N, d)
        Pooled vectors ``c_n`` as rows.
    labels : ndarray (N,)
        ``y_n in {-1, +1}``.
    train_fraction : float in (0, 1)
    ridge : float > 0

    Returns
    -------
    float
        Fraction of test rows classified correctly.
    """
    features = check_finite_array("features", features)
    labels = check_finite_array("labels", labels)
    train_fraction = float(check_open_interval("train_fraction", train_fraction, 0.0, 1.0))
    ridge = float(check_positive("ridge", ridge))
    if features.ndim != 2 or labels.shape != (features.shape[0],):
        raise ValueError(
            f"features shape {features.shape}, labels shape {labels.shape}: need (N, d), (N,)"
        )
    x_train, x_test, n_train = _standardised_split(features, train_fraction)
    label_mean = labels[:n_train].mean()
    target = labels[:n_train] - label_mean
    beta = _ridge_coefficients(x_train, target, n_train * ridge)
    predictions = np.where(x_test @ beta + label_mean >= 0, 1.0, -1.0)
    return float(np.mean(predictions == labels[n_train:]))


# ------------------------------------------------------------------ K classes


def ridge_readout_accuracy_multiclass(
    features: np.ndarray,
    classes: np.ndarray,
    K: int,
    *,
    train_fraction: float = DEFAULT_TRAIN_FRACTION,
    ridge: float = DEFAULT_RIDGE,
) -> float:
    """Test accuracy of a one-vs-rest ridge classifier of ``classes`` in ``0..K-1``
    (docs/model.md, "K-class readout").

    The steps of :func:`ridge_readout_accuracy` with the one-hot targets ``Y`` (n, K) in
    place of ``y``: one ridge system with ``K`` right-hand sides,
    ``(X^T X + n ridge I) B = X^T (Y - Ybar)`` (primal or dual, as there), and the
    prediction ``argmax_k (X_test B + Ybar)_k`` (ties to the lowest class). One-vs-rest
    least squares rather than multinomial (softmax) regression: it has the closed form of
    the binary readout, costs one factorisation for every class, and for ``K = 2`` it is
    that readout exactly (``y = 2 Y_0 - 1`` gives ``B_0 = -B_1 = beta / 2``, so the argmax
    is the sign rule, class 0 = ``+1`` winning ties). O(n min(n, d)^2 + min(n, d)^3 +
    n d K).

    Parameters
    ----------
    features : ndarray (N, d)
    classes : ndarray (N,)
        Integer labels in ``0..K-1``.
    K : int >= 2
    """
    features = check_finite_array("features", features)
    classes = check_finite_array("classes", classes)
    if features.ndim != 2 or classes.shape != (features.shape[0],):
        raise ValueError(
            f"features shape {features.shape}, classes shape {classes.shape}: need (N, d), (N,)"
        )
    if K < 2 or np.any((classes < 0) | (classes > K - 1) | (classes != np.round(classes))):
        raise ValueError(f"classes: must be integers in 0..K-1 with K={K!r} >= 2")
    train_fraction = float(check_open_interval("train_fraction", train_fraction, 0.0, 1.0))
    ridge = float(check_positive("ridge", ridge))
    x_train, x_test, n_train = _standardised_split(features, train_fraction)
    one_hot = (classes[:, None] == np.arange(K)).astype(np.float64)
    label_mean = one_hot[:n_train].mean(axis=0)
    target = one_hot[:n_train] - label_mean
    beta = _ridge_coefficients(x_train, target, n_train * ridge)
    predictions = np.argmax(x_test @ beta + label_mean, axis=1)
    return float(np.mean(predictions == classes[n_train:]))


def _ridge_coefficients(x_train: np.ndarray, target: np.ndarray, penalty: float) -> np.ndarray:
    """Ridge coefficients ``(X^T X + penalty I)^{-1} X^T y`` for ``X = x_train`` (n, p) and
    targets ``y`` (n,) or (n, K), solved in the smaller dimension: the primal system when
    ``p <= n``, else the dual ``X^T (X X^T + penalty I)^{-1} y``. O(n p min(n, p))."""
    n_train, n_features = x_train.shape
    if n_features <= n_train:
        gram = x_train.T @ x_train
        gram[np.diag_indices_from(gram)] += penalty
        return np.linalg.solve(gram, x_train.T @ target)
    gram = x_train @ x_train.T
    gram[np.diag_indices_from(gram)] += penalty
    return x_train.T @ np.linalg.solve(gram, target)


def _standardised_split(
    features: np.ndarray, train_fraction: float
) -> tuple[np.ndarray, np.ndarray, int]:
    """The first ``floor(train_fraction N)`` rows as the train set, the rest as the test
    set, both standardised with the train set's column means and spreads (a zero spread
    taken as 1); also the train size. O(N d).

    Raises
    ------
    ValueError
        ``train_fraction`` leaves an empty train or test set.
    """
    n_total = features.shape[0]
    n_train = int(np.floor(train_fraction * n_total))
    if n_train < 1 or n_train >= n_total:
        raise ValueError(
            f"features with N={n_total} rows: train_fraction={train_fraction} leaves an "
            "empty train or test set"
        )
    train, test = features[:n_train], features[n_train:]
    mean = train.mean(axis=0)
    spread = train.std(axis=0)
    spread[spread == 0] = 1.0
    return (train - mean) / spread, (test - mean) / spread, n_train


__all__ = [
    "DEFAULT_RIDGE",
    "DEFAULT_TRAIN_FRACTION",
    "ridge_readout_accuracy",
    "ridge_readout_accuracy_multiclass",
]
