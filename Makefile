# Two entry points: `make run` (sample data -> warehouse) and `make test` (whole suite).
# Both create .venv when missing and install into it; reruns install nothing new.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test install test-services clean-warehouse

install: $(STAMP)

# torch first, from the CPU wheel; every later pip call is pinned by constraints.txt
# so no dependency can pull a CUDA build.
$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[test]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/ctc run

# Services the tests use for real (chromium, a PostgreSQL cluster) are installed and
# started by scripts/test-services.sh; the suite skips a test only when one is truly missing.
# Two pytest-xdist workers: most of the suite waits on subprocesses and servers (11 -> ~7 min on 2 cores).
test: $(STAMP)
	bash scripts/test-services.sh $(BIN)/pytest -n 2

clean-warehouse:
	rm -rf data/warehouse
