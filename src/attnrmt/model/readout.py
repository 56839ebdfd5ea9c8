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
    """Test accuracy of a ridge-regression classifier of ``labels`` (N,) in {-1, +1} from
    ``features`` (N, d) (docs/model.md, "What the pipeline tests"); deterministic:

    1. the first ``floor(train_fraction * N)`` rows train, the rest test;
    2. every feature standardised with the training mean and spread (zero spread: centred);
    3. ``(X^T X + n ridge I) beta = X^T (y - ybar)`` on the training rows (``ybar`` the
       intercept; primal or dual form, the smaller; ``ridge`` a scale-free per-sample
       penalty);
    4. prediction ``sign(X_test beta + ybar)`` (0 counts as +1).

    O(N min(N, d)^2 + min(N, d)^3)."""
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
    (docs/model.md, "K-class readout"): the steps of :func:`ridge_readout_accuracy` with
    one-hot targets, prediction ``argmax_k`` (ties to the lowest class); ``K = 2`` is that
    readout exactly. O(n min(n, d)^2 + min(n, d)^3 + n d K)."""
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
    primal = x_train.shape[1] <= x_train.shape[0]
    gram = x_train.T @ x_train if primal else x_train @ x_train.T
    gram[np.diag_indices_from(gram)] += penalty
    if primal:
        return np.linalg.solve(gram, x_train.T @ target)
    return x_train.T @ np.linalg.solve(gram, target)


def _standardised_split(
    features: np.ndarray, train_fraction: float
) -> tuple[np.ndarray, np.ndarray, int]:
    """The train rows (the first ``floor(train_fraction N)``) and the test rows, both
    standardised with the train set's column means and spreads (zero spread taken as 1),
    and the train size; ValueError when either set is empty. O(N d)."""
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
