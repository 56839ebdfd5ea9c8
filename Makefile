# attnrmt — every target bootstraps .venv when it is missing or pyproject.toml changed.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.attnrmt-installed
CORES  ?= $(shell nproc)
CONFIG ?= config.yaml
RUN    ?= default

.PHONY: run test report bench lint clean-results venv

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/snakemake --cores $(CORES) --configfile $(CONFIG) --workflow-profile profiles/default
	$(BIN)/snakemake --cores $(CORES) --configfile $(CONFIG) --workflow-profile profiles/default \
		--report results/$(RUN)/report.html

report: $(STAMP)
	$(BIN)/snakemake --cores $(CORES) --configfile $(CONFIG) --workflow-profile profiles/default \
		--report results/$(RUN)/report.html

test: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/python -m pytest

bench: $(STAMP)
	$(BIN)/python -m benchmarks

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks

clean-results:
	rm -rf results/
