"""A tiny run of the default config's shape: every number the docs quote can be computed
from its tables (tests/docs_numbers.py), the check passes a README that quotes this run
and fails one that does not; and every variable open_results returns carries the data
contract's labels.

The queries of other runs (``RUN/TABLE``, README's "Beyond the paper") are skipped here and
named (`make docs-numbers` checks them against results/RUN/).

The tiny config is config.yaml with every sweep shrunk (d = 16 ... 40 in place of
100 ... 800, at most 3 replicates, 6 snr points, 50 bootstrap resamples): the same sweeps,
models and axes, so every query of docs/index.md's quoted-numbers block meets the tables
and columns it reads; it runs the pipeline up to the tables (``analysis_tables``) in
about a minute.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from attnrmt.contract import VARIABLE_ATTRS
from tests import docs_numbers as dn
from tests.e2e.helpers import Workdir
from tests.test_docs_numbers import documents

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
#: The default run's d, shrunk (cells of milliseconds).
SMALL_D = {100: 16, 200: 24, 400: 32, 600: 36, 800: 40}


def tiny_default_config() -> dict:
    """config.yaml with every sweep shrunk (module docstring)."""
    config = yaml.safe_load((ROOT / "config.yaml").read_text(encoding="utf-8"))
    config = copy.deepcopy(config)
    config["run"] = "tinydefault"
    for sweep in config["sweeps"].values():
        d = sweep["d"] if isinstance(sweep["d"], list) else [sweep["d"]]
        sweep["d"] = [SMALL_D[value] for value in d]
        sweep["replicates"] = min(int(sweep["replicates"]), 3)
        if isinstance(sweep["snr"], dict):
            sweep["snr"] = {**sweep["snr"], "num": 6}
    config["analysis"] = {**config["analysis"], "bootstrap": 50, "figure_formats": ["png"]}
    return config


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    workdir = Workdir.create(tmp_path_factory.mktemp("docs-numbers"), tiny_default_config())
    try:
        workdir.run(targets=("analysis_tables",), timeout=600)
    finally:
        workdir.close()
    return workdir.run_dir


def test_every_quoted_number_is_computed_from_the_tiny_runs_tables(tiny_run: Path) -> None:
    """A renamed table or column, a filter that selects nothing, a column the docs read as
    one value that varies: each raises here (a query's error names it)."""
    tables = dn.read_tables(tiny_run)
    defined = dn.definitions(documents().values())
    others = dn.missing_runs(defined, tables)
    print(f"skipped, queries of other runs: {others}")
    assert "" not in others  # the tiny run answers every query of the default run
    skipped = {name for names in others.values() for name in names}
    values = {
        name: dn.evaluate(query, tables) for name, query in defined.items() if name not in skipped
    }
    assert set(values) == set(defined) - skipped and all(values.values())


def test_the_check_passes_docs_that_quote_the_run_and_fails_on_one_changed_number(
    tiny_run: Path,
) -> None:
    tables = dn.read_tables(tiny_run)
    docs = documents()
    defined = dn.definitions(docs.values())

    def quoting(text: str) -> str:  # the docs as this run would have them written
        def replace(match) -> str:
            name, body = match.groups()
            if dn.run_of(defined[name]):  # another run's number: left as written
                return match.group(0)
            written = dn.formatted(body, dn.evaluate(defined[name], tables))
            return f"<!--q:{name}-->{written}<!--/q-->"

        return dn.MARK.sub(replace, text)

    rewritten = {name: quoting(text) for name, text in docs.items()}
    assert dn.check(rewritten, tables, skip_missing=True) == []
    # one number changed in the last decimal written: named, and nothing else
    readme = rewritten["README.md"]
    match = next(m for m in dn.MARK.finditer(readme) if m.group(1) == "iid-pop")
    first = dn.NUMBER.search(match.group(2))
    assert first is not None
    digits = first.group(2)
    bumped = digits[:-1] + str((int(digits[-1]) + 2) % 10)
    changed = readme[: match.start(2)] + match.group(2).replace(digits, bumped, 1)
    changed += readme[match.end(2) :]
    problems = dn.check({**rewritten, "README.md": changed}, tables, skip_missing=True)
    assert len(problems) == 1 and problems[0].startswith("README.md: iid-pop:"), problems
    # and the docs as committed (the default run's numbers) do not quote this tiny run
    assert len(dn.check(docs, tables)) >= 10


def test_every_variable_of_the_opened_results_has_the_contract_labels(tiny_run: Path) -> None:
    """long_name and comment on every variable and coordinate of every group open_results
    returns, units exactly where the contract gives one; xarray's axis label of each is
    its long_name (+ [units]) on one line."""
    from xarray.plot.utils import label_from_attrs

    import attnrmt

    tree = attnrmt.open_results(tiny_run)
    seen = 0
    for node in tree.subtree:
        dataset = node.to_dataset(inherit=False)
        for name, variable in dataset.variables.items():
            attrs = variable.attrs
            contract = VARIABLE_ATTRS[str(name)]
            assert attrs.get("long_name") == contract["long_name"], (node.path, name)
            assert attrs.get("comment") == contract["comment"], (node.path, name)
            assert attrs.get("units") == contract.get("units"), (node.path, name)
            label = label_from_attrs(dataset[name])
            assert "\n" not in label and "[1]" not in label, (node.path, name, label)
            seen += 1
    assert seen > 100 and {"cells", "theory", "analysis"} <= {n.name for n in tree.subtree}
