"""The repository owns its specification: docstrings and captions cite docs/, never files
outside the repository, and the cited docs sections exist. The documentation site
(mkdocs.yml) holds every page and notebook and documents every public name of the five
package doors; README.md, CHANGELOG.md, CITATION.cff and benchmarks/results.md say what
they must (links that resolve, numbers as stored, one version)."""

from __future__ import annotations

import importlib
import importlib.util
import json
import re
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXTERNAL = re.compile(r"spec\s*§|§\s*\d|model-and-theory\.md|(?<![\w/-])pipeline\.md")
CITATION = re.compile(r'docs/model\.md[`]*,\s*((?:"[^"]+"(?:,\s*|\s+and\s+)?)+)')


def source_files() -> list[Path]:
    files = [
        ROOT / "Snakefile",
        ROOT / "README.md",
        ROOT / "config.yaml",
        *(ROOT / "docs").glob("*.md"),
        *(ROOT / "configs").glob("*.yaml"),
    ]
    for folder in ("src", "workflow", "benchmarks"):
        files += [
            p
            for p in (ROOT / folder).rglob("*")
            if p.is_file()
            and (
                p.suffix in {".py", ".smk", ".yaml", ".rst", ".md", ".html"}
                or p.name == "Snakefile"
            )
        ]
    return files


def test_no_reference_to_files_outside_the_repository() -> None:
    offending = [
        f"{p.relative_to(ROOT)}:{n}: {line.strip()}"
        for p in source_files()
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if EXTERNAL.search(line)
    ]
    assert offending == []


def test_every_cited_model_section_exists() -> None:
    headings = {
        line.lstrip("#").strip()
        for line in (ROOT / "docs" / "model.md").read_text().splitlines()
        if line.startswith("#")
    }
    cited = set()
    for path in source_files():
        text = " ".join(path.read_text(encoding="utf-8").split())
        for match in CITATION.finditer(text):
            cited |= set(re.findall(r'"([^"]+)"', match.group(1)))
    assert cited, "no citation found: the pattern is wrong"
    assert cited - headings == set()


def _headings(path: Path) -> set[str]:
    return {
        line.lstrip("#").strip() for line in path.read_text().splitlines() if line.startswith("#")
    }


def test_every_cited_data_contract_section_exists() -> None:
    pattern = re.compile(r'docs/data-contract\.md[`]*,\s*"([^"]+)"')
    cited = {
        match
        for path in source_files()
        for match in pattern.findall(" ".join(path.read_text(encoding="utf-8").split()))
    }
    assert cited, "no citation found: the pattern is wrong"
    assert cited - _headings(ROOT / "docs" / "data-contract.md") == set()


def test_data_contract_names_every_variable_and_config_key() -> None:
    from attnrmt.contract import VARIABLE_ATTRS
    from attnrmt.sweep.spec.schema import load_schema

    text = (ROOT / "docs" / "data-contract.md").read_text()
    schema = load_schema()["properties"]
    keys = [
        *schema,
        *(
            f"{section}.{key}" if section != "analysis" else key
            for section in ("execution", "analysis")
            for key in schema[section]["properties"]
        ),
    ]
    missing = [
        name
        for name in [*VARIABLE_ATTRS, *keys]
        if f"`{name}`" not in text and not re.search(rf"`[^`]*\b{re.escape(name)}\b[^`]*`", text)
    ]
    assert missing == []


# --------------------------------------------------------------------------- the site
# mkdocs.yml builds the site from docs/ (`make docs`, run by `make test` with --strict:
# every link, anchor and API cross-reference resolves there). What the build cannot see:
# that every page and notebook is in it, that the API reference covers every public name
# of the five doors through the doors themselves, and that the README, the changelog and
# the citation say what they must.

DOORS = ("attnrmt", "attnrmt.model", "attnrmt.theory", "attnrmt.analysis", "attnrmt.sweep")
NOTEBOOKS = sorted((ROOT / "docs" / "notebooks").glob("*.ipynb"))


def sweep_module_references(text: str) -> list[str]:
    """The sweep modules ``text`` names (``attnrmt.sweep.<module>``, ``attnrmt/sweep/<x>``):
    the site names only the sweep package's door and its public names, since the modules
    behind it move (``attnrmt.sweep.md`` is the door's API page)."""
    from attnrmt import sweep

    dotted = [
        name
        for name in re.findall(r"attnrmt\.sweep\.(\w+)", text)
        if name not in {*sweep.__all__, "md"}
    ]
    return dotted + re.findall(r"attnrmt/sweep/\w+", text)


