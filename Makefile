# attnrmt — every target bootstraps .venv when it is missing or pyproject.toml changed.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.attnrmt-installed
CORES  ?= $(shell nproc)
CONFIG ?= config.yaml
# The run name comes from the config (`run:`, else the file's stem): `make run CONFIG=my.yaml`
# writes results/<its run>/. Expanded when a recipe runs, after .venv exists.
RUN_NAME = $(shell $(BIN)/attnrmt run-name $(CONFIG))
SNAKEMAKE = $(BIN)/snakemake --cores $(CORES) --configfile $(CONFIG) --workflow-profile profiles/default

.PHONY: run test report bench lint clean-results venv

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

# attnrmt run: validate first (a YAML syntax error is named with file, line and column;
# Snakemake's own reader of --configfile does not say where), then the run, the report,
# the summary. The same command is what `attnrmt submit` runs as a SLURM job.
run: $(STAMP)
	@$(BIN)/attnrmt run $(CONFIG) --cores $(CORES) --profile profiles/default

report: $(STAMP)
	@$(BIN)/attnrmt validate $(CONFIG)
	$(SNAKEMAKE) --report results/$(RUN_NAME)/report.html

test: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/python -m pytest

bench: $(STAMP)
	$(BIN)/python -m benchmarks

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks

clean-results:
	rm -rf results/
