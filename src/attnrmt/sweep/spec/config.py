"""Load and validate a sweep config: JSON schema (with defaults), then semantic checks.

The schema (``workflow/schemas/config.schema.yaml``) is the authority on keys, types and
defaults, applied with :func:`snakemake.utils.validate`'s default-filling validator. The
semantic checks (:func:`resolve_sweeps`) then resolve every model a sweep names against
every ``T`` of it (:mod:`attnrmt.model` validators). Every problem is a
:class:`ConfigError` naming the key path and the value (docs/getting-started.md). Cost:
O(size of the config) plus the model checks.
"""

from __future__ import annotations

import copy
import difflib
import functools
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from attnrmt.contract import (
    AXES,
    BUILTIN_POSITIONAL,
    BUILTIN_WEIGHTS,
    SIGNIFICANT_DIGITS,
    TABLE_AXIS,
    round_significant,
)
from attnrmt.sweep.spec.schema import load_schema

_REAL_AXES = ("delta", "gamma", "snr")
_INT_AXES = ("d", "T")
_MODEL_SECTIONS = {
    "positional": ("positional_models", BUILTIN_POSITIONAL),
    "weights": ("weight_models", BUILTIN_WEIGHTS),
}
_MODEL_NOUN = {"positional": "positional model", "weights": "weight model"}
_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")
_MAX_REPR = 160


class ConfigError(ValueError):
    """Config problems, every one reported; each names the key path, the value and what is wrong.

    ``str(error)`` is the one problem, or a numbered list of :attr:`problems`."""

    def __init__(self, *problems: str) -> None:
        self.problems: tuple[str, ...] = tuple(str(problem) for problem in problems)
        super().__init__(*self.problems)

    def __str__(self) -> str:
        if len(self.problems) == 1:
            return self.problems[0]
        listed = "; ".join(f"({i}) {p}" for i, p in enumerate(self.problems, start=1))
        return f"{len(self.problems)} problems: {listed}"


def collect_problems(checks: Iterable[Any]) -> None:
    """Call every zero-argument check; one :class:`ConfigError` with all problems. O(checks)."""
    problems: list[str] = []
    for check in checks:
        try:
            check()
        except ConfigError as error:
            problems.extend(error.problems)
    if problems:
        raise ConfigError(*dict.fromkeys(problems))  # one line per problem, once


# --------------------------------------------------------------------------- numbers


def snr_values(snr: Any) -> list[float]:
    """The ``snr`` axis as a list: a scalar, a list, or ``{start, stop, num}`` (as
    :func:`numpy.linspace`, endpoint included, in pure Python)."""
    if isinstance(snr, Mapping):
        start, stop, num = float(snr["start"]), float(snr["stop"]), int(snr["num"])
        if num == 1:
            return [start]
        step = (stop - start) / (num - 1)
        return [start + i * step for i in range(num - 1)] + [stop]
    return list(snr) if isinstance(snr, list | tuple) else [snr]


def normalise_axis(axis: str, raw: Any) -> list:
    """One axis as a list: ``d``, ``T`` ints; ``delta``, ``gamma``, ``snr`` floats rounded to 12
    significant digits (a linspace's ``0.1`` and a typed one are one cell)."""
    values = (
        snr_values(raw)
        if axis == "snr"
        else (list(raw) if isinstance(raw, list | tuple) else [raw])
    )
    if axis in _INT_AXES:
        return [int(value) for value in values]
    if axis in _REAL_AXES:
        return [round_significant(value) for value in values]
    if axis == "centered":
        return [bool(value) for value in values]
    return [str(value) for value in values]


# --------------------------------------------------------------------------- schema


@functools.cache
def _default_filling_validator_class() -> type:
    """Draft 2020-12 validator filling ``properties`` defaults (deep copies, objects only), as
    :func:`snakemake.utils.validate` does."""
    from jsonschema import Draft202012Validator, validators

    validate_properties = Draft202012Validator.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, schema):
        if validator.is_type(instance, "object"):
            for name, subschema in properties.items():
                if isinstance(subschema, Mapping) and "default" in subschema:
                    instance.setdefault(name, copy.deepcopy(subschema["default"]))
        yield from validate_properties(validator, properties, instance, schema)

    return validators.extend(Draft202012Validator, {"properties": set_defaults})


