"""How tests/sweep/data/format2_store was generated (format-2 writer of commit e6d9666).

Run at that commit from the repository root, with ``PYTHONPATH=src:.``:
``python tests/sweep/data/format2_store/generate.py tests/sweep/data/format2_store``
(then ``cell_table/.lock`` removed). It does not run on later commits: the format-2
writer is gone.
"""

import shutil
import sys
from pathlib import Path

from tests.sweep.conftest import store_plan, write_block_fragments

from attnrmt.sweep import store

out = Path(sys.argv[1])
shutil.rmtree(out / "grid", ignore_errors=True)
sweep_dir = out / "grid"
base = store_plan()
paths = write_block_fragments(base, sweep_dir)
store.gather_cells(base.sweeps["grid"], paths, sweep_dir / "cells.zarr", base.seed)
extended = store_plan(snr=[0.0, 2.0, 3.0])
paths = write_block_fragments(extended, sweep_dir)
store.gather_cells(extended.sweeps["grid"], paths, sweep_dir / "cells.zarr", extended.seed)