def _mkdocs_config() -> dict:
    """mkdocs.yml (its one ``!!python/name`` tag-free YAML)."""
    import yaml

    return yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))


def _nav_files(nav: list) -> list[str]:
    files = []
    for entry in nav:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        files += _nav_files(value) if isinstance(value, list) else [value]
    return files


def _site_sources() -> list[Path]:
    """Every page and notebook of the site (docs/, less the build's own helpers)."""
    docs = ROOT / "docs"
    return sorted(
        path
        for path in [*docs.rglob("*.md"), *docs.rglob("*.ipynb")]
        if "_griffe" not in path.parts
    )


def test_every_page_and_notebook_is_in_the_site_nav() -> None:
    nav = _nav_files(_mkdocs_config()["nav"])
    assert len(nav) == len(set(nav)), nav
    pages = {str(path.relative_to(ROOT / "docs")) for path in _site_sources()}
    assert set(nav) == pages
    assert {"index.md", "getting-started.md", "changelog.md"} <= pages
    assert len(NOTEBOOKS) == 2 and len([p for p in pages if p.startswith("api/")]) == len(DOORS)


def test_notebooks_execute_in_every_build_and_fail_it_on_an_error() -> None:
    plugins = {next(iter(p)) if isinstance(p, dict) else p: p for p in _mkdocs_config()["plugins"]}
    jupyter = plugins["mkdocs-jupyter"]["mkdocs-jupyter"]
    # cache off: a cached page would skip running a notebook whose code changed
    assert (jupyter["execute"], jupyter["allow_errors"], jupyter["cache"]) == (True, False, False)
    assert jupyter["include"] == ["notebooks/*.ipynb"]


def test_notebooks_are_committed_without_outputs_and_use_public_names_only() -> None:
    """The site shows the outputs of the build's own run, never stale stored ones; the
    notebooks import the doors and drive runs through the ``attnrmt`` command."""
    for path in NOTEBOOKS:
        notebook = json.loads(path.read_text(encoding="utf-8"))
        code = [cell for cell in notebook["cells"] if cell["cell_type"] == "code"]
        assert code and all(
            cell["outputs"] == [] and cell["execution_count"] is None for cell in code
        ), path.name
        source = "".join("".join(cell["source"]) for cell in notebook["cells"])
        imports = re.findall(r"^(?:from|import) (attnrmt[\w.]*)", source, flags=re.M)
        assert set(imports) <= set(DOORS), (path.name, imports)
        assert "tempfile.TemporaryDirectory" in source and '"run"' in source, path.name
        assert sweep_module_references(source) == [], path.name


def test_site_pages_name_no_sweep_module() -> None:
    pages = [
        ROOT / "mkdocs.yml",
        ROOT / "docs" / "index.md",
        ROOT / "docs" / "getting-started.md",
        *(ROOT / "docs" / "api").glob("*.md"),
    ]
    offending = [
        f"{path.name}:{n}: {line.strip()}"
        for path in pages
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if sweep_module_references(line)
    ]
    assert offending == []


