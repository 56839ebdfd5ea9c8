"""Laws of the embedding table's noise ``z_v`` (docs/model.md, "Table laws", where the
laws, their entries as functions of the Gaussian table's normals and their moments are
listed; "Anisotropic tables"; "Tables from a file"). Imports only numpy (scipy on first
use of ``uniform``), so a sweep config validates a law without importing the simulator."""

from __future__ import annotations

import difflib
import hashlib
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from attnrmt._validation import check_numeric, split_model_spec

TABLE_KINDS = ("gaussian", "rademacher", "uniform", "student_t", "sparse", "anisotropic", "file")

_PARAMS: dict[str, tuple[str, ...]] = {
    "gaussian": (),
    "rademacher": (),
    "uniform": (),
    "student_t": ("nu",),
    "sparse": ("p",),
    "anisotropic": ("spectrum", "signal", "beta", "ratio", "fraction"),
    "file": ("path", "labels", "sha256"),
}

#: Where the signal direction sits in the eigenbasis of an anisotropic table's ``Sigma``.
SIGNALS = ("random", "top", "bottom")
_SPECTRUM_PARAMS = {"power": ("beta",), "two_level": ("ratio", "fraction")}

#: Laws whose entries need a second, auxiliary draw (a Gamma or a uniform per entry).
AUXILIARY_KINDS = ("student_t", "sparse")

# Rows a chunk of the auxiliary draws (:func:`apply_table_law`): ~256 KiB of float64, the
# buffer the auxiliary numbers are drawn into.
_AUXILIARY_CHUNK_BYTES = 1 << 18


