"""The numbers README.md and docs/*.md quote from a run, checked against its tables.

A quoted number is marked where it stands, ``<!--q:NAME-->0.697 [0.664, 0.728]<!--/q-->``
(an HTML comment: invisible on GitHub and in the site), and ``NAME`` is defined once, in a
``<!-- quoted-numbers ... -->`` block (docs/index.md, the site's home page, which includes
README.md's findings, holds the one block), as a query on a table of a run::

    NAME: TABLE FILTER... : OUTPUT...

``TABLE`` is ``results/<run>/TABLE.csv`` of the run checked, ``RUN/TABLE`` another run's
``results/RUN/TABLE.csv`` (the configs' studies of README's "Beyond the paper"); each
``FILTER`` ``column=value`` keeps the rows whose ``column`` equals ``value`` (a number
compares numerically; ``a,b`` is any of them; ``max`` / ``min`` the largest / smallest
value left), in order; each ``OUTPUT`` is a column, whose one value the kept rows must
share, or ``median(column)``, ``min(column)``, ``max(column)``, ``count()``. A marked
text holds the outputs in order: its numbers (a ``%`` number is the value x 100) equal the
values as rounded to the digits written (0.697 stands for [0.6965, 0.6975]); a text output
(a ranking) equals the marked text, backticks dropped.

``<!--p-->...<!--/p-->`` marks numbers that are parameters of the config and
``<!--t-->...<!--/t-->`` timings (machine-dependent): neither is checked. In a section
that quotes a run (``<!-- --8<-- [start:findings] -->``), every decimal number must be in
one of the three (:func:`unmarked_numbers`).

``python -m tests.docs_numbers results/default README.md docs/*.md`` (``make
docs-numbers``) checks the docs against the default run and every other run they quote
(its folder beside it), and names each run without tables (its numbers unchecked: a
problem); tests/test_docs_numbers.py tests the parser and the comparison,
tests/e2e/test_docs_numbers_run.py every query of the default run on a tiny run of the
default config's shape (the other runs' queries skipped there, and named).
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

#: A marked quotation: its name and its text.
MARK = re.compile(r"<!--q:([\w.-]+)-->(.*?)<!--/q-->", flags=re.S)
#: Parameters and timings: not checked.
EXCUSED = re.compile(r"<!--([pt])-->(.*?)<!--/\1-->", flags=re.S)
#: The one block of definitions.
DEFINITIONS = re.compile(r"<!-- quoted-numbers\n(.*?)-->", flags=re.S)
#: A number as the docs write it: sign (ASCII or U+2212), digits, decimals, exponent, %.
NUMBER = re.compile(r"(?<![\w.])([-\u2212]?)(\d+(?:,\d{3})*(?:\.\d+)?|nan|inf)(e[-+]?\d+)?(%?)")
#: A decimal number (what a section quoting a run may not leave unmarked).
DECIMAL = re.compile(r"(?<![\w.])[-\u2212]?\d+\.\d+|(?<![\w.])\d+(?:\.\d+)?%|\d+e-\d+")
#: Where a section quotes a run (pymdownx.snippets section names of README.md).
QUOTING_SECTIONS = ("findings",)

Value = float | str


@dataclass(frozen=True)
class Quoted:
    """One marked number (or text) of a document."""

    document: str
    name: str
    text: str


def definitions(texts: Iterable[str]) -> dict[str, str]:
    """``NAME -> query`` of every ``quoted-numbers`` block of ``texts`` (a name defined
    twice is an error). O(text length)."""
    found: dict[str, str] = {}
    for text in texts:
        for block in DEFINITIONS.findall(text):
            for line in block.splitlines():
                if not line.strip() or line.lstrip().startswith("#"):
                    continue
                name, sep, query = line.partition(":")
                if not sep:
                    raise ValueError(f"quoted-numbers: {line!r} is not 'NAME: query'")
                if name.strip() in found:
                    raise ValueError(f"quoted-numbers: {name.strip()!r} defined twice")
                found[name.strip()] = query.strip()
    return found


def quotations(document: str, text: str) -> list[Quoted]:
    """Every ``<!--q:NAME-->...<!--/q-->`` of ``text``, in order."""
    return [Quoted(document, name, body) for name, body in MARK.findall(text)]


def unmarked_numbers(text: str) -> list[str]:
    """Decimal numbers of the run-quoting sections of ``text`` outside every marker."""
    found = []
    for section in QUOTING_SECTIONS:
        pattern = rf"<!-- --8<-- \[start:{section}\] -->(.*?)<!-- --8<-- \[end:{section}\] -->"
        for body in re.findall(pattern, text, flags=re.S):
            stripped = EXCUSED.sub(" ", MARK.sub(" ", body))
            stripped = re.sub(r"<!--.*?-->", " ", stripped, flags=re.S)
            found += DECIMAL.findall(stripped)
    return found


# --------------------------------------------------------------------------- queries


def _select(frame: pd.DataFrame, column: str, value: str) -> pd.DataFrame:
    if column not in frame:
        raise KeyError(f"no column {column!r}")
    if value in ("max", "min"):
        numbers = pd.to_numeric(frame[column], errors="coerce")
        target = numbers.max() if value == "max" else numbers.min()
        return frame[numbers == target]
    keep = np.zeros(len(frame), bool)
    for option in value.split(","):
        try:
            number = float(option)
        except ValueError:
            keep |= (frame[column].astype(str) == option).to_numpy()
        else:
            keep |= (pd.to_numeric(frame[column], errors="coerce") == number).to_numpy()
    return frame[keep]


def _output(rows: pd.DataFrame, output: str) -> Value:
    call = re.fullmatch(r"(median|min|max|count)\((\w*)\)", output)
    if call:
        function, column = call.groups()
        if function == "count":
            return float(len(rows))
        values = pd.to_numeric(rows[column], errors="coerce")
        return float(getattr(values, function)())
    if output not in rows:
        raise KeyError(f"no column {output!r}")
    distinct = rows[output].drop_duplicates()
    if len(distinct) != 1:
        raise ValueError(f"{output}: {len(distinct)} distinct values in the selected rows")
    value = distinct.iloc[0]
    return value if isinstance(value, str) else float(value)


def evaluate(query: str, tables: Mapping[str, pd.DataFrame]) -> list[Value]:
    """The values of ``query`` (``TABLE FILTER... : OUTPUT...``) on ``tables``.

    Raises ``KeyError`` (no such table or column) or ``ValueError`` (no row left, or a
    column output whose rows disagree). O(rows of the table x filters).
    """
    selection, sep, outputs = query.partition(" : ")
    if not sep or not outputs.split():
        raise ValueError(f"{query!r}: expected 'TABLE FILTER... : OUTPUT...'")
    table, *filters = selection.split()
    if table not in tables:
        raise KeyError(f"no table {table!r}")
    rows = tables[table]
    for item in filters:
        column, eq, value = item.partition("=")
        if not eq:
            raise ValueError(f"{query!r}: filter {item!r} is not column=value")
        rows = _select(rows, column, value)
    if rows.empty:
        raise ValueError(f"{query!r}: no row left")
    return [_output(rows, output) for output in outputs.split()]


def read_tables(run_dir: str | Path, prefix: str = "") -> dict[str, pd.DataFrame]:
    """Every ``<name>.csv`` of a finished run's folder, by ``prefix + name`` (``{}``: no
    ``thresholds.csv``, the run's last table, so not a finished run)."""
    if not (Path(run_dir) / "thresholds.csv").is_file():
        return {}
    paths = sorted(Path(run_dir).glob("*.csv"))
    return {prefix + path.stem: pd.read_csv(path) for path in paths}


