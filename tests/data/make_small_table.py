"""Write the file tables of the tests (docs/model.md, "Tables from a file"), rows ``mu_k +
Sigma^(1/2) g_v`` with ``Sigma = diag(3, ..., 3, 1, ..., 1) / 1.5`` (3 on the first quarter
of the coordinates, unit mean):

* ``small_table.npy`` (160 x 40 float64) and ``small_table_labels.npy`` (160 labels
  ``"a"``/``"b"``, 80 each, interleaved): ``mu = +-0.4 (1, ..., 1) / sqrt(40)``, seed 37;
* ``small_table3.npy`` (180 x 60) and ``small_table3_labels.npy`` (labels 0, 1, 2, 60
  each, cycled): ``mu_k = r_k e_k`` with norms ``r = (1.2, 0.8, 0.4)`` on the first three
  coordinates, seed 373.

Run from the repository root: ``python tests/data/make_small_table.py``."""

from pathlib import Path

import numpy as np

here = Path(__file__).parent


def noise(V: int, d: int, rng: np.random.Generator) -> np.ndarray:
    lam = np.where(np.arange(d) < d // 4, 3.0, 1.0) / 1.5
    return rng.standard_normal((V, d)) * np.sqrt(lam)


V, d = 160, 40
rng = np.random.default_rng(37)
classes = np.tile([1.0, -1.0], V // 2)
rows = classes[:, None] * 0.4 / np.sqrt(d) + noise(V, d, rng)
np.save(here / "small_table.npy", rows)
np.save(here / "small_table_labels.npy", np.where(classes > 0, "a", "b"))

V, d = 180, 60
labels = np.tile([0, 1, 2], V // 3)
means = np.zeros((3, d))
means[[0, 1, 2], [0, 1, 2]] = (1.2, 0.8, 0.4)
np.save(here / "small_table3.npy", means[labels] + noise(V, d, np.random.default_rng(373)))
np.save(here / "small_table3_labels.npy", labels)