def _api_extension() -> Any:
    """docs/_griffe/api_reference.py, the griffe extension mkdocs.yml gives mkdocstrings."""
    spec = importlib.util.spec_from_file_location(
        "_attnrmt_api_reference", ROOT / "docs" / "_griffe" / "api_reference.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _documented_names(door: str, package: Any) -> set[str]:
    """The public names of ``door`` its API page documents: the members mkdocstrings
    renders for ``::: door`` (public, not a submodule: griffe keeps a submodule over a
    member of the same name), the objects its other ``:::`` directives render, the names
    it cross-references (``[...][door.name]``) and, for dunder names, mentions."""
    page = (ROOT / "docs" / "api" / f"{door}.md").read_text(encoding="utf-8")
    directives = re.findall(r"^::: (\S+)", page, flags=re.M)
    assert door in directives, f"{door}.md does not render {door}"
    module = package if door == "attnrmt" else package[door.removeprefix("attnrmt.")]
    public = importlib.import_module(door).__all__
    names = {
        name
        for name in public
        if name in module.members
        and not name.startswith("_")
        and not module.members[name].is_module
    }
    names |= {target.rsplit(".", 1)[1] for target in directives if target != door}
    names |= set(re.findall(r"\]\[attnrmt(?:\.\w+)*\.(\w+)\]", page))
    names |= set(re.findall(rf"`{re.escape(door)}\.(__\w+__)`", page))
    return names


def test_api_reference_documents_every_public_name_of_the_five_doors() -> None:
    """Under each door's own path; a name added to a door's ``__all__`` that the page
    would not show (a lazy name the extension misses, a submodule's namesake) fails here."""
    import griffe

    extension = _api_extension()
    loader = griffe.GriffeLoader(
        extensions=griffe.load_extensions(extension.ApiReference()),
        search_paths=[str(ROOT / "src")],
    )
    package = loader.load("attnrmt")
    loader.resolve_aliases(implicit=False)
    for door in DOORS:
        public = set(importlib.import_module(door).__all__)
        missing = public - _documented_names(door, package)
        assert missing == set(), (door, sorted(missing))
    # the API pages render the doors themselves, and beyond them only the three names that
    # share their module's name
    directives = {
        target
        for page in (ROOT / "docs" / "api").glob("*.md")
        for target in re.findall(r"^::: (\S+)", page.read_text(), flags=re.M)
    }
    assert directives == {
        *DOORS,
        "attnrmt.theory.predict.predict",
        "attnrmt.theory.spike.spike",
        "attnrmt.analysis.bulk_fit.bulk_fit",
    }


def test_api_extension_turns_roles_into_code_and_reads_lazy_exports() -> None:
    extension = _api_extension()
    assert (
        extension.plain_roles(
            "See :func:`simulate_cell`, :class:`~attnrmt.model.CellResult` and ``S``."
        )
        == "See `simulate_cell`, `attnrmt.model.CellResult` and ``S``."
    )
    import griffe

    model = griffe.load("attnrmt.model", search_paths=[str(ROOT / "src")])
    from attnrmt.model import _EXPORTS

    assert extension.lazy_exports(model) == _EXPORTS


# --------------------------------------------------------------------------- README


def _relative_links(path: Path) -> list[str]:
    links = re.findall(r"\]\(([^)\s]+)\)", path.read_text(encoding="utf-8"))
    return [link for link in links if not re.match(r"[a-z]+:", link)]


def test_readme_is_a_landing_page_whose_links_resolve() -> None:
    """README.md is outside the site (mkdocs --strict does not see its links)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 150
    first_block = text.split("```bash\n", 1)[1].split("```", 1)[0]
    assert [line.split()[:2] for line in first_block.splitlines()] == [
        ["make", "run"],
        ["make", "test"],
    ]
    links = _relative_links(ROOT / "README.md")
    assert len(links) >= 10
    assert [link for link in links if not (ROOT / link.split("#", 1)[0]).exists()] == []
    # the site's home page includes these README sections (pymdownx.snippets)
    index = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    for name in re.findall(r'--8<-- "README\.md:(\w+)"', index):
        assert f"<!-- --8<-- [start:{name}] -->" in text and f"[end:{name}]" in text, name
    assert len(re.findall(r'--8<-- "README\.md:(\w+)"', index)) == 3


def test_getting_started_quotes_the_stored_top_cell_benchmarks() -> None:
    """The numbers of "Large d" are those of benchmarks/results.json, as rounded there."""
    text = " ".join((ROOT / "docs" / "getting-started.md").read_text(encoding="utf-8").split())
    claim = re.search(
        r"([\d.]+)x the full cell's speed at d = 2000, ([\d.]+)x at 4000, ([\d.]+)x at 8000; "
        r"a d = 10\^4 top cell ([\d.]+) CPU seconds and ([\d.]+) GB",
        text,
    )
    assert claim, "Getting started no longer quotes the top-cell benchmark"
    stored = json.loads((ROOT / "benchmarks" / "results.json").read_text())
    result = stored["bench_cell_top_and_kernels"]["result"]
    measured = [result["cell_top_vs_full"][f"d={d}"]["speedup"] for d in (2000, 4000, 8000)]
    measured += [result["cell_top_cpu_seconds_d1e4"], result["cell_top_peak_rss_mb_d1e4"] / 1000]
    for quoted, value in zip(claim.groups(), measured, strict=True):
        decimals = len(quoted.partition(".")[2])
        assert float(quoted) == round(value, decimals), (quoted, value)


# --------------------------------------------------------------------------- release


def _changelog_releases() -> list[tuple[str, str]]:
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    return re.findall(r"^## \[([^\]]+)\](?: - (\d{4}-\d{2}-\d{2}))?$", text, flags=re.M)


def test_changelog_keeps_the_keep_a_changelog_form() -> None:
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    releases = _changelog_releases()
    assert releases[0] == ("Unreleased", "") and len(releases) >= 2
    versions = [version for version, _ in releases[1:]]
    assert all(re.fullmatch(r"\d+\.\d+\.\d+", v) for v in versions), versions
    assert all(date for _, date in releases[1:]), releases
    keys = [tuple(int(part) for part in v.split(".")) for v in versions]
    assert keys == sorted(keys, reverse=True), versions  # newest first
    kinds = set(re.findall(r"^### (.+)$", text, flags=re.M))
    assert kinds and kinds <= {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}, (
        kinds
    )


def test_citation_and_version_agree_with_the_changelog() -> None:
    import tomllib

    import yaml

    citation = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    assert citation["cff-version"] == "1.2.0"
    assert {"message", "title", "authors", "version", "date-released"} <= set(citation)
    latest, date = _changelog_releases()[1]
    assert (str(citation["version"]), str(citation["date-released"])) == (latest, date)
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" not in pyproject["project"] and pyproject["project"]["dynamic"] == ["version"]
    assert any(r.startswith("setuptools-scm") for r in pyproject["build-system"]["requires"])
    # a tree without git metadata installs as a development version after the latest
    # release, never as the release itself
    from packaging.version import Version

    fallback = Version(pyproject["tool"]["setuptools_scm"]["fallback_version"])
    assert fallback.is_devrelease and fallback > Version(latest)


# --------------------------------------------------------------------------- benchmarks


def test_benchmark_results_md_is_the_rendering_of_results_json(tmp_path: Path) -> None:
    from benchmarks.__main__ import RESULTS_JSON, RESULTS_MD, render

    render(json.loads(RESULTS_JSON.read_text()), tmp_path / "results.md")
    assert (tmp_path / "results.md").read_text() == RESULTS_MD.read_text(), (
        "re-render: python -m benchmarks --render"
    )
    table = RESULTS_MD.read_text().split("## Targets\n", 1)[1].split("\n## ", 1)[0]
    assert table.count("\n| bench_") >= 20


def test_benchmark_targets_agree_with_what_the_benchmarks_store() -> None:
    """Every target flag (``*_ok``) and bound (``*_target``) a benchmark stores is a row of
    the table, with the same bound and the same verdict; each bound named after a
    benchmark constant equals it."""
    from benchmarks.__main__ import RESULTS_JSON, TARGETS, measure

    stored = json.loads(RESULTS_JSON.read_text())
    for name, entry in stored.items():
        result = entry["result"]
        targets = [t for t in TARGETS if t.benchmark == name]
        for key, flag in result.items():
            if key.endswith("_ok"):
                target = next((t for t in targets if t.ok_key == key), None)
                assert target is not None, f"{name}.{key} has no row in the targets table"
                assert measure(target, stored).met is flag, (name, key)
            if key.endswith("_target"):
                path = (key.removesuffix("_target"),)
                target = next((t for t in targets if t.path == path), None)
                assert target is not None and target.bound == result[key], (name, key)
    for target in TARGETS:
        assert measure(target, stored).value is not None, target
        if target.constant:
            module, constant = target.constant.split(".")
            value = getattr(importlib.import_module(f"benchmarks.{module}"), constant)
            assert value == target.bound, target.constant


def test_benchmark_target_takes_the_worst_of_several_values() -> None:
    from benchmarks.__main__ import Target, measure

    stored = {
        "b": {
            "environment": {"timestamp": "2026-01-02T03:04:05+00:00"},
            "result": {
                "rows": {"d=1": {"r": 1.2}, "d=2": {"r": 1.7}, "x": {"r": 9}},
                "note": "re-measured 2026-02-03, quiet",
            },
        }
    }
    upper = measure(Target("b", ("rows", "d=*", "r"), "<=", 1.5, "what"), stored)
    assert (upper.value, upper.where, upper.met, upper.n_met, upper.n_values, upper.date) == (
        1.7,
        "d=2",
        False,
        1,
        2,
        "2026-01-02",
    )
    lower = measure(Target("b", ("rows", "d=*", "r"), ">=", 1.0, "w", date_note="note"), stored)
    assert (lower.value, lower.met, lower.date) == (1.2, True, "2026-02-03")
    assert measure(Target("c", ("r",), "<=", 1.0, "w"), stored).value is None


# --------------------------------------------------------------------------- profiles


def _doc_yaml_block(doc: str, first_line: str) -> dict:
    """The ```yaml block of ``doc`` whose first line starts with ``first_line``, parsed."""
    import yaml

    for block in doc.split("```yaml\n")[1:]:
        text = block.split("```", 1)[0]
        if text.startswith(first_line):
            return yaml.safe_load(text)
    raise AssertionError(f"no yaml block starting {first_line!r}")


def _commented_keys(profile_text: str) -> set[str]:
    """Keys a shipped profile offers in comments (``# queue: compute``)."""
    return set(re.findall(r"^\s*#\s*([a-z_]+):\s", profile_text, flags=re.MULTILINE))


@pytest.mark.parametrize(("copy", "shipped"), [("my-site", "slurm-dask"), ("my-slurm", "slurm")])
def test_the_cluster_docs_copy_paste_profiles_agree_with_the_shipped_ones(
    copy: str, shipped: str
) -> None:
    """docs/cluster.md's site profiles are the shipped profiles with site lines filled in:
    every setting the shipped profile makes is there with the same value (except the
    site-sized `resources`, worker sizes and SLURM requests), and every key they add is
    one the shipped profile offers (set or in a comment)."""
    import yaml

    from attnrmt.workflow import PROFILES_DIR

    text = (PROFILES_DIR / shipped / "config.yaml").read_text(encoding="utf-8")
    profile = yaml.safe_load(text)
    doc = _doc_yaml_block(
        (ROOT / "docs" / "cluster.md").read_text(encoding="utf-8"), f"# profiles/{copy}/config.yaml"
    )
    site_sized = {"resources", "default-resources", "set-resources", "config"}
    assert {k: v for k, v in doc.items() if k not in site_sized} == {
        k: v for k, v in profile.items() if k not in site_sized
    }
    assert set(doc) == set(profile)
    assert doc["config"]["dask"]["mode"] == profile["config"]["dask"]["mode"]
    offered = _commented_keys(text)
    for section in ("default-resources",):
        if section in profile:
            assert set(doc[section]) <= set(profile[section]) | offered, section
    jobqueue = profile["config"]["dask"].get("jobqueue")
    if jobqueue is not None:
        keys = set(doc["config"]["dask"]["jobqueue"])
        assert set(jobqueue) <= keys  # every shipped setting is still set
        assert keys <= set(jobqueue) | offered, keys - set(jobqueue) - offered
        prologue = doc["config"]["dask"]["jobqueue"].get("job_script_prologue", [])
        assert not any("activate" in line for line in prologue)  # workers use sys.executable
    assert "activate" not in text.split("job_script_prologue", 1)[-1].split("\n")[0]


# --------------------------------------------------------------------------- project urls


def test_project_urls_name_one_home_in_pyproject_citation_and_site() -> None:
    """pyproject's urls, CITATION.cff and mkdocs.yml name the same repository and site
    (the addresses assume the project lives at github.com/attnrmt/attnrmt)."""
    import tomllib

    import yaml

    urls = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["urls"]
    citation = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    site = _mkdocs_config()
    repository = citation["repository-code"]
    assert re.fullmatch(r"https://github\.com/[\w-]+/[\w-]+", repository), repository
    assert urls["Homepage"] == urls["Repository"] == site["repo_url"] == repository
    assert urls["Issues"] == f"{repository}/issues"
    assert urls["Changelog"] == f"{repository}/blob/main/CHANGELOG.md"
    assert urls["Documentation"] == citation["url"] == site["site_url"]
    assert site["repo_name"] == repository.removeprefix("https://github.com/")


# --------------------------------------------------------------------------- contract labels


def test_data_contract_lists_every_label_and_unit_as_the_contract_defines_them() -> None:
    """docs/data-contract.md, "Units": the table between the contract-attrs markers is
    :data:`attnrmt.contract.VARIABLE_ATTRS`, name by name (order included)."""
    from attnrmt.contract import VARIABLE_ATTRS

    text = (ROOT / "docs" / "data-contract.md").read_text(encoding="utf-8")
    block = text.split("<!-- contract-attrs: start", 1)[1].split("<!-- contract-attrs: end", 1)[0]
    rows = [line for line in block.splitlines()[1:] if line.startswith("| `")]
    documented = [
        tuple(cell.strip().strip("`") for cell in row.strip("|").split("|")) for row in rows
    ]
    expected = [
        (name, attrs["long_name"], attrs.get("units", "—"))
        for name, attrs in VARIABLE_ATTRS.items()
    ]
    assert documented == expected


def test_architecture_names_every_module() -> None:
    """docs/architecture.md's tree (its first code block) names every module of the
    package, so a newcomer finds each file's room and job there."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    tree = text.split("```")[1]
    words = set(re.findall(r"[\w.]+", tree))
    unnamed = [
        str(path.relative_to(ROOT))
        for path in sorted((ROOT / "src" / "attnrmt").rglob("*.py"))
        if path.name != "__init__.py" and path.name not in words and path.stem not in words
    ]
    assert not unnamed, f"modules missing from docs/architecture.md: {unnamed}"