def run_of(query: str) -> str:
    """The run ``query`` reads: ``RUN`` of a ``RUN/TABLE``, ``""`` for the run checked."""
    return query.split(maxsplit=1)[0].rpartition("/")[0] if query.strip() else ""


def missing_runs(defined: Mapping[str, str], tables: Mapping[str, object]) -> dict[str, list[str]]:
    """The runs the ``defined`` queries read that have no table in ``tables`` (``""``: the
    run checked), each with the names of its queries. O(queries + tables)."""
    present = {name.rpartition("/")[0] for name in tables}
    missing: dict[str, list[str]] = {}
    for name, query in defined.items():
        if run_of(query) not in present:
            missing.setdefault(run_of(query), []).append(name)
    return missing


# --------------------------------------------------------------------------- comparison


def _written(sign: str, digits: str, exponent: str, percent: str) -> tuple[float, float]:
    """The value a written number stands for and half a unit of its last digit."""
    if digits in ("nan", "inf"):
        return float(digits) * (-1 if sign else 1), 0.0
    decimals = len(digits.partition(".")[2])
    scale = 10.0 ** int(exponent[1:]) if exponent else 1.0
    value = float(digits.replace(",", "")) * scale * (-1 if sign else 1)
    half = 0.5 * 10.0**-decimals * scale
    if percent:
        value, half = value / 100, half / 100
    return value, half


def mismatch(text: str, values: Sequence[Value]) -> str | None:
    """Why ``text`` does not quote ``values`` (``None``: it does).

    Numbers are compared at the precision written: ``|written - value| <= half a unit of
    the last digit`` (plus 1e-9 relative, for the binary representation). O(len(text)).
    """
    if any(isinstance(value, str) for value in values):
        written = text.replace("`", "").strip()
        expected = " ".join(str(value) for value in values)
        return None if written == expected else f"{written!r} but the run has {expected!r}"
    numbers = NUMBER.findall(text)
    if len(numbers) != len(values):
        return f"{len(numbers)} numbers in {text!r} for {len(values)} values {list(values)}"
    for parts, value in zip(numbers, values, strict=True):
        written, half = _written(*parts)
        actual = float(value)
        if not (math.isfinite(written) and math.isfinite(actual)):
            if not (written == actual or (math.isnan(written) and math.isnan(actual))):
                return f"{''.join(parts)} but the run has {actual:.6g}"
            continue
        if abs(written - actual) > half + 1e-9 * max(1.0, abs(actual)):
            return f"{''.join(parts)} but the run has {actual:.6g}"
    return None


