"""The run record that ties a run folder to one config file
(attnrmt.sweep.store.run_record)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from attnrmt.sweep.store.run_record import (
    RUN_RECORD,
    RunDirConflict,
    claim_run_dir,
    copy_run_record,
)


def test_run_dir_belongs_to_one_config_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    run_dir = tmp_path / "results" / "r"
    claim_run_dir(run_dir, "a.yaml", write=False)
    assert not run_dir.exists()  # a check writes nothing
    claim_run_dir(run_dir, "a.yaml")
    assert json.loads((run_dir / RUN_RECORD).read_text()) == {
        "config_file": "a.yaml",
        "config_path": str(tmp_path / "a.yaml"),
    }
    claim_run_dir(run_dir, tmp_path / "a.yaml")  # same file, given absolute
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    claim_run_dir(run_dir, "../a.yaml", write=False)  # same file from another directory
    monkeypatch.chdir(tmp_path)
    with pytest.raises(RunDirConflict) as caught:
        claim_run_dir(run_dir, "b.yaml", write=False)
    message = str(caught.value)
    for needle in ("'a.yaml'", "'b.yaml'", RUN_RECORD, "run name", "delete"):
        assert needle in message, message
    legacy = tmp_path / "results" / "old"
    legacy.mkdir()
    claim_run_dir(legacy, "b.yaml")  # made before records existed: adopted
    assert json.loads((legacy / RUN_RECORD).read_text())["config_file"] == "b.yaml"


def test_ownership_survives_a_deleted_record_and_the_right_config_recreates_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each gathered sweep keeps a copy of the record: with ``.attnrmt-run.json`` deleted,
    another config under the same run name is still refused (naming the copy), and a run
    of the owning config writes the record again."""
    monkeypatch.chdir(tmp_path)
    run_dir = tmp_path / "results" / "r"
    claim_run_dir(run_dir, "a.yaml")
    (run_dir / "grid").mkdir()
    copy_run_record(run_dir / "grid")
    (run_dir / RUN_RECORD).unlink()
    with pytest.raises(RunDirConflict, match=f"grid/{RUN_RECORD}"):
        claim_run_dir(run_dir, "b.yaml")
    assert not (run_dir / RUN_RECORD).exists()
    claim_run_dir(run_dir, "a.yaml")
    assert json.loads((run_dir / RUN_RECORD).read_text())["config_file"] == "a.yaml"
