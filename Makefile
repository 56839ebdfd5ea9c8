# attnrmt — every target bootstraps .venv when it is missing or pyproject.toml changed.
#
#   make run [CONFIG=my.yaml] [CORES=4]   validate, run, report, summary (a live progress bar)
#   make report [CONFIG=my.yaml]          rebuild results/<run>/report.html
#   make test | bench | lint
#   make docs-numbers [CONFIG=...]         the numbers the docs quote against results/<run>/ (+ others)
#
# CORES: cores the run computes on (Snakemake --cores; the run's Dask workers use as many).
# Default 2, what the README's timings were measured with, so `make run` leaves the rest
# of a bigger machine free; `make run CORES=8`, or CORES=all for every core.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.attnrmt-installed
CORES  ?= 2
CONFIG ?= config.yaml
# The run name comes from the config (`run:`, else the file's stem): `make run CONFIG=my.yaml`
# writes results/<its run>/. Expanded when a recipe runs, after .venv exists.
RUN_NAME = $(shell $(BIN)/attnrmt run-name $(CONFIG))
SNAKEMAKE = $(BIN)/snakemake --cores $(CORES) --configfile $(CONFIG) --workflow-profile profiles/default

.PHONY: run test report bench lint docs docs-numbers clean-results venv

venv: $(STAMP)

# Everything `make run`, `make test` and `make bench` need: the workflow and cluster extras, the
# tests', the docs' and the benchmarks' (python-adaptive).
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[all,test,docs,bench]'
	touch $(STAMP)

# attnrmt run: validate first (a YAML syntax error is named with file, line and column;
# Snakemake's own reader of --configfile does not say where), then the run, the report,
# the summary. The same command is what `attnrmt submit` runs as a SLURM job.
run: $(STAMP)
	@$(BIN)/attnrmt run $(CONFIG) --cores $(CORES)

report: $(STAMP)
	@$(BIN)/attnrmt validate $(CONFIG)
	$(SNAKEMAKE) --report results/$(RUN_NAME)/report.html

# The site (mkdocs.yml) into site/: every page, the API reference from the docstrings and
# the notebooks executed (each runs its own tiny sweep); --strict fails on any warning,
# a broken link or a notebook cell that raises. `make test` builds it before pytest.
# The notebooks count the cells each of their runs computes: the shared cell cache is off
# for them (ATTNRMT_CELL_CACHE=off), so the counts do not depend on what ran here before.
MKDOCS = NO_MKDOCS_2_WARNING=1 ATTNRMT_CELL_CACHE=off $(BIN)/mkdocs build --strict
docs: $(STAMP)
	$(MKDOCS)

# The numbers README.md quotes from the default run (<!--q:NAME--> markers; each NAME a
# query on a table, defined in docs/index.md's quoted-numbers block) against the tables
# of results/<run>/, and those it quotes from other runs (RUN/TABLE: results/RUN/, e.g.
# `make run CONFIG=configs/finite-T.yaml`) against theirs; a run without tables is named
# and fails the check (the default run takes minutes, so `make test` checks the mechanism
# on a tiny run instead, tests/e2e/test_docs_numbers_run.py, skipping the other runs).
docs-numbers: $(STAMP)
	$(BIN)/python -m tests.docs_numbers results/$(RUN_NAME) README.md docs/*.md

# The static checks first (seconds): ruff's lint and format, mypy on src/ (pyproject.toml
# [tool.mypy]), Snakemake's own linter of the workflow; then the site, then the tests.
test: $(STAMP)
	$(BIN)/ruff check src tests benchmarks docs
	$(BIN)/ruff format --check src tests benchmarks docs
	$(BIN)/mypy
	$(BIN)/snakemake --lint --cores 1
	$(MKDOCS)
	$(BIN)/python -m pytest --durations=25

bench: $(STAMP)
	$(BIN)/python -m benchmarks

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks docs
	$(BIN)/ruff format --check src tests benchmarks docs
	$(BIN)/mypy
	$(BIN)/snakemake --lint --cores 1

clean-results:
	rm -rf results/
