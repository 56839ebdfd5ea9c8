"""The names of the data contract, defined once (``docs/data-contract.md``).

Every module that names an axis, a theory variant, a built-in model or a stored field
imports it from here; nothing else in the package spells these tuples out. This module
imports nothing from the package, so every room (model, theory, sweep, analysis) may use it.
"""

from __future__ import annotations

#: Sweep axes in their fixed order: plan, fragments, stores and analysis all use it
#: (``docs/data-contract.md``, "Dimensions").
AXES: tuple[str, ...] = ("d", "delta", "gamma", "T", "positional", "weights", "snr", "centered")

#: Axes that define one snr curve ("line"): every axis but ``snr``.
CURVE_AXES: tuple[str, ...] = tuple(a for a in AXES if a != "snr")

#: Theory variants (``docs/model.md``, "Two variants of the theory").
VARIANTS: tuple[str, ...] = ("paper", "finite_vocab")

#: The two BBP transitions (``docs/model.md``, "Thresholds").
TRANSITIONS: tuple[str, ...] = ("population", "sample")

#: Positional models that need no entry in ``positional_models``.
BUILTIN_POSITIONAL: tuple[str, ...] = ("iid",)

#: Weight models that need no entry in ``weight_models`` (``docs/model.md``, "Weights").
BUILTIN_WEIGHTS: tuple[str, ...] = ("mean", "last", "optimal", "harmonic")

#: Significant digits a real parameter keeps in a cell's identity and on an axis
#: (``0.1`` from a linspace equals a typed ``0.1``).
SIGNIFICANT_DIGITS: int = 12

#: CellResult fields with a top-k dimension (``docs/data-contract.md``, "cells.zarr").
TOP_K_FIELDS: tuple[str, ...] = (
    "top_eigenvalues",
    "overlap_signal",
    "overlap_class_mean",
    "overlap_table_mean",
    "pop_top_eigenvalues",
    "pop_overlap_signal",
)

#: Pooling scalars, measured per replicate (random only for ``causal_attention``).
POOLING_FIELDS: tuple[str, ...] = ("alpha", "kappa", "sigma")

#: Realised sizes of a cell: vocabulary ``V`` and sample count ``N``.
SIZE_FIELDS: tuple[str, ...] = ("V", "N")

#: Integer fill value of an absent cell (``V``, ``N``).
ABSENT_INT: int = -1


def round_significant(value: float) -> float:
    """``value`` rounded to :data:`SIGNIFICANT_DIGITS` significant digits (``-0.0`` -> ``0.0``).

    ``round_significant(numpy.linspace(0, 0.3, 4)[1]) == round_significant(0.1) == 0.1``,
    so a grid point hashes the same whether it came from a linspace or was typed.
    """
    return float(f"{float(value):.{SIGNIFICANT_DIGITS}g}") + 0.0

#: How a cell measures the spectrum of S (``docs/data-contract.md``, "cells.zarr"):
#: ``full`` (all d eigenvalues, forms S) or ``top`` (matrix-free, the 2 top_k largest).
SPECTRA: tuple[str, ...] = ("full", "top")
