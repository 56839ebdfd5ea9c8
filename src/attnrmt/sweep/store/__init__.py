"""The result store's door (``docs/architecture.md``, "Store"): one module per artefact on
disk; the names below are those used from outside the package."""

from attnrmt._lazy import lazy_door

#: Where each public name lives (imported on first use, PEP 562).
_EXPORTS = {
    "STORE_FORMAT_VERSION": "attnrmt.sweep.store.cell_table.layout",
    "encode_fragment": "attnrmt.sweep.store.fragments",
    "gather_cells": "attnrmt.sweep.store.cell_table.writer",
    "open_cells": "attnrmt.sweep.store.cell_table.reader",
    "open_results": "attnrmt.sweep.store.cell_table.reader",
    "read_failures": "attnrmt.sweep.store.failures",
    "read_fragment_cell_ids": "attnrmt.sweep.store.fragments",
    "theory_dataset": "attnrmt.sweep.store.theory",
    "write_fragment": "attnrmt.sweep.store.fragments",
    "write_theory": "attnrmt.sweep.store.theory",
    "write_zarr_atomically": "attnrmt.sweep.store.grid",
}

__getattr__, __dir__ = lazy_door(__name__, _EXPORTS)

__all__ = sorted(_EXPORTS)
