"""Write ``small_table.npy`` (160 x 40 float64) and ``small_table_labels.npy`` (160 labels
``"a"``/``"b"``, 80 each, interleaved): rows ``s_v mu + Sigma^(1/2) g_v`` with ``Sigma =
diag(3, ..., 3, 1, ..., 1) / 1.5`` (3 on the first 10 coordinates, unit mean), ``mu = 0.4
(1, ..., 1) / sqrt(40)`` and seed 37 (docs/model.md, "Tables from a file"). Run from the
repository root: ``python tests/data/make_small_table.py``."""

from pathlib import Path

import numpy as np

V, d = 160, 40
rng = np.random.default_rng(37)
lam = np.where(np.arange(d) < 10, 3.0, 1.0) / 1.5
classes = np.tile([1.0, -1.0], V // 2)
rows = classes[:, None] * 0.4 / np.sqrt(d) + rng.standard_normal((V, d)) * np.sqrt(lam)
here = Path(__file__).parent
np.save(here / "small_table.npy", rows)
np.save(here / "small_table_labels.npy", np.where(classes > 0, "a", "b"))
