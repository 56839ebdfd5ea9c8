"""K-class sweeps: a sweep's ``classes`` setting and the ``label_models`` its ``positional``
axis names (docs/model.md, "K classes"; docs/data-contract.md, "K-class sweeps"). Each
cell's positional spec is ``{"kind": "classes", "K": K, "labels": <label model>, "means":
G}``, so K, ``G`` and the label law enter the key through the spec. O(K^2 T^2) per
(label model, T)."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

from attnrmt.sweep.spec.config import ConfigError, model_error, named_models

#: Built-in label models (no ``label_models`` entry needed): uniform i.i.d. labels.
BUILTIN_LABELS: tuple[str, ...] = ("iid",)
#: The ``kind`` of a K-class positional spec (no sign model has it).
CLASSES_KIND = "classes"


def classes_spec(K: int, gram: Any, labels: Mapping[str, Any]) -> dict[str, Any]:
    """The canonical K-class positional spec (module docstring). O(K^2)."""
    import numpy as np

    return {
        "K": int(K),
        "kind": CLASSES_KIND,
        "labels": dict(labels),
        "means": (np.asarray(gram, dtype=np.float64) + 0.0).tolist(),
    }


def spike_count(classes: Mapping[str, Any] | None, centered: list[bool]) -> int:
    """Entries of the ``spike`` dimension: the largest rank of the pooled signal matrix over
    the ``centered`` values (``K - 1`` centred, ``K`` not); 0 without ``classes``."""
    if not classes:
        return 0
    K = int(classes["K"])
    return K if not all(centered) else K - 1


def _table_problems(
    key: str, name: Any, config: Mapping[str, Any], K: int, axes: Mapping[str, list]
) -> list[str]:
    """Why the table law ``name`` cannot serve a sweep of ``K`` classes: Gaussian or a ``file``
    of ``K`` classes whose ``(V, d)`` every ``(d, delta)`` of the sweep realises (docs/model.md,
    "Tables from a file"). An unknown name is left to the ``table`` axis' check. O(V d)."""
    from attnrmt.model.classes import class_sizes
    from attnrmt.model.table_laws import load_file_table
    from attnrmt.sweep.spec.config import resolve_table_law

    try:
        law = resolve_table_law(config, key, name)
    except ConfigError:
        return []
    if law["kind"] == "gaussian":
        return []
    if law["kind"] != "file":
        return [f"{key}={name!r}: a sweep with classes has Gaussian or file tables only"]
    try:
        rows, index = load_file_table(law)
    except ValueError as error:
        return [f"{key}={name!r}: {error}"]
    (V, d), classes = rows.shape, int(index[-1]) + 1
    sizes = {(e, class_sizes(e, delta, 1.0, K)[0]) for e in axes["d"] for delta in axes["delta"]}
    if classes != K or sizes != {(d, V)}:
        return [
            f"{key}={name!r}: its file has {classes} classes and (V, d) = {(V, d)}; the sweep "
            f"needs K = {K} and has (V, d) in {sorted((v, e) for e, v in sizes)} (d = {d}, "
            f"delta = {d}/{V})"
        ]
    return []


def resolve_classes(
    prefix: str, sweep: Mapping[str, Any], axes: Mapping[str, list], config: Mapping[str, Any]
) -> Any:
    """The checked ``classes`` setting ``{"K", "means" (K x K lists), "means_name"}``, or None;
    :class:`ConfigError` naming ``<prefix>.classes.<key>`` and the value."""
    raw = sweep.get("classes")
    if raw is None:
        return None
    from attnrmt.model.classes import MAX_CLASSES, MEANS_PRESETS, class_mean_gram, class_sizes

    K = raw["K"]
    if not 2 <= K <= MAX_CLASSES:
        raise ConfigError(f"{prefix}.classes.K={K!r}: must be an integer in [2, {MAX_CLASSES}]")
    means = raw.get("means", "simplex")
    if isinstance(means, str) and means not in MEANS_PRESETS:
        close = difflib.get_close_matches(means, MEANS_PRESETS, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ConfigError(
            f"{prefix}.classes.means={means!r}: no Gram preset named {means!r}{hint} "
            f"(presets: {', '.join(MEANS_PRESETS)}, or a {K} x {K} matrix)"
        )
    try:
        gram = class_mean_gram(means, K)
    except ValueError as error:
        text = str(error)
        text = text[len("means=") :] if text.startswith("means=") else text
        raise ConfigError(f"{prefix}.classes.means={text}") from error
    problems = []
    if sweep["spectrum"] != "full":
        problems.append(
            f"{prefix}.spectrum={sweep.get('spectrum')!r}: a sweep with classes has only the "
            "full route (spectrum: full)"
        )
    tables = sweep.get("table")
    for name in tables if isinstance(tables, list) else [] if tables is None else [tables]:
        problems += _table_problems(f"{prefix}.table", name, config, K, axes)
    spikes = spike_count({"K": K}, axes["centered"])
    top_k = sweep["top_k"]
    if isinstance(top_k, int) and top_k < spikes:
        problems.append(
            f"{prefix}.top_k={top_k!r}: must be >= {spikes}, the spikes of K={K} classes "
            f"({'K - 1 centred' if spikes == K - 1 else 'K uncentred'}), so that each is measured"
        )
    for index, d in enumerate(axes["d"]):
        if d < K:
            problems.append(f"{prefix}.d[{index}]={d!r}: must be >= classes.K={K}")
            continue
        for delta_index, delta in enumerate(axes["delta"]):
            V, _ = class_sizes(d, delta, 1.0, K)
            if V < K:
                problems.append(
                    f"{prefix}.delta[{delta_index}]={delta!r}: gives V = K round(d/(K delta)) "
                    f"= {V} < K={K} tokens for d={d}"
                )
    if problems:
        raise ConfigError(*problems)
    name = means if isinstance(means, str) else "explicit"
    return {"K": int(K), "means": (gram + 0.0).tolist(), "means_name": name}


def resolve_label_models(
    config: Mapping[str, Any], prefix: str, axes: Mapping[str, list], classes: Mapping[str, Any]
) -> dict[tuple[str, int], dict[str, Any]]:
    """The K-class positional spec per ``(label model name, T)``, each name resolved in
    ``label_models`` (or :data:`BUILTIN_LABELS`) and validated for every ``T``;
    :class:`ConfigError` naming the key. O(names x T x K^2 T^2)."""
    from attnrmt.model.classes import validate_label_model

    table = named_models(config, "label_models", BUILTIN_LABELS, "label model name")
    K = int(classes["K"])
    specs: dict[tuple[str, int], dict[str, Any]] = {}
    for index, name in enumerate(axes["positional"]):
        if name not in table:
            close = difflib.get_close_matches(name, list(table), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            if name in (config.get("positional_models") or {}):
                hint += "; it is a positional (sign) model: a sweep with classes names label models"
            raise ConfigError(
                f"{prefix}.positional[{index}]={name!r}: no label model named {name!r}{hint} "
                f"(known: {', '.join(table)})"
            )
        builtin = name in BUILTIN_LABELS
        key_path = f"{prefix}.positional[{index}]" if builtin else f"label_models.{name}"
        for T in axes["T"]:
            used_by = f"used by {prefix} with T={T}, K={K}"
            try:
                labels = validate_label_model(table[name], T, K)
            except ValueError as error:
                raise model_error(key_path, table[name], error, "labels", used_by) from error
            specs[(name, T)] = classes_spec(K, classes["means"], labels)
    return specs
