"""One theory engine: every prediction of ``theory.zarr`` on named dimensions
(docs/data-contract.md, "theory.zarr"; the formulas of docs/model.md).

:func:`predict` assembles the formulas from known inputs; :func:`pooling_inputs`,
:func:`ratio_inputs`, :func:`predict_grid` and :func:`predict_point` build those inputs for
the theory rule, the analysis fallback and ``attnrmt theory``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import xarray as xr
from numpy.typing import ArrayLike

from attnrmt._validation import check_positive
from attnrmt.contract import ALL_AXES, TABLE_AXIS, VARIANTS, with_variable_attrs
from attnrmt.model.table_laws import table_no_theory, validate_table
from attnrmt.theory.anisotropic import anisotropic_parts
from attnrmt.theory.bulk import bulk_atom, bulk_edges
from attnrmt.theory.finite_t import with_finite_t
from attnrmt.theory.spike import mean_spike, spike

#: Variables of :func:`predict` that carry the ``variant`` dimension, in store order.
VARIANT_VARIABLES: tuple[str, ...] = (
    "bulk_lower_edge",
    "bulk_upper_edge",
    "bulk_atom",
    "pop_outlier",
    "sample_outlier",
    "pop_overlap_signal",
    "sample_overlap_signal",
    "threshold_snr_population",
    "threshold_snr_sample",
    "theta",
    "pop_top_eigenvalue",
    "sample_top_eigenvalue",
)

#: Variables of :func:`predict` without a ``variant`` dimension (the uncentred mean spike,
#: the population bulk edge, and the inputs as given).
COMMON_VARIABLES: tuple[str, ...] = (
    "pop_bulk_edge",
    "mean_spike_outlier",
    "mean_spike_pop_outlier",
    "mean_spike_overlap",
    "alpha",
    "kappa",
    "sigma",
    "delta_effective",
    "gamma_effective",
)

#: Every variable of :func:`predict` (the data variables of ``theory.zarr``).
THEORY_VARIABLES: tuple[str, ...] = VARIANT_VARIABLES + COMMON_VARIABLES


def _as_dataarray(value: ArrayLike | xr.DataArray) -> xr.DataArray:
    return value if isinstance(value, xr.DataArray) else xr.DataArray(np.asarray(value))


#: Table laws with a theory of their own (docs/model.md, "Anisotropic tables",
#: "Tables from a file"); every other law with ``E z^4 < inf`` gets the Gaussian predictions.
OWN_THEORY = ("anisotropic", "file")

#: ``theory.zarr`` names of the fields of :class:`attnrmt.theory.spike.SpikePrediction` (and
#: of :func:`attnrmt.theory.anisotropic.anisotropic_parts`' per-variant keys).
_SPIKE_FIELDS = {
    "pop_outlier": "population_outlier",
    "sample_outlier": "sample_outlier",
    "pop_overlap_signal": "population_overlap",
    "sample_overlap_signal": "sample_overlap",
    "threshold_snr_population": "threshold_snr_population",
    "threshold_snr_sample": "threshold_snr_sample",
    "theta": "theta",
}


def predict(
    delta: ArrayLike | xr.DataArray,
    gamma: ArrayLike | xr.DataArray,
    snr: ArrayLike | xr.DataArray,
    alpha: ArrayLike | xr.DataArray,
    kappa: ArrayLike | xr.DataArray,
    sigma: ArrayLike | xr.DataArray,
    centered: ArrayLike | xr.DataArray = True,
    variants: Sequence[str] = VARIANTS,
    table: Mapping[str, Any] | str | None = None,
    d: ArrayLike | xr.DataArray | None = None,
) -> xr.Dataset:
    """Every theory prediction of ``theory.zarr``, broadcast over the inputs' dimensions:
    the bulk edges and atom, the signal spike of each variant, the top eigenvalues (outlier
    above the threshold, bulk edge below), the thresholds, and the uncentred mean spike (NaN
    where ``centered``) (docs/model.md, "Bulk law", "Spikes", "Two variants of the theory",
    "Thresholds", "Uncentred mean spike").

    Parameters
    ----------
    delta, gamma : DataArray or array_like
        Ratios ``d/V``, ``d/N`` (the *effective* ratios of the realised sizes when comparing
        with simulations); > 0 where a prediction is wanted.
    snr : DataArray or array_like
        ``||mu||^2 >= 0``.
    alpha, kappa, sigma : DataArray or array_like
        Pooling scalars ``w^T R w``, ``||w||^2`` (> 0), ``sum_t w_t``.
    centered : DataArray or array_like of bool, default True
        Whether ``S`` is formed from centred vectors (the mean spike exists only when not).
    variants : sequence of str, default :data:`attnrmt.contract.VARIANTS`
    table : str or dict, optional
        Law of the table's entries (:func:`attnrmt.model.validate_table`; None:
        ``gaussian``). Every law with ``E z^4 < inf`` gets the Gaussian predictions
        (universality, ``docs/model.md``, "Table laws"); a heavier-tailed law gets none.

    Returns
    -------
    xarray.Dataset
        :data:`THEORY_VARIABLES` with ``units``/``long_name`` from
        :data:`attnrmt.contract.VARIABLE_ATTRS`. Predictions carry the union of the inputs'
        dimensions (``variant`` last for :data:`VARIANT_VARIABLES`); ``alpha``, ``kappa``,
        ``sigma``, ``delta_effective``, ``gamma_effective`` keep their own. A point with a
        non-finite input or ``kappa <= 0`` (an absent cell) is NaN in every prediction.
        Plain numbers give a dataset with only the ``variant`` dimension. A non-Gaussian
        ``table`` is named in ``attrs["table"]`` (canonical spec); one without theory
        (:func:`attnrmt.model.table_no_theory`) is NaN in every prediction, with the reason
        in ``attrs["no_theory"]``. An ``anisotropic`` law gets its own predictions
        (:func:`attnrmt.theory.anisotropic.anisotropic_parts`; docs/model.md, "Anisotropic
        tables"), which need ``d``.

    Notes
    -----
    Time and memory O(grid points x variants), the size of the output; no replicate
    dimension is involved.
    """
    law = validate_table(table)
    no_theory = table_no_theory(law)
    anisotropic = law["kind"] in OWN_THEORY
    if anisotropic and d is None:
        raise ValueError(f"table={law!r}: an anisotropic table's theory needs d")
    sizes = {"d": _as_dataarray(d)} if anisotropic and d is not None else {}
    given = {
        name: _as_dataarray(value)
        for name, value in (
            ("delta", delta),
            ("gamma", gamma),
            ("snr", snr),
            ("alpha", alpha),
            ("kappa", kappa),
            ("sigma", sigma),
        )
    } | sizes
    *numeric, centred = xr.broadcast(*given.values(), _as_dataarray(centered).astype(bool))
    dims = centred.dims
    coords = centred.coords
    arrays = {
        name: np.asarray(value.transpose(*dims).values, dtype=float)
        for name, value in zip(given, numeric, strict=True)
    }
    uncentred = ~np.asarray(centred.transpose(*dims).values, dtype=bool)
    valid = np.all([np.isfinite(a) for a in arrays.values()], axis=0) & (arrays["kappa"] > 0)
    valid &= (arrays["delta"] > 0) & (arrays["gamma"] > 0) & (arrays["snr"] >= 0)
    if no_theory is not None:  # a heavy-tailed table: no point has a prediction
        valid &= False
    all_valid = bool(valid.all())
    # broadcast views stay views when every point is valid, so the bulk solvers (which
    # skip axes along which delta and gamma do not vary) run once per (delta, gamma)
    safe = {name: a if all_valid else np.where(valid, a, 1.0) for name, a in arrays.items()}
    safe["alpha"] = np.maximum(safe["alpha"], 0.0)
    d_, g_, k_ = safe["delta"], safe["gamma"], safe["kappa"]

    def masked(values: Any) -> np.ndarray:
        full = np.broadcast_to(np.asarray(values, dtype=float), valid.shape)
        return np.array(full) if all_valid else np.where(valid, full, np.nan)

    def on_grid(values: np.ndarray) -> xr.DataArray:
        return xr.DataArray(values, dims=dims, coords=coords)

    parts = anisotropic_parts(law, safe, uncentred, variants, valid) if anisotropic else None
    lower, upper = (parts["lower"] / k_, parts["upper"] / k_) if parts else bulk_edges(d_, g_)
    common = {
        "bulk_lower_edge": masked(k_ * np.asarray(lower)),
        "bulk_upper_edge": masked(k_ * np.asarray(upper)),
        "bulk_atom": masked(bulk_atom(d_, g_)),
    }
    pop_bulk_edge = masked(parts["pop_edge"] if parts else k_ * (1.0 + np.sqrt(d_)) ** 2)
    per_variant: dict[str, list[np.ndarray]] = {name: [] for name in VARIANT_VARIABLES}
    for variant in variants:
        found: dict[Any, Any] = parts or vars(
            spike(d_, g_, safe["snr"], safe["alpha"], k_, variant=variant)
        )
        fields = {
            name: masked(found[(variant, key)] if parts else found[key])
            for name, key in _SPIKE_FIELDS.items()
        }
        fields["pop_top_eigenvalue"] = np.where(
            np.isnan(fields["pop_outlier"]), pop_bulk_edge, fields["pop_outlier"]
        )
        fields["sample_top_eigenvalue"] = np.where(
            np.isnan(fields["sample_outlier"]), common["bulk_upper_edge"], fields["sample_outlier"]
        )
        for name in VARIANT_VARIABLES:
            per_variant[name].append(common[name] if name in common else fields[name])
    data_vars: dict[str, xr.DataArray] = {
        name: xr.DataArray(np.stack(values, axis=-1), dims=(*dims, "variant"), coords=coords)
        for name, values in per_variant.items()
    }
    if parts:
        mean_fields = (parts["mean_sample"], parts["mean_pop"], parts["mean_overlap"])
    else:
        mean = mean_spike(d_, g_, safe["sigma"], k_)
        mean_fields = (mean.sample_outlier, mean.population_outlier, mean.sample_overlap)
    mean_sample, mean_pop, mean_overlap = (
        on_grid(masked(np.where(uncentred, value, np.nan))) for value in mean_fields
    )
    data_vars.update(
        {
            "pop_bulk_edge": on_grid(pop_bulk_edge),
            "mean_spike_outlier": mean_sample,
            "mean_spike_pop_outlier": mean_pop,
            "mean_spike_overlap": mean_overlap,
            "alpha": given["alpha"],
            "kappa": given["kappa"],
            "sigma": given["sigma"],
            "delta_effective": given["delta"],
            "gamma_effective": given["gamma"],
        }
    )
    out = xr.Dataset(data_vars).assign_coords(variant=("variant", list(variants)))
    out = with_variable_attrs(out)
    if law["kind"] != "gaussian":
        out.attrs["table"] = law
    if no_theory is not None:
        out.attrs["no_theory"] = no_theory
    return out


# --------------------------------------------------------------------------- inputs


def pooling_inputs(
    T: Sequence[int] | np.ndarray,
    positional: Mapping[tuple[str, int], Any],
    weights: Mapping[tuple[str, int], Any],
) -> dict[str, xr.DataArray]:
    """``alpha``, ``kappa``, ``sigma`` of the deterministic weights on ``(T, positional,
    weights)`` (``docs/model.md``, "Pooling scalars").

    ``positional`` and ``weights`` map ``(name, T)`` to a model spec (canonical or raw; a
    spec may depend on ``T``, e.g. a label model's ``rho``). ``causal_attention`` gets its
    deterministic limit ``causal_limit(tau)``. Names keep the mappings' first-seen order.
    O(len(T) x models x T^3) (one eigendecomposition of ``R`` per positional model for
    ``optimal``).
    """
    from attnrmt.model import pooling_scalars, pooling_weights, positional_correlation

    positional_names = list(dict.fromkeys(name for name, _ in positional))
    weights_names = list(dict.fromkeys(name for name, _ in weights))
    scalars = np.full((len(T), len(positional_names), len(weights_names), 3), np.nan)
    for i, length in enumerate(T):
        for j, positional_name in enumerate(positional_names):
            R = positional_correlation(positional[(positional_name, int(length))], int(length))
            for m, weights_name in enumerate(weights_names):
                w = pooling_weights(weights[(weights_name, int(length))], int(length), R)
                scalars[i, j, m] = pooling_scalars(w, R)
    coords = {"T": list(T), "positional": positional_names, "weights": weights_names}
    return {
        name: xr.DataArray(scalars[..., index], dims=("T", "positional", "weights"), coords=coords)
        for index, name in enumerate(("alpha", "kappa", "sigma"))
    }


def ratio_inputs(
    d: Sequence[int] | np.ndarray,
    delta: Sequence[float] | np.ndarray,
    gamma: Sequence[float] | np.ndarray,
) -> dict[str, xr.DataArray]:
    """Effective ratios ``d/V``, ``d/N`` of the realised sizes on ``(d, delta, gamma)``.

    ``V = 2 round(d/(2 delta))``, ``N = round(d/gamma)`` (``docs/model.md``, "Sizes and
    ratios"), so theory and simulation share them at finite ``d``; the coordinates are the
    nominal values. O(len(d) x len(delta) x len(gamma)).
    """
    from attnrmt.model import realised_sizes

    shape = (len(d), len(delta), len(gamma))
    delta_effective, gamma_effective = np.empty(shape), np.empty(shape)
    for index in np.ndindex(*shape):
        dimension = int(d[index[0]])
        V, N = realised_sizes(dimension, float(delta[index[1]]), float(gamma[index[2]]))
        delta_effective[index] = dimension / V
        gamma_effective[index] = dimension / N
    coords = {"d": list(d), "delta": list(delta), "gamma": list(gamma)}
    return {
        "delta": xr.DataArray(delta_effective, dims=("d", "delta", "gamma"), coords=coords),
        "gamma": xr.DataArray(gamma_effective, dims=("d", "delta", "gamma"), coords=coords),
    }


def along_table_laws(
    predictions: xr.Dataset,
    laws: Mapping[str, Any],
    own: Mapping[str, xr.Dataset] | None = None,
) -> xr.Dataset:
    """``predictions`` (of a Gaussian table) on a ``table`` dimension of the laws ``laws``
    (``{name: spec}``, in order; docs/data-contract.md, "Table laws").

    Every variable with an ``snr`` dimension (the predictions) gets the ``table``
    dimension, placed after ``weights`` (:data:`attnrmt.contract.ALL_AXES`): the Gaussian
    values for a law with ``E z^4 < inf`` (universality), NaN for a law without theory;
    the inputs (``alpha``, ``kappa``, ``sigma``, the effective ratios) keep their own
    dimensions. The string variable ``no_theory`` along ``table`` says why a law has no
    theory (:func:`attnrmt.model.table_no_theory`; ``''`` where it has one). A law in
    ``own`` (an anisotropic one) takes its own predictions instead of the Gaussian ones.
    O(grid points x laws).
    """
    names = list(laws)
    reasons = [table_no_theory(validate_table(laws[name])) or "" for name in names]
    has_theory = xr.DataArray([not reason for reason in reasons], dims=TABLE_AXIS)
    order = [*ALL_AXES, "variant"]
    out = predictions.copy()
    own = own or {}
    for key, variable in predictions.data_vars.items():
        if "snr" not in variable.dims:
            continue
        spread = xr.concat(
            [own[name][key] if name in own else variable for name in names], dim=TABLE_AXIS
        ).where(has_theory)
        dims = sorted(spread.dims, key=lambda dim: order.index(dim) if dim in order else len(order))
        out[key] = spread.transpose(*dims).assign_attrs(variable.attrs)
    out["no_theory"] = xr.DataArray(np.asarray(reasons, dtype=object), dims=TABLE_AXIS)
    out = out.assign_coords({TABLE_AXIS: (TABLE_AXIS, np.asarray(names, dtype=object))})
    return with_variable_attrs(out)


def _gaussian_theory(table: Mapping[str, Any] | str | None) -> bool:
    """Whether ``table``'s law takes the Gaussian table's theory (docs/model.md, "Table laws")."""
    law = validate_table(table)
    return law["kind"] not in OWN_THEORY and table_no_theory(law) is None


def predict_grid(
    axes: Mapping[str, Sequence[Any] | np.ndarray],
    positional: Mapping[tuple[str, int], Any],
    weights: Mapping[tuple[str, int], Any],
    variants: Sequence[str] = VARIANTS,
    table: Mapping[str, Any] | str | None = None,
    table_laws: Mapping[str, Any] | None = None,
) -> xr.Dataset:
    """:func:`predict` on a sweep's axes (the content of ``theory.zarr``).

    Parameters
    ----------
    axes : mapping axis -> coordinate values
        Every axis of :data:`attnrmt.contract.AXES` (``positional``/``weights`` by name),
        and ``table`` (law names) in a sweep that sets it.
    positional, weights : mapping ``(name, T)`` -> spec
        As in :func:`pooling_inputs`.
    table : str or dict, optional
        Table law, as in :func:`predict` (None: ``gaussian``), of a grid without a
        ``table`` axis.
    table_laws : mapping name -> spec, optional
        The spec of each law of the ``table`` axis (required with it):
        :func:`along_table_laws`.

    Returns
    -------
    xarray.Dataset
        Predictions on ``(*AXES, "variant")`` (``table`` after ``weights`` where the axes
        have it); ``alpha``, ``kappa``, ``sigma`` on ``(T, positional, weights)``;
        ``delta_effective``, ``gamma_effective`` on ``(d, delta, gamma)``.
        O(grid points x variants x laws) time and memory.
    """
    if TABLE_AXIS in axes:
        if table_laws is None:
            raise ValueError("table_laws: required when axes has a 'table' axis")
        rest = {axis: values for axis, values in axes.items() if axis != TABLE_AXIS}
        gaussian = predict_grid(rest, positional, weights, variants)
        names = [str(name) for name in axes[TABLE_AXIS]]
        own = {
            name: predict_grid(rest, positional, weights, variants, table_laws[name])
            for name in names
            if table_laws[name]["kind"] in OWN_THEORY
        }
        return along_table_laws(gaussian, {name: table_laws[name] for name in names}, own)
    ratios = ratio_inputs(axes["d"], axes["delta"], axes["gamma"])
    scalars = pooling_inputs(axes["T"], positional, weights)
    snr = xr.DataArray(
        np.asarray(axes["snr"], dtype=float), dims="snr", coords={"snr": list(axes["snr"])}
    )
    centered = xr.DataArray(
        np.asarray(axes["centered"], dtype=bool),
        dims="centered",
        coords={"centered": list(axes["centered"])},
    )
    out = predict(
        ratios["delta"],
        ratios["gamma"],
        snr,
        scalars["alpha"],
        scalars["kappa"],
        scalars["sigma"],
        centered,
        variants,
        table,
        xr.DataArray(np.asarray(axes["d"], dtype=float), dims="d", coords={"d": list(axes["d"])}),
    )
    if _gaussian_theory(table):
        out = with_finite_t(out, positional, weights)
    ordered = {
        name: [d for d in (*ALL_AXES, "variant") if d in out[name].dims] for name in out.data_vars
    }
    return out.assign({name: out[name].transpose(*dims) for name, dims in ordered.items()})


def predict_point(
    delta: float,
    gamma: float,
    snr: float,
    T: int,
    positional: Any,
    weights: Any,
    centered: bool = True,
    variants: Sequence[str] = VARIANTS,
    table: Mapping[str, Any] | str | None = None,
    d: int | None = None,
) -> xr.Dataset:
    """:func:`predict` at one parameter point from model specs (``attnrmt theory``).

    ``positional`` and ``weights`` are specs or built-in names, validated by
    :func:`attnrmt.model.validate_positional` / :func:`attnrmt.model.validate_weights`
    (ValueError naming the spec). ``causal_attention`` is predicted with its deterministic
    limit ``causal_limit(tau)``: the dataset's ``weights_substituted`` attribute then names
    the substitution (empty otherwise). The weight vector used is the ``pooling_weights``
    variable (dimension ``position``, 1-based). ``delta``, ``gamma`` are used as given (the
    finite-T tail regime with ``d`` takes ``V = d / delta``, ``N = d / gamma``: docs/model.md,
    "Outliers and overlaps at finite T"). ``table`` is the table law, as in :func:`predict`
    (None: ``gaussian``; a non-Gaussian law adds ``table`` and, without theory,
    ``no_theory`` to the attributes); an anisotropic law needs the dimension ``d``.
    """
    from attnrmt.model import (
        pooling_weights,
        positional_correlation,
        validate_positional,
        validate_weights,
    )

    check_positive("delta", delta)  # validation up front: ValueError naming the argument
    check_positive("gamma", gamma)
    check_positive("snr", snr, allow_zero=True)
    if d is not None:
        check_positive("d", d)
    positional_spec = validate_positional(positional, int(T))
    weights_spec = validate_weights(weights, int(T))
    scalars = pooling_inputs(
        [int(T)], {("positional", int(T)): positional_spec}, {("weights", int(T)): weights_spec}
    )
    point = {name: float(value.squeeze()) for name, value in scalars.items()}
    out = predict(
        delta,
        gamma,
        snr,
        point["alpha"],
        point["kappa"],
        point["sigma"],
        centered,
        variants,
        table,
        d,
    )
    if _gaussian_theory(table):
        extra = {"T": int(T), "snr": float(snr)} | ({} if d is None else {"d": d})
        out = with_finite_t(out.assign_coords(extra), positional_spec, weights_spec)
        out = out.drop_vars(list(extra))
    R = positional_correlation(positional_spec, int(T))
    w = pooling_weights(weights_spec, int(T), R)
    out["pooling_weights"] = xr.DataArray(
        np.asarray(w, dtype=float),
        dims="position",
        attrs={  # the data contract's form (docs/data-contract.md, "Units"): no units
            "long_name": "pooling weight w_t",
            "comment": "weights used by the theory (dimensionless)",
        },
    )
    out = out.assign_coords(position=np.arange(1, int(T) + 1))
    out["position"].attrs = {"long_name": "position t", "comment": "1-based index in the sequence"}
    substituted = weights_spec.get("kind") == "causal_attention"
    table_attrs = dict(out.attrs)  # predict's: the table law and why it has no theory
    out.attrs = {
        "positional": positional_spec,
        "weights": weights_spec,
        "weights_substituted": (
            f"causal_attention(tau={weights_spec.get('tau')}) predicted with its "
            "deterministic limit causal_limit(tau)"
            if substituted
            else ""
        ),
        **table_attrs,
    }
    return out