def _suggest(value: Any, options: tuple[str, ...]) -> str:
    """`` (did you mean 'x'?)`` for the closest option, or ``""``."""
    close = difflib.get_close_matches(str(value), options, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _scalar(name: str, value: Any) -> float:
    array = check_numeric(name, value)
    if array.ndim != 0:
        raise ValueError(f"{name}={value!r}: must be a number")
    return float(array) + 0.0


def validate_table(spec: Mapping[str, Any] | str | None = None) -> dict[str, Any]:
    """The canonical dict of a table law ``spec`` (docs/model.md, "Table laws"): a name of
    :data:`TABLE_KINDS` or ``{"kind": ..., **params}`` (None: ``gaussian``) -> keys sorted,
    parameters as floats; ValueError naming the key and value (with the closest known
    name) otherwise. O(1), plus reading the files of a ``file`` law."""
    if spec is None:
        spec = "gaussian"
    kind = (
        spec if isinstance(spec, str) else (spec.get("kind") if isinstance(spec, Mapping) else None)
    )
    if isinstance(kind, str) and kind not in _PARAMS:
        raise ValueError(
            f"table.kind={kind!r}: must be one of "
            f"{', '.join(map(repr, TABLE_KINDS))}{_suggest(kind, TABLE_KINDS)}"
        )
    if isinstance(spec, Mapping) and isinstance(kind, str):
        unknown = [key for key in spec if key != "kind" and key not in _PARAMS[kind]]
        if unknown:
            raise ValueError(
                f"table={dict(spec)!r}: unexpected parameter {unknown[0]!r} for kind "
                f"{kind!r}{_suggest(unknown[0], _PARAMS[kind])} "
                f"(allowed: {list(_PARAMS[kind])})"
            )
    kind, params = split_model_spec("table", spec, _PARAMS)
    canonical: dict[str, Any] = {"kind": kind}
    if kind == "anisotropic":
        return dict(sorted({**canonical, **_anisotropic(params)}.items()))
    if kind == "file":  # the files' content enters the canonical spec (and cell keys)
        law = {"kind": kind, "labels": params.get("labels"), "path": params.get("path")}
        load_file_table(law)
        digest = hashlib.sha256()
        for key in ("path", "labels"):
            digest.update(Path(str(law[key])).read_bytes())
        if params.get("sha256", digest.hexdigest()) != digest.hexdigest():
            raise ValueError(f"table.sha256={params['sha256']!r}: the files changed since")
        return {**law, "sha256": digest.hexdigest()}
    for name in _PARAMS[kind]:
        if name not in params:
            raise ValueError(f"table={spec!r}: {kind} needs {name!r}")
    if kind == "student_t":
        nu = _scalar("table.nu", params["nu"])
        if not nu > 2:
            raise ValueError(
                f"table.nu={params['nu']!r}: must be > 2 (a Student t of "
                "unit variance needs nu > 2)"
            )
        canonical["nu"] = nu
    elif kind == "sparse":
        p = _scalar("table.p", params["p"])
        if not 0 < p <= 1:
            raise ValueError(f"table.p={params['p']!r}: must lie in (0, 1]")
        canonical["p"] = p
    return dict(sorted(canonical.items()))


def _anisotropic(params: Mapping[str, Any]) -> dict[str, Any]:
    """The parameters of an ``anisotropic`` law, checked (docs/model.md, "Anisotropic
    tables"). O(list)."""
    signal, spectrum = params.get("signal"), params.get("spectrum")
    if signal not in SIGNALS:
        raise ValueError(f"table.signal={signal!r}: must be one of {', '.join(map(repr, SIGNALS))}")
    out: dict[str, Any] = {"signal": signal}
    needs = _SPECTRUM_PARAMS.get(spectrum, ()) if isinstance(spectrum, str) else ()
    if isinstance(spectrum, str) and spectrum not in _SPECTRUM_PARAMS:
        raise ValueError(
            f"table.spectrum={spectrum!r}: must be 'power', 'two_level' or a list of "
            f"positive numbers{_suggest(spectrum, tuple(_SPECTRUM_PARAMS))}"
        )
    extra = sorted(set(params) - {"signal", "spectrum", *needs})
    if extra:
        raise ValueError(f"table.{extra[0]}: not a parameter of spectrum={spectrum!r}")
    if not isinstance(spectrum, str):
        values = check_numeric("table.spectrum", spectrum)
        if values.ndim != 1 or values.size == 0 or np.any(values <= 0):
            raise ValueError(f"table.spectrum={spectrum!r}: must be a list of positive numbers")
        return {**out, "spectrum": [float(v) for v in values]}
    out["spectrum"] = spectrum
    for name in needs:
        if name not in params:
            raise ValueError(f"table.spectrum={spectrum!r} needs {name!r}")
        out[name] = _scalar(f"table.{name}", params[name])
    bad = {
        "beta": out.get("beta", 0.0) < 0,
        "ratio": out.get("ratio", 1.0) <= 0,
        "fraction": not 0 < out.get("fraction", 0.5) < 1,
    }
    for name, wrong in bad.items():
        if wrong:
            bound = {"beta": ">= 0", "ratio": "> 0", "fraction": "in (0, 1)"}[name]
            raise ValueError(f"table.{name}={params[name]!r}: must be {bound}")
    return out


def load_file_table(law: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """The rows of a ``file`` table sorted by class and their classes ``0 .. K-1``
    (docs/model.md, "Tables from a file"): ``path`` a ``.npy`` of shape ``(V, d)``, finite,
    ``labels`` a ``.npy`` of ``V`` labels of ``K >= 2`` values, ``V/K`` each (class ``k`` the
    ``k``-th smallest value). ValueError naming the file and the shape. O(V d)."""
    arrays = []
    for key in ("path", "labels"):
        name = law.get(key)
        if not isinstance(name, str) or not name.endswith(".npy"):
            raise ValueError(f"table.{key}={name!r}: must be the name of a .npy file")
        try:
            arrays.append(np.load(name, allow_pickle=False))
        except (OSError, ValueError) as error:
            raise ValueError(f"table.{key}={name!r}: cannot be read ({error})") from error
    rows, labels = arrays
    if rows.ndim != 2 or rows.dtype.kind != "f" or not np.isfinite(rows).all():
        raise ValueError(
            f"table.path={law['path']!r}: shape {rows.shape} {rows.dtype}: must be a finite "
            "float array of shape (V, d)"
        )
    values, classes = np.unique(labels.ravel(), return_inverse=True)
    counts = np.bincount(classes)
    if labels.shape != rows.shape[:1] or len(values) < 2 or np.any(counts != counts[0]):
        raise ValueError(
            f"table.labels={law['labels']!r}: shape {labels.shape}, classes "
            f"{dict(zip(values.tolist(), counts.tolist(), strict=True))}: must be "
            f"{rows.shape[0]} labels of K >= 2 classes of V/K tokens each"
        )
    order = np.argsort(classes, kind="stable")
    return np.array(rows[order], dtype=float), classes[order]


def covariance_spectrum(law: Mapping[str, Any], d: int) -> np.ndarray | None:
    """Eigenvalues of ``Sigma`` (unit mean) in coordinate order, the signal's eigenvalue at
    coordinate 0 for ``top`` / ``bottom``; None for a law without covariance
    (docs/model.md, "Anisotropic tables"). ValueError if ``d`` is not a multiple of a
    list's length. O(d)."""
    spectrum = law.get("spectrum")
    if spectrum is None:
        return None
    if spectrum == "power":
        lam = np.arange(1.0, d + 1.0) ** -law["beta"]
    elif spectrum == "two_level":
        high = min(d - 1, max(1, round(law["fraction"] * d)))
        lam = np.where(np.arange(d) < high, law["ratio"], 1.0)
    else:
        if d % len(spectrum):
            raise ValueError(
                f"table.spectrum has {len(spectrum)} values: d={d} must be a multiple of that"
            )
        lam = np.repeat(np.asarray(spectrum, dtype=float), d // len(spectrum))
    lam = lam / lam.mean()
    if law["signal"] != "random":
        at = int(np.argmax(lam) if law["signal"] == "top" else np.argmin(lam))
        lam[[0, at]] = lam[[at, 0]]
    return lam


def apply_covariance(rows: np.ndarray, root: np.ndarray, reflector: np.ndarray | None) -> None:
    """``rows <- rows diag(root) H`` in place, ``H = I - 2 h h^T`` for a unit ``reflector``
    ``h`` (None: ``H = I``): rows of covariance ``H diag(root^2) H``. O(rows x d)."""
    rows *= root
    if reflector is not None:
        rows -= np.outer(rows @ reflector, 2.0 * reflector)


def table_moments(spec: Mapping[str, Any] | str | None = None) -> tuple[float, float]:
    """``(E z^2, E z^4)`` of one table entry: ``(1.0, m4)``, ``m4`` from docs/model.md,
    "Table laws" (``inf`` for ``student_t`` with ``nu <= 4``). O(1)."""
    law = validate_table(spec)
    kind = law["kind"]
    if kind in ("gaussian", "anisotropic", "file"):
        return 1.0, 3.0
    if kind == "rademacher":
        return 1.0, 1.0
    if kind == "uniform":
        return 1.0, 9.0 / 5.0
    if kind == "student_t":
        nu = law["nu"]
        return 1.0, 3.0 * (nu - 2.0) / (nu - 4.0) if nu > 4 else math.inf
    return 1.0, 3.0 / law["p"]


def table_no_theory(spec: Mapping[str, Any] | str | None = None) -> str | None:
    """Why the Gaussian theory does not apply to a table law, or None when it does
    (docs/model.md, "Table laws"): the bulk edges, outliers and overlaps of the Gaussian
    theory hold for every law with ``E z^4 < inf`` (universality); without it the largest
    eigenvalues escape to infinity. O(1)."""
    law = validate_table(spec)
    if math.isfinite(table_moments(law)[1]):
        return None
    return (
        f"student_t nu={law['nu']:g} has infinite fourth moment: the Gaussian bulk "
        "edges, outliers and overlaps need E z^4 < inf (the largest eigenvalues of a "
        "table with heavier tails escape to infinity)"
    )


def apply_table_law(
    normals: np.ndarray, law: Mapping[str, Any], auxiliary: np.random.Generator | None
) -> np.ndarray:
    """Turn the standard normals ``g`` of ``normals`` (C-ordered rows) into the law's
    entries ``z`` in place (docs/model.md, "Table laws") and return it.

    ``law`` is a canonical spec (:func:`validate_table`); ``auxiliary`` draws the Gamma
    (``student_t``) or uniform (``sparse``) numbers, one per entry in row-major order,
    chunk by chunk into a buffer of ~256 KiB: the result does not depend on the chunking
    or on how the rows are split, provided each split keeps its own stream order.
    ``gaussian`` leaves ``normals`` untouched. O(rows x d) time, O(d + 32 K) extra memory.
    """
    kind = law["kind"]
    if kind in ("gaussian", "anisotropic", "file"):
        return normals
    if kind == "rademacher":
        return np.copysign(1.0, normals, out=normals)
    if kind == "uniform":
        from scipy.special import erf

        np.multiply(normals, 1.0 / math.sqrt(2.0), out=normals)
        erf(normals, out=normals)
        normals *= math.sqrt(3.0)
        return normals
    if auxiliary is None:
        raise ValueError(f"table={dict(law)!r}: needs an auxiliary generator")
    rows = normals.reshape(-1, normals.shape[-1])  # a view: (n,) -> (1, n), (r, d) as is
    chunk = max(1, _AUXILIARY_CHUNK_BYTES // (8 * max(1, rows.shape[1])))
    buffer = np.empty((min(chunk, rows.shape[0]), rows.shape[1]))
    for start in range(0, rows.shape[0], chunk):
        part = rows[start : start + chunk]
        drawn = buffer[: part.shape[0]]
        if kind == "student_t":
            nu = law["nu"]
            auxiliary.standard_gamma(0.5 * nu, out=drawn)
            # t sqrt((nu-2)/nu) with t = g / sqrt(2 G / nu): g sqrt((nu - 2) / (2 G))
            np.divide(0.5 * (nu - 2.0), drawn, out=drawn)
            np.sqrt(drawn, out=drawn)
        else:
            p = law["p"]
            auxiliary.random(out=drawn)
            drawn[...] = np.where(drawn < p, 1.0 / math.sqrt(p), 0.0)
        part *= drawn
    return normals