def apply_schema(config: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``config`` validated against the schema, defaults filled; :class:`ConfigError`
    with every problem (a misspelt required key reported once, as the unknown key). O(size)."""
    if not isinstance(config, Mapping):
        raise ConfigError(f"config={_short_repr(config)}: must be a mapping of keys to values")
    filled = copy.deepcopy(dict(config))
    validator = _default_filling_validator_class()(load_schema())
    errors = sorted(validator.iter_errors(filled), key=_error_sort_key)
    errors = [error for error in errors if not _missing_because_misspelt(error, errors)]
    if errors:
        messages = [describe_schema_error(error) for error in errors]
        raise ConfigError(*dict.fromkeys(messages))  # dict: drop repeats, keep order
    return filled


def _missing_because_misspelt(error: Any, errors: Sequence[Any]) -> bool:
    """Whether ``error`` is a missing required key that an unknown key beside it misspells."""
    if error.validator != "required" or not isinstance(error.instance, Mapping):
        return False
    missing = [name for name in error.validator_value if name not in error.instance]
    for other in errors:
        if other.validator != "additionalProperties" or other.instance is not error.instance:
            continue
        unknown = [
            str(key) for key in other.instance if key not in other.schema.get("properties", {})
        ]
        if any(difflib.get_close_matches(name, unknown, n=1) for name in missing):
            return True
    return False


def _error_sort_key(error: Any) -> tuple:
    return (tuple(str(part) for part in error.absolute_path), str(error.message))


def format_key_path(parts: Iterable[Any]) -> str:
    """``["sweeps", "t", "d", 0]`` -> ``"sweeps.t.d[0]"`` (``"config"`` for the root)."""
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "config"


def _short_repr(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _MAX_REPR else text[: _MAX_REPR - 5] + " ...]"


def _most_specific_errors(error: Any) -> list[Any]:
    """The most specific complaint about a value first, then the other complaints of its
    anyOf/oneOf alternative, descending while exactly one alternative fits the value's type.
    O(errors)."""
    found = [error]
    while error.validator in ("anyOf", "oneOf") and error.context:
        fitting = [
            sub
            for sub in error.context
            if sub.validator != "type" or len(sub.absolute_path) > len(error.absolute_path)
        ]
        branches = {sub.relative_schema_path[0] for sub in fitting}
        if len(branches) != 1:
            return found
        error = min(fitting, key=_error_sort_key)
        found = [error, *sorted((sub for sub in fitting if sub is not error), key=_error_sort_key)]
    return found


_TYPE_PHRASES = {"integer": "an integer", "number": "a number", "string": "a string"}
_TYPE_PHRASES |= {"boolean": "true or false", "array": "a list", "object": "a mapping"}


def _type_phrase(expected: Any) -> str:
    names = [expected] if isinstance(expected, str) else list(expected)
    return " or ".join(_TYPE_PHRASES.get(name, name) for name in names)


def _yaml_number_hint(value: Any) -> str:
    """Why a string that looks like a number or boolean is not one (YAML's typing rules)."""
    if not isinstance(value, str):
        return ""
    if value.strip().lower() in ("true", "false"):
        return " (a quoted true/false is text: write it without quotes)"
    try:
        float(value)
    except ValueError:
        return ""
    if re.fullmatch(r"\s*[-+]?[0-9]+[eE][-+]?[0-9]+\s*", value):
        return " (YAML reads this as a string: write exponents with a dot, e.g. 1.0e-3)"
    if re.fullmatch(r"\s*[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)[eE][0-9]+\s*", value):
        return " (YAML reads this as a string: give the exponent a sign, e.g. 1.0e+3)"
    return " (a quoted number is text: write it without quotes)"


#: JSON-schema bound keywords and the comparison each one demands.
_BOUND_SYMBOLS = dict(minimum=">=", exclusiveMinimum=">", maximum="<=", exclusiveMaximum="<")


def describe_schema_error(error: Any) -> str:
    """One line for a jsonschema error: key path, value, problem (an alternative's unknown keys
    named beside its missing ones, unless one misspells the other)."""
    errors = _most_specific_errors(error)
    errors = [sub for sub in errors if not _missing_because_misspelt(sub, errors)]
    unknown = [sub for sub in errors if sub.validator == "additionalProperties"]
    missing = [sub for sub in errors if sub.validator == "required"]
    if unknown and missing:
        return "; ".join(_describe_one_error(sub) for sub in [*unknown, *missing])
    return _describe_one_error(errors[0])


def _describe_one_error(error: Any) -> str:
    path = format_key_path(error.absolute_path)
    value = error.instance
    shown = f"{path}={_short_repr(value)}"
    kind, expected = error.validator, error.validator_value
    schema = error.schema if isinstance(error.schema, Mapping) else {}
    if "propertyNames" in error.schema_path:
        return (
            f"{path}: name {value!r} is not allowed: use letters, digits, '_', '.', '-' "
            "(starting with a letter or digit, at most 100 characters)"
        )
    if kind in ("anyOf", "oneOf"):
        phrase = schema.get("x-expected", "a value matching the schema")
        return f"{shown}: must be {phrase}{_yaml_number_hint(value)}"
    if kind == "type":
        return f"{shown}: must be {_type_phrase(expected)}{_yaml_number_hint(value)}"
    if kind in _BOUND_SYMBOLS:
        return f"{shown}: must be {_BOUND_SYMBOLS[kind]} {expected}"
    if kind == "enum":
        close = (
            difflib.get_close_matches(value, [str(option) for option in expected], n=1)
            if isinstance(value, str)
            else []
        )
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return f"{shown}: must be one of {', '.join(map(str, expected))}{hint}"
    if kind == "const":
        return f"{shown}: must be {expected!r}"
    if kind == "required":
        missing = [name for name in expected if name not in value]
        return f"{path}: missing required key {', '.join(map(repr, missing))}"
    if kind == "additionalProperties":
        return _describe_unknown_keys(path, value, schema)
    if kind == "pattern":
        return (
            f"{shown}: must be safe in a file path: letters, digits, '_', '.', '-', "
            "starting with a letter or digit, at most 100 characters"
        )
    if kind in ("minItems", "minProperties"):
        return f"{shown}: must have at least {expected} entr{'y' if expected == 1 else 'ies'}"
    return f"{shown}: {error.message}"


def _describe_unknown_keys(path: str, value: Mapping, schema: Mapping) -> str:
    allowed = list(schema.get("properties", {}))
    unknown = [key for key in value if key not in allowed]
    hints = []
    for key in unknown:
        close = difflib.get_close_matches(str(key), allowed, n=1)
        hints.append(f"{key!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    where = f"{path}: unknown key" if path != "config" else "config: unknown top-level key"
    plural = "s" if len(unknown) > 1 else ""
    return f"{where}{plural} {', '.join(hints)} (allowed: {', '.join(allowed)})"


# --------------------------------------------------------------------------- semantics


@dataclass(frozen=True)
class ResolvedSweep:
    """A sweep after the semantic checks: normalised axes (:data:`AXES` order, then ``table``),
    canonical model specs per ``(name, T)`` (shared dicts), the ``table`` laws' specs (None:
    gaussian, no axis) and ``noise`` (docs/data-contract.md, "Shared-noise sweeps")."""

    name: str
    axes: dict[str, list]
    replicates: int
    top_k: int
    positional_specs: dict[tuple[str, int], dict[str, Any]]
    weights_specs: dict[tuple[str, int], dict[str, Any]]
    spectrum: str = "full"
    #: K-class sweeps only (docs/model.md, "K classes"): ``{"K", "means", "means_name"}``
    #: (:func:`attnrmt.sweep.spec.classes.resolve_classes`); None for two-class sweeps.
    classes: dict[str, Any] | None = None
    table_specs: dict[str, dict[str, Any]] | None = None
    noise: str = "independent"
    #: snr placed by the theory (:mod:`attnrmt.sweep.spec.placed`): ``{"around", "span",
    #: "points", "thresholds"}``; None for an axis written as values.
    snr_placed: dict[str, Any] | None = None
    #: Groups of axes that vary together (config key ``zip``; :func:`_check_zip`); () for
    #: the Cartesian product.
    zip: tuple[tuple[str, ...], ...] = ()
    #: Replicates of each ``d`` of ``axes["d"]`` (config ``replicates: {d: count}``), None
    #: when one count serves every ``d``; ``replicates`` is then their largest.
    per_d: tuple[int, ...] | None = None

    @property
    def table(self) -> tuple[str, ...] | None:
        """Names of the sweep's table laws (its ``table`` axis), None when not set."""
        return None if self.table_specs is None else tuple(self.axes[TABLE_AXIS])


def _check_no_duplicates(key_path: str, raw_values: Sequence, values: Sequence) -> None:
    first_index: dict[Any, int] = {}
    for index, value in enumerate(values):
        marker = (type(value) is bool, value)
        if marker in first_index:
            earlier = first_index[marker]
            raw = raw_values[index] if index < len(raw_values) else value
            raise ConfigError(
                f"{key_path}[{index}]={raw!r}: duplicate of {key_path}[{earlier}] "
                f"(both are {value!r} after normalisation to {SIGNIFICANT_DIGITS} "
                "significant digits)"
            )
        first_index[marker] = index


def _check_realised_sizes(prefix: str, axes: Mapping[str, list]) -> None:
    """Every (d, delta) gives V >= 2 tokens and every (d, gamma) N >= 2 samples
    (docs/model.md, "Sizes and ratios")."""
    from attnrmt.model import realised_sizes

    for d_index, d in enumerate(axes["d"]):
        for index, delta in enumerate(axes["delta"]):
            vocabulary, _ = realised_sizes(d, delta, 1.0)
            if vocabulary < 2:
                raise ConfigError(
                    f"{prefix}.delta[{index}]={delta!r}: gives V = 2 round(d/(2 delta)) = "
                    f"{vocabulary} < 2 tokens for d={d} ({prefix}.d[{d_index}])"
                )
        for index, gamma in enumerate(axes["gamma"]):
            _, n_samples = realised_sizes(d, 1.0, gamma)
            if n_samples < 2:
                raise ConfigError(
                    f"{prefix}.gamma[{index}]={gamma!r}: gives N = round(d/gamma) = "
                    f"{n_samples} < 2 samples for d={d} ({prefix}.d[{d_index}])"
                )


def _sweep_axes(prefix: str, sweep: Mapping[str, Any]) -> dict[str, list]:
    """Normalised axes of one sweep; every axis is checked (all problems reported)."""
    axes: dict[str, list] = {}

    def normalise(axis: str) -> Any:
        def check() -> None:
            raw = sweep[axis]
            try:
                values = normalise_axis(axis, raw)
            except (TypeError, ValueError, KeyError) as error:
                raise ConfigError(f"{prefix}.{axis}={_short_repr(raw)}: {error}") from error
            raw_list = raw if isinstance(raw, list | tuple) else [raw]
            _check_no_duplicates(f"{prefix}.{axis}", raw_list, values)
            axes[axis] = values

        return check

    collect_problems(normalise(axis) for axis in AXES)
    _check_realised_sizes(prefix, axes)
    return axes


def named_models(
    config: Mapping[str, Any], section: str, builtins: Sequence[str], noun: str
) -> dict[str, Any]:
    """The built-in and declared entries of a config ``section`` (positional, weight,
    table or label models) by name; a declared built-in name is refused. O(entries)."""
    declared = dict(config.get(section) or {})
    for name in declared:
        if name in builtins:
            raise ConfigError(
                f"{section}.{name}: {name!r} is a built-in {noun}; choose another name"
            )
    return {**{name: {"kind": name} for name in builtins}, **declared}


def model_error(
    key_path: str, spec: Any, error: ValueError, argument: str, used_by: str = ""
) -> ConfigError:
    """A model validator's ValueError with the config key path for the argument name it starts
    with (``positional.R=...`` -> ``positional_models.cust.R=...``) and where it is used."""
    text, where = str(error), f" ({used_by})" if used_by else ""
    if text.startswith((f"{argument}.", f"{argument}=")):
        return ConfigError(f"{key_path}{text[len(argument) :]}{where}")
    return ConfigError(f"{key_path}={_short_repr(spec)}: {text}{where}")


def _model_validator(kind: str) -> Any:
    from attnrmt import model

    return model.validate_positional if kind == "positional" else model.validate_weights


def _resolve_models(
    config: Mapping[str, Any], prefix: str, axes: Mapping[str, list], kind: str
) -> dict[tuple[str, int], dict[str, Any]]:
    """Canonical spec per (name, T) for the models a sweep uses on axis ``kind``."""
    section, builtins = _MODEL_SECTIONS[kind]
    validate = _model_validator(kind)
    table = named_models(config, section, builtins, "model name")
    specs: dict[tuple[str, int], dict[str, Any]] = {}
    for index, name in enumerate(axes[kind]):
        if name not in table:
            raise ConfigError(
                f"{prefix}.{kind}[{index}]={name!r}: no {_MODEL_NOUN[kind]} named {name!r} "
                f"(known: {', '.join(table)})"
            )
        key_path = f"{section}.{name}" if name not in builtins else f"{prefix}.{kind}[{index}]"
        for T in axes["T"]:
            used_by = f"used by {prefix} with T={T}"
            try:
                specs[(name, T)] = validate(table[name], T)
            except ValueError as error:
                raise model_error(key_path, table[name], error, kind, used_by) from error
    return specs


def _check_sized_models(config: Mapping[str, Any]) -> None:
    """Validate custom models at their own size (T = len(R), len(values)), used or not."""
    for kind, size_key in (("positional", "R"), ("weights", "values")):
        section, _ = _MODEL_SECTIONS[kind]
        validate = _model_validator(kind)
        for name, spec in (config.get(section) or {}).items():
            if not isinstance(spec, Mapping) or spec.get("kind") != "custom":
                continue
            size = len(spec.get(size_key) or [])
            if size < 1:
                continue  # the schema reports the missing or empty entry
            try:
                validate(spec, size)
            except ValueError as error:
                used_by = f"checked with T={size}, its own size"
                raise model_error(f"{section}.{name}", spec, error, kind, used_by) from error


# --------------------------------------------------------------------------- table laws
# The sweep key ``table`` is the axis of the laws of the table's noise (docs/model.md,
# "Table laws"; docs/data-contract.md, "Table laws"): each a built-in (TABLE_BUILTINS) or a
# ``table_models`` entry, checked by attnrmt.model.validate_table (imported on use).

#: Table laws that need no entry in ``table_models`` (no parameter).
TABLE_BUILTINS: tuple[str, ...] = ("gaussian", "rademacher", "uniform")


def resolve_table_law(config: Mapping[str, Any], key_path: str, name: Any) -> dict[str, Any]:
    """Canonical spec (:func:`attnrmt.model.validate_table`) of the table law named at
    ``key_path``; :class:`ConfigError` naming the key and value otherwise. O(models)."""
    from attnrmt.model.table_laws import validate_table

    table = named_models(config, "table_models", TABLE_BUILTINS, "table law")
    if name not in table:
        close = difflib.get_close_matches(str(name), list(table), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ConfigError(
            f"{key_path}={name!r}: no table law named {name!r}{hint} (known: {', '.join(table)})"
        )
    entry_path = f"table_models.{name}" if name not in TABLE_BUILTINS else key_path
    try:
        return validate_table(table[name])
    except ValueError as error:
        raise model_error(entry_path, table[name], error, "table") from error


def resolve_table_axis(
    config: Mapping[str, Any], prefix: str, raw: Any
) -> tuple[list[str], dict[str, dict[str, Any]]]:
    """A sweep's ``table`` axis (a name or a list): names in config order and each one's spec,
    every name checked (``sweeps.<s>.table[1]='t33': ... (did you mean 't3'?)``), a repeat
    refused. O(names x models)."""
    names = normalise_axis(TABLE_AXIS, raw)
    listed = isinstance(raw, list | tuple)
    _check_no_duplicates(f"{prefix}.table", list(raw) if listed else [raw], names)
    specs: dict[str, dict[str, Any]] = {}

    def check(index: int, name: str) -> Any:
        key_path = f"{prefix}.table[{index}]" if listed else f"{prefix}.table"
        return lambda: specs.__setitem__(name, resolve_table_law(config, key_path, name))

    collect_problems(check(index, name) for index, name in enumerate(names))
    return names, specs


def _check_table_models(config: Mapping[str, Any]) -> None:
    """Validate every ``table_models`` entry, used by a sweep or not (all problems)."""
    collect_problems(
        functools.partial(resolve_table_law, config, f"table_models.{name}", name)
        for name in config.get("table_models") or {}
    )


def resolve_sweep(config: Mapping[str, Any], name: str) -> ResolvedSweep:
    """Semantic checks of one sweep of a schema-valid config (axes first, then models): its
    :class:`ResolvedSweep`, or :class:`ConfigError` naming key paths and values.
    O(axes x models x T)."""
    from attnrmt.sweep.spec.placed import is_placed

    prefix = f"sweeps.{name}"
    sweep = config["sweeps"][name]
    placed_spec = sweep["snr"] if is_placed(sweep.get("snr")) else None
    axes = _sweep_axes(prefix, sweep if placed_spec is None else {**sweep, "snr": 0.0})
    replicates, top_k = sweep["replicates"], int(sweep["top_k"])
    per_d = _replicates_per_d(prefix, replicates, axes["d"])
    replicates = max(per_d) if per_d else int(replicates)
    specs: dict[str, Any] = {}

    def check_top_k() -> None:
        if top_k > min(axes["d"]):
            raise ConfigError(f"{prefix}.top_k={top_k!r}: must be <= min(d)={min(axes['d'])}")

    def resolve(kind: str) -> Any:
        return lambda: specs.__setitem__(kind, _resolve_models(config, prefix, axes, kind))

    def resolve_classes() -> None:  # K classes: label models on the positional axis
        from attnrmt.sweep.spec import classes as k

        specs["classes"] = k.resolve_classes(prefix, sweep, axes, config)
        specs["positional"] = k.resolve_label_models(config, prefix, axes, specs["classes"])

    def resolve_table() -> None:
        if sweep.get("table") is not None:
            names, specs["table"] = resolve_table_axis(config, prefix, sweep["table"])
            axes[TABLE_AXIS] = names

    positional = resolve("positional") if sweep.get("classes") is None else resolve_classes
    collect_problems([check_top_k, positional, resolve("weights"), resolve_table])
    zipped = _check_zip(prefix, sweep.get("zip"), axes)
    placed = _place_snr(prefix, placed_spec, sweep, axes, specs)
    if sweep.get("target") is not None:  # precision target (attnrmt.sweep.spec.target)
        _check_target(prefix, sweep)
    return ResolvedSweep(
        name=name,
        axes=axes,
        replicates=replicates,
        top_k=top_k,
        positional_specs=specs["positional"],
        weights_specs=specs["weights"],
        spectrum=sweep["spectrum"],
        classes=specs.get("classes"),
        table_specs=specs.get("table"),
        noise=sweep["noise"],
        snr_placed=placed,
        zip=zipped,
        per_d=per_d,
    )


def _replicates_per_d(prefix: str, replicates: Any, d: Sequence[int]) -> tuple[int, ...] | None:
    """Counts of a ``replicates: {d: count}`` mapping in the order of the ``d`` axis (None
    for one count); it must name every ``d``, no other. O(d)."""
    if not isinstance(replicates, Mapping):
        return None
    numbers = all(str(key).isdigit() for key in replicates)
    counts = {int(key): int(value) for key, value in replicates.items()} if numbers else {}
    if set(counts) != set(d):
        raise ConfigError(f"{prefix}.replicates={dict(replicates)!r}: must give every d of {d}")
    return tuple(counts[value] for value in d)


def _check_target(prefix: str, sweep: Mapping[str, Any]) -> None:
    """A sweep's ``target`` (:func:`attnrmt.sweep.spec.target.parse_target`); refused on a
    K-class sweep, whose thresholds are another table."""
    from attnrmt.sweep.spec.target import parse_target

    if sweep.get("classes") is not None:
        raise ConfigError(f"{prefix}.target: a K-class sweep (classes) cannot state a target")
    parse_target(f"{prefix}.target", sweep["target"])


def _place_snr(
    prefix: str,
    spec: Mapping[str, Any] | None,
    sweep: Mapping[str, Any],
    axes: dict[str, list],
    specs: Mapping[str, Any],
) -> dict[str, Any] | None:
    """Set ``axes["snr"]`` from a placed spec (:func:`attnrmt.sweep.spec.placed.placed_axis`) and
    return its record; None without one. Refused in K-class and table-law sweeps."""
    if spec is None:
        return None
    from attnrmt.sweep.spec.placed import placed_axis

    for key in ("classes", "table"):
        if sweep.get(key) is not None:
            raise ConfigError(
                f"{prefix}.snr={_short_repr(dict(spec))}: placed by the theory only in a "
                f"two-class gaussian sweep ({prefix}.{key} is set): write the snr values"
            )
    values, record = placed_axis(prefix, spec, axes, specs["positional"], specs["weights"])
    axes["snr"] = values
    return record


def _check_zip(prefix: str, raw: Any, axes: Mapping[str, list]) -> tuple[tuple[str, ...], ...]:
    """The sweep's ``zip`` groups: an axis in one group at most, a group's axes of equal
    lengths. O(axes)."""
    groups = tuple(tuple(str(axis) for axis in group) for group in raw or ())
    seen: dict[str, int] = {}
    for index, group in enumerate(groups):
        for place, axis in enumerate(group):
            if axis in seen:
                raise ConfigError(
                    f"{prefix}.zip[{index}][{place}]={axis!r}: already zipped in "
                    f"{prefix}.zip[{seen[axis]}]; an axis belongs to one group"
                )
            seen[axis] = index
        lengths = {axis: len(axes[axis]) for axis in group}
        if len(set(lengths.values())) > 1:
            listed = ", ".join(f"{prefix}.{axis} has {n}" for axis, n in lengths.items())
            raise ConfigError(
                f"{prefix}.zip[{index}]={list(group)!r}: zipped axes need as many values "
                f"each ({listed})"
            )
    return groups


def resolve_sweeps(config: Mapping[str, Any]) -> dict[str, ResolvedSweep]:
    """:func:`resolve_sweep` of every sweep, every declared model checked used or not;
    :class:`ConfigError` with all problems. O(sweeps)."""
    resolved: dict[str, ResolvedSweep] = {}

    def resolve(name: str) -> Any:
        return lambda: resolved.__setitem__(name, resolve_sweep(config, name))

    collect_problems(
        [
            lambda: _check_sized_models(config),
            lambda: _check_table_models(config),
            *(resolve(name) for name in config["sweeps"]),
        ]
    )
    return resolved


def finite_t_warnings(sweeps: Mapping[str, ResolvedSweep]) -> list[str]:
    """Warnings for settings with ``T delta / gamma < FINITE_T_BOUND`` at ``d >= FINITE_T_MIN_D``
    (docs/model.md, "Where the large-T bulk holds"). O(settings)."""
    from attnrmt.theory.finite_t import FINITE_T_BOUND, FINITE_T_MIN_D, tokens_per_vocab

    warnings = []
    for name, sweep in sweeps.items():
        axes = sweep.axes
        if max(axes["d"]) < FINITE_T_MIN_D:
            continue
        grid = np.meshgrid(axes["delta"], axes["gamma"], axes["T"], indexing="ij")
        draws = tokens_per_vocab(*grid)
        if np.any(draws < FINITE_T_BOUND):
            worst = np.unravel_index(np.argmin(draws), draws.shape)
            delta, gamma, T = (float(g[worst]) for g in grid)
            warnings.append(
                f"sweeps.{name}: {int(np.sum(draws < FINITE_T_BOUND))} of {draws.size} "
                f"(delta, gamma, T) settings have N T/V = T delta/gamma < {FINITE_T_BOUND:g} "
                f"(lowest {draws[worst]:.3g} at delta={delta:g}, gamma={gamma:g}, T={T:g}): "
                "the large-T bulk MP_delta ⊠ MP_gamma is not accurate there and their "
                "thresholds are flagged bulk_regime=finite_T (docs/model.md explains where "
                "the large-T bulk holds)"
            )
    return warnings


def unused_models(config: Mapping[str, Any], sweeps: Mapping[str, ResolvedSweep]) -> list[str]:
    """Warnings for models defined in the config that no sweep uses. O(models + sweeps)."""
    classes = [sweep for sweep in sweeps.values() if sweep.classes is not None]
    used: dict[str, list[Sequence[str]]] = {
        "positional_models": [s.axes["positional"] for s in sweeps.values() if not s.classes],
        "weight_models": [sweep.axes["weights"] for sweep in sweeps.values()],
        "table_models": [sweep.table or () for sweep in sweeps.values()],
        "label_models": [sweep.axes["positional"] for sweep in classes],
    }
    warnings: list[str] = []
    for section, axes in used.items():
        names = list(dict.fromkeys(name for axis in axes for name in axis))
        where = (
            "with classes"
            if section == "label_models"
            else f"(sweeps use: {', '.join(names) or 'none'})"
        )
        warnings.extend(
            f"{section}.{name}: defined but used by no sweep {where}"
            for name in config.get(section) or {}
            if name not in names
        )
    return warnings


def defaulted_key_paths(raw: Any, filled: Any, prefix: str = "") -> set[str]:
    """Key paths that ``filled`` has and ``raw`` lacks (the schema's defaults). O(size)."""
    found: set[str] = set()
    if not isinstance(filled, Mapping):
        return found
    raw_map = raw if isinstance(raw, Mapping) else {}
    for key, value in filled.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        if key not in raw_map:
            found.add(path)
        else:
            found |= defaulted_key_paths(raw_map[key], value, path)
    return found


_KEY_PATH = re.compile(r"^([A-Za-z0-9_.-]+)")


def note_defaults(error: ConfigError, defaulted: set[str]) -> ConfigError:
    """``error`` with a note after each problem whose key path the schema defaulted."""
    problems = []
    for problem in error.problems:
        match = _KEY_PATH.match(problem)
        if match and match.group(1) in defaulted:
            problem += f" ({match.group(1)} is not set in the config: this is its default)"
        problems.append(problem)
    return type(error)(*problems)


# --------------------------------------------------------------------------- validated config


@dataclass(frozen=True)
class ValidConfig:
    """A config after the one validation: ``config`` (defaults filled, axes normalised),
    ``sweeps`` (resolved, for :func:`attnrmt.sweep.spec.plan.plan_run`), ``warnings`` and
    ``source`` (the file, None for a mapping)."""

    config: dict[str, Any]
    sweeps: dict[str, ResolvedSweep]
    warnings: tuple[str, ...] = ()
    source: str | None = None


def run_name_from_file(path: str | os.PathLike[str]) -> str:
    """The run name of a config file without ``run:``: its stem (``my-sweep.yaml`` ->
    ``my-sweep``); :class:`ConfigError` when the stem is not a safe name."""
    stem = Path(path).stem
    if not _SAFE_NAME.match(stem):
        raise ConfigError(
            f"run: not set, and the config file's name {stem!r} is not a safe run name "
            "(letters, digits, '_', '.', '-'): set run: in the config"
        )
    return stem


def validate_config(
    raw: Mapping[str, Any], source: str | os.PathLike[str] | None = None
) -> ValidConfig:
    """The one validation of a config: schema (defaults filled), then semantic checks; the run
    defaults to ``source``'s stem. :class:`ConfigError` with every problem."""
    if not isinstance(raw, Mapping):
        raise ConfigError(f"config={_short_repr(raw)}: must be a mapping of keys to values")
    raw = dict(raw)
    if source is not None and "run" not in raw:
        raw = {"run": run_name_from_file(source), **raw}
    config = apply_schema(raw)
    try:
        sweeps = resolve_sweeps(config)
    except ConfigError as error:
        raise note_defaults(error, defaulted_key_paths(raw, config)) from None
    for name, sweep in sweeps.items():
        config["sweeps"][name].update(sweep.axes)
    return ValidConfig(
        config=config,
        sweeps=sweeps,
        warnings=(*unused_models(config, sweeps), *finite_t_warnings(sweeps)),
        source=None if source is None else os.fspath(source),
    )


# --------------------------------------------------------------------------- loading


class _YamlProblem(yaml.YAMLError):
    """A problem at ``mark`` (a duplicate key, an alias bomb), shaped as PyYAML's errors."""

    def __init__(self, mark: Any, problem: str) -> None:
        super().__init__(problem)
        self.problem_mark, self.problem, self.context = mark, problem, None


class _UniqueKeyLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` refusing a key given twice in one mapping (``<<:`` merges may still
    be overridden). O(keys) per mapping."""

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, Any] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.setdefault(key, key_node.start_mark)
                except TypeError:  # an unhashable key: SafeLoader reports it
                    continue
                if first is not key_node.start_mark:
                    raise _YamlProblem(
                        key_node.start_mark,
                        f"duplicate key {key!r} (first at line {first.line + 1}, column "
                        f"{first.column + 1}): YAML would keep only the last value; remove one",
                    )
        return super().construct_mapping(node, deep=deep)

    def get_single_data(self) -> Any:
        """The document, refused when its aliases expand to more than :data:`MAX_YAML_NODES`."""
        node = self.get_single_node()
        if node is not None and expanded_nodes(node, MAX_YAML_NODES) > MAX_YAML_NODES:
            raise _YamlProblem(
                node.start_mark,
                f"its aliases (*name) expand to more than {MAX_YAML_NODES:,} values: "
                "write the values out, or use fewer nested aliases",
            )
        return None if node is None else self.construct_document(node)


#: Largest config file read (a config is a few kB; a long axis is ``{start, stop, num}``).
MAX_CONFIG_BYTES = 1 << 20

#: Most nodes a config may hold once its aliases are expanded (a large sweep's config has
#: thousands; "billion laughs" has 10^9).
MAX_YAML_NODES = 1_000_000


def expanded_nodes(node: Any, limit: int) -> int:
    """Nodes of a composed YAML document with aliases expanded, memoised per node (O(distinct
    nodes)); counting stops above ``limit``."""
    sizes: dict[int, int] = {}

    def size(current: Any) -> int:
        if id(current) in sizes:
            return sizes[id(current)]
        total = 1
        if isinstance(current, yaml.SequenceNode):
            total += sum(size(child) for child in current.value)
        elif isinstance(current, yaml.MappingNode):
            total += sum(size(key) + size(value) for key, value in current.value)
        sizes[id(current)] = min(total, limit + 1)
        return sizes[id(current)]

    return size(node)


def read_config_source(source: str | os.PathLike[str] | Mapping[str, Any]) -> dict[str, Any]:
    """The raw config: a mapping as given, or a YAML file read safely (:class:`_UniqueKeyLoader`);
    problems name the file, line and column."""
    if isinstance(source, Mapping):
        return dict(source)
    path = Path(source)
    try:
        size = path.stat().st_size
        if size > MAX_CONFIG_BYTES:
            raise ConfigError(
                f"config file {str(path)!r}: {size:,} bytes; at most {MAX_CONFIG_BYTES:,} "
                "(write a long axis as {start, stop, num})"
            )
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as error:
        raise ConfigError(f"config file {str(path)!r}: not found") from error
    except UnicodeDecodeError as error:
        raise ConfigError(describe_bad_byte(path, error)) from error
    except OSError as error:
        raise ConfigError(f"config file {str(path)!r}: cannot be read ({error})") from error
    try:
        loaded = yaml.load(text, Loader=_UniqueKeyLoader)  # a SafeLoader: plain data only
    except yaml.YAMLError as error:
        raise ConfigError(describe_yaml_error(path, error)) from error
    if not isinstance(loaded, Mapping):
        raise ConfigError(
            f"config file {str(path)!r}: must hold a mapping of keys to values, "
            f"got {_short_repr(loaded)}"
        )
    return dict(loaded)


def describe_bad_byte(path: str | Path, error: UnicodeDecodeError) -> str:
    """``config file 'my.yaml', line 3, column 7: byte 0xff is not UTF-8 ...`` (1-based bytes)."""
    before = bytes(error.object[: error.start])
    line = before.count(b"\n") + 1
    column = len(before) - (before.rfind(b"\n") + 1) + 1
    return (
        f"config file {str(path)!r}, line {line}, column {column}: byte "
        f"0x{error.object[error.start]:02x} is not UTF-8: save the file as UTF-8"
    )


def describe_yaml_error(path: str | Path, error: Exception) -> str:
    """``config file 'my.yaml', line 3, column 7: not valid YAML: <problem>`` (1-based)."""
    mark = getattr(error, "problem_mark", None)
    where = f", line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    problem = getattr(error, "problem", None) or " ".join(str(error).split())
    context = getattr(error, "context", None)
    detail = f"{problem} ({context})" if context else problem
    return f"config file {str(path)!r}{where}: not valid YAML: {detail}"


def load_valid_config(source: str | os.PathLike[str] | Mapping[str, Any]) -> ValidConfig:
    """Read and validate a config once (:func:`validate_config`); file or mapping."""
    raw = read_config_source(source)
    return validate_config(raw, None if isinstance(source, Mapping) else source)


def load_config(source: str | Path | Mapping[str, Any]) -> dict[str, Any]:
    """The validated config of a YAML file or mapping (:func:`load_valid_config`)."""
    return load_valid_config(source).config