def formatted(text: str, values: Sequence[Value]) -> str:
    """``text`` with its numbers replaced by ``values``, each at the precision written
    there (a text output replaces the whole text). What a run would make the docs say."""
    if any(isinstance(value, str) for value in values):
        return " ".join(str(value) for value in values)
    numbers = list(NUMBER.finditer(text))
    if len(numbers) != len(values):
        raise ValueError(f"{len(numbers)} numbers in {text!r} for {len(values)} values")
    out, last = [], 0
    for match, value in zip(numbers, values, strict=True):
        _, digits, exponent, percent = match.groups()
        decimals = len(digits.partition(".")[2])
        actual = float(value) * (100 if percent else 1)
        if not math.isfinite(actual):
            written = str(actual)  # nan, inf, -inf
        elif exponent:
            written = f"{actual / 10.0 ** int(exponent[1:]):.{decimals}f}{exponent}"
        else:
            written = f"{actual:.{decimals}f}"
        out += [text[last : match.start()], written + percent]
        last = match.end()
    return "".join([*out, text[last:]])


def check(
    documents: Mapping[str, str], tables: Mapping[str, pd.DataFrame], skip_missing: bool = False
) -> list[str]:
    """Every problem of ``documents`` (name -> text) against the runs' ``tables``: a
    quotation that differs from its run, an undefined or failing name, a definition never
    quoted, a decimal number left unmarked in a run-quoting section, a run without tables
    (:func:`missing_runs`; with ``skip_missing`` its quotations are skipped, as the tiny
    e2e run skips the other runs' and names them). ``[]``: all agree."""
    defined = definitions(documents.values())
    missing = missing_runs(defined, tables)
    unchecked = {name for names in missing.values() for name in names}
    problems, used = [], set()
    for document, text in documents.items():
        for number in unmarked_numbers(text):
            problems.append(f"{document}: {number} quotes the run but is not marked")
        for quoted in quotations(document, text):
            used.add(quoted.name)
            if quoted.name not in defined:
                problems.append(f"{document}: {quoted.name}: not defined in quoted-numbers")
                continue
            if quoted.name in unchecked:
                continue
            try:
                values = evaluate(defined[quoted.name], tables)
            except (KeyError, ValueError) as error:
                problems.append(f"{document}: {quoted.name}: {error}")
                continue
            why = mismatch(quoted.text, values)
            if why:
                problems.append(f"{document}: {quoted.name}: {why}")
    unused = [name for name in defined if name not in used]
    problems += [f"quoted-numbers: {name} is defined but never quoted" for name in unused]
    return problems + [
        f"{run or 'the run checked'}: no tables of a finished run, "
        f"{len(names)} quoted numbers unchecked ({', '.join(names)})"
        for run, names in ([] if skip_missing else missing.items())
    ]


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m tests.docs_numbers RUN_DIR DOC...``: print each problem (a run without
    tables is one); exit 1 if any, 2 if no run the docs quote has tables."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 2:
        print("usage: python -m tests.docs_numbers results/<run> README.md docs/*.md")
        return 2
    run_dir, *paths = args
    documents = {path: Path(path).read_text(encoding="utf-8") for path in paths}
    runs = sorted({run_of(query) for query in definitions(documents.values()).values()} - {""})
    tables = read_tables(run_dir)
    for run in runs:
        tables |= read_tables(Path(run_dir).parent / run, prefix=f"{run}/")
    if not tables:
        print(f"{run_dir} and {runs}: no tables of a finished run (make run first)")
        return 2
    problems = check(documents, tables)
    where = {"the run checked": run_dir, **{run: str(Path(run_dir).parent / run) for run in runs}}
    for problem in problems:
        head, sep, rest = problem.partition(": no tables")
        print(f"{where.get(head, head) if sep else head}{sep}{rest}")
    n_quoted = sum(len(quotations(name, text)) for name, text in documents.items())
    against = ", ".join([run_dir, *(str(Path(run_dir).parent / run) for run in runs)])
    print(f"{n_quoted} quoted numbers in {len(paths)} files against {against}: ", end="")
    print(f"{len(problems)} problems" if problems else "all agree")
    return 1 if problems else 0


__all__ = [
    "Quoted",
    "check",
    "definitions",
    "evaluate",
    "formatted",
    "main",
    "mismatch",
    "missing_runs",
    "quotations",
    "read_tables",
    "run_of",
    "unmarked_numbers",
]

if __name__ == "__main__":
    raise SystemExit(main())
