"""The repository owns its specification: docstrings and captions cite docs/, never files
outside the repository, and the cited docs sections exist."""

from __future__ import annotations

import re
from pathlib import Path

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
    for folder in ("src", "workflow", "profiles", "benchmarks"):
        files += [
            p
            for p in (ROOT / folder).rglob("*")
            if p.is_file() and p.suffix in {".py", ".smk", ".yaml", ".rst", ".md", ".html"}
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
    from attnrmt.sweep.config import load_schema

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
