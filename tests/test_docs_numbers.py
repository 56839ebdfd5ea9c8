"""tests/docs_numbers.py, the check of the numbers the docs quote from a run: its parser,
its queries and its comparison (fast, on small tables); the docs' own markers and
definitions, without a run. tests/e2e/test_docs_numbers_run.py runs every query on a
tiny run; `make docs-numbers` checks the docs against the default run."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pandas as pd
import pytest
import yaml

from tests import docs_numbers as dn

ROOT = Path(__file__).resolve().parents[1]


def documents() -> dict[str, str]:
    """README.md and docs/*.md, as `make docs-numbers` reads them."""
    paths = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    return {str(path.relative_to(ROOT)): path.read_text(encoding="utf-8") for path in paths}


def tables() -> dict[str, pd.DataFrame]:
    thresholds = pd.DataFrame(
        {
            "sweep": ["s", "s", "s", "t"],
            "transition": ["population", "population", "sample", "population"],
            "d": [100.0, 800.0, 800.0, math.inf],
            "estimate": [0.71, 0.696875, 1.21728, math.nan],
            "bound": ["none", "none", "none", "below"],
            "ranking": ["a > b", "a > b", "b > a", "a > b"],
        }
    )
    return {"thresholds": thresholds}


# --------------------------------------------------------------------------- comparison


@pytest.mark.parametrize(
    ("text", "values"),
    [
        ("0.697", [0.696875]),  # written to 3 decimals: [0.6965, 0.6975]
        ("0.697 [0.664, 0.728]", [0.696875, 0.664088, 0.72842]),
        ("1.3%", [0.0133]),
        ("16% to 24%", [0.1646, 0.2419]),
        ("6.2e-4 at d = 800", [0.000615228, 800.0]),
        ("\u22120.017", [-0.017157]),  # the typographic minus
        ("d^-0.93", [-0.9317]),
        ("2,578 cells", [2578.0]),
        ("`a > b`", ["a > b"]),
        ("nan", [math.nan]),
        ("nan [-inf, 0.00]", [math.nan, -math.inf, 0.0]),  # a bound, as a tiny run has it
    ],
)
def test_a_quotation_agrees_with_the_run_at_the_precision_written(text, values) -> None:
    assert dn.mismatch(text, values) is None


@pytest.mark.parametrize(
    ("text", "values", "why"),
    [
        ("0.68 [0.65, 0.73]", [0.696875, 0.664088, 0.72842], "0.68 but the run has 0.696875"),
        ("1.24", [1.21728], "1.24 but the run has 1.21728"),
        ("0.6976", [0.696875], "0.6976"),  # one digit more, and it is off
        ("1.4%", [0.0133], "1.4%"),  # a percent is the value x 100
        ("0.017", [-0.017157], "0.017"),  # the sign counts
        ("6e-4", [0.00066], "6e-4"),
        ("0.697", [0.696875, 0.66], "1 numbers"),
        ("`a > b`", ["b > a"], "'a > b' but the run has 'b > a'"),
        ("0.5", [math.nan], "0.5 but the run has nan"),
        ("inf", [-math.inf], "inf but the run has -inf"),
    ],
)
def test_a_quotation_that_differs_from_the_run_is_named(text, values, why) -> None:
    problem = dn.mismatch(text, values)
    assert problem is not None and why in problem, problem


def test_formatted_writes_what_the_run_says_at_the_precision_of_the_text() -> None:
    text = "0.68 [0.65, 0.73], 1.2% and 6e-4 at d = 800"
    values = [0.696875, 0.664088, 0.72842, 0.0133, 0.000615228, 800.0]
    assert dn.formatted(text, values) == "0.70 [0.66, 0.73], 1.3% and 6e-4 at d = 800"
    assert dn.mismatch(dn.formatted(text, values), values) is None
    assert dn.formatted("`x`", ["a > b"]) == "a > b"


# --------------------------------------------------------------------------- queries


def test_queries_filter_select_and_reduce() -> None:
    t = tables()
    query = "thresholds sweep=s transition=population d=max : estimate"
    assert dn.evaluate(query, t) == [pytest.approx(0.696875)]
    assert dn.evaluate("thresholds sweep=s d=min : d estimate", t) == [100.0, 0.71]
    assert dn.evaluate("thresholds d=inf : bound", t) == ["below"]
    assert dn.evaluate("thresholds sweep=s,t bound=none : count()", t) == [3.0]
    assert dn.evaluate("thresholds sweep=s : median(estimate) max(d)", t) == [0.71, 800.0]
    assert dn.evaluate("thresholds sweep=s transition=sample : ranking", t) == ["b > a"]


@pytest.mark.parametrize(
    ("query", "error", "message"),
    [
        ("thresholds sweep=s : estimate", ValueError, "3 distinct values"),
        ("thresholds sweep=u : estimate", ValueError, "no row left"),
        ("thresholds sweep=s : no_column", KeyError, "no column"),
        ("thresholds no_column=1 : d", KeyError, "no column"),
        ("missing sweep=s : d", KeyError, "no table"),
        ("thresholds sweep=s", ValueError, "expected"),
        ("thresholds sweep : d", ValueError, "not column=value"),
    ],
)
def test_a_query_the_tables_cannot_answer_raises(query, error, message) -> None:
    with pytest.raises(error, match=message):
        dn.evaluate(query, tables())


# --------------------------------------------------------------------------- documents


def marked_document(number: str) -> dict[str, str]:
    return {
        "README.md": (
            "<!-- --8<-- [start:findings] -->\n"
            f"at snr <!--q:pop-->{number}<!--/q--> (config <!--p-->0.5<!--/p-->, "
            "<!--t-->3.5 s<!--/t-->)\n<!-- --8<-- [end:findings] -->\n"
        ),
        "docs/index.md": (
            "<!-- quoted-numbers\n# comment\n"
            "pop: thresholds sweep=s transition=population d=max : estimate\n-->\n"
        ),
    }


def test_check_passes_a_document_that_quotes_the_run_and_names_each_problem() -> None:
    assert dn.check(marked_document("0.697"), tables()) == []
    assert dn.check(marked_document("0.68"), tables()) == [
        "README.md: pop: 0.68 but the run has 0.696875"
    ]
    docs = marked_document("0.697")
    docs["README.md"] = docs["README.md"].replace("(config", "(0.25 more, config")
    docs["docs/other.md"] = "<!--q:nope-->1<!--/q-->"
    docs["docs/index.md"] += "<!-- quoted-numbers\nlost: thresholds d=max : d\n-->\n"
    assert dn.check(docs, tables()) == [
        "README.md: 0.25 quotes the run but is not marked",
        "docs/other.md: nope: not defined in quoted-numbers",
        "quoted-numbers: lost is defined but never quoted",
    ]


def test_main_exits_1_and_names_the_number_that_differs(tmp_path, capsys) -> None:
    run = tmp_path / "run"
    run.mkdir()
    tables()["thresholds"].to_csv(run / "thresholds.csv", index=False)
    for number, code in (("0.697", 0), ("0.70", 0), ("0.69", 1)):
        paths = []
        for name, text in marked_document(number).items():
            path = tmp_path / name.replace("/", "-")
            path.write_text(text, encoding="utf-8")
            paths.append(str(path))
        assert dn.main([str(run), *paths]) == code, number
    out = capsys.readouterr().out
    assert "pop: 0.69 but the run has 0.696875" in out and out.rstrip().endswith("1 problems")
    assert dn.main([str(tmp_path / "nowhere"), *paths]) == 2


def two_run_document(number: str, other: str) -> dict[str, str]:
    """marked_document's quotation of the run checked and one of the run ``other``."""
    docs = marked_document(number)
    docs["README.md"] += "and <!--q:other-->1.22<!--/q-->\n"
    query = f"{other}/thresholds d=800 transition=sample : estimate"
    docs["docs/index.md"] += f"<!-- quoted-numbers\nother: {query}\n-->\n"
    return docs


def test_a_query_of_another_run_reads_its_tables_and_a_run_without_tables_is_a_problem() -> None:
    """RUN/TABLE reads RUN's tables: a wrong number there fails; a run with no tables is
    named (its quotations unchecked), skipped only when asked (the tiny e2e run)."""
    both = {**tables(), "study/thresholds": tables()["thresholds"]}
    assert dn.run_of("study/thresholds d=800 : d") == "study" and dn.run_of("bulk : d") == ""
    assert dn.check(two_run_document("0.697", "study"), both) == []
    wrong = two_run_document("0.697", "study")
    wrong["README.md"] = wrong["README.md"].replace("1.22", "1.23")
    assert dn.check(wrong, both) == ["README.md: other: 1.23 but the run has 1.21728"]
    absent = two_run_document("0.697", "absent")
    assert dn.missing_runs(dn.definitions(absent.values()), both) == {"absent": ["other"]}
    assert dn.check(absent, both) == [
        "absent: no tables of a finished run, 1 quoted numbers unchecked (other)"
    ]
    assert dn.check(absent, both, skip_missing=True) == []
    assert dn.check(wrong, both, skip_missing=True) != []  # a run present is never skipped


def test_main_checks_every_run_present_and_names_each_run_missing(tmp_path, capsys) -> None:
    results = tmp_path / "results"
    for run in ("default", "study"):
        (results / run).mkdir(parents=True)
    tables()["thresholds"].to_csv(results / "default" / "thresholds.csv", index=False)
    (results / "study" / "thresholds.csv").write_text("d,transition,estimate\n800,sample,1.3\n")

    def main(docs: dict[str, str], run: str = "default") -> int:
        for name, text in docs.items():
            (tmp_path / name.replace("/", "-")).write_text(text, encoding="utf-8")
        paths = [str(tmp_path / name.replace("/", "-")) for name in docs]
        return dn.main([str(results / run), *paths])

    assert main(two_run_document("0.697", "study")) == 1  # study's table says 1.3
    assert "other: 1.22 but the run has 1.3" in capsys.readouterr().out
    assert main(two_run_document("0.697", "absent")) == 1
    out = capsys.readouterr().out
    assert f"{results / 'absent'}: no tables of a finished run, 1 quoted numbers unchecked" in out
    assert main(two_run_document("0.697", "study"), run="nowhere") == 1  # study is checked
    out = capsys.readouterr().out
    assert (
        f"{results / 'nowhere'}: no tables of a finished run, 1 quoted numbers unchecked (pop)"
        in out
    )
    assert "other: 1.22 but the run has 1.3" in out


def test_the_docs_define_every_number_they_quote_once_and_quote_every_definition() -> None:
    """Without a run: names, definitions, markers and the unmarked-number rule."""
    docs = documents()
    defined = dn.definitions(docs.values())
    quoted = [q for name, text in docs.items() for q in dn.quotations(name, text)]
    assert len(quoted) >= 25 and {q.document for q in quoted} >= {"README.md"}
    assert {q.name for q in quoted} == set(defined)
    for name, text in docs.items():
        assert dn.unmarked_numbers(text) == [], name
    # the stale thresholds are not what the README says any more
    readme = docs["README.md"]
    assert "0.68 [0.65, 0.73]" not in readme and "1.24 [1.12, 1.34]" not in readme
    # every query names a table of the data contract and has outputs
    from attnrmt.contract import TABLES

    for name, query in defined.items():
        table = query.split()[0].rpartition("/")[2]
        assert table in TABLES and re.search(r" : \S", query), (name, query)
    # another run is a study whose config the project ships (results/<its run>/)
    for run in {dn.run_of(query) for query in defined.values()} - {""}:
        config = yaml.safe_load((ROOT / "configs" / f"{run}.yaml").read_text(encoding="utf-8"))
        assert config["run"] == run


def test_unmarked_numbers_applies_to_run_quoting_sections_only() -> None:
    text = (
        "0.5 outside\n<!-- --8<-- [start:findings] -->\n1.5 and <!--q:a-->2.5<!--/q--> and "
        "7% and d = 800\n<!-- --8<-- [end:findings] -->\n"
    )
    assert dn.unmarked_numbers(text) == ["1.5", "7%"]
