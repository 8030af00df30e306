# kag: two commands set everything up on a fresh machine.
#   make demo   create .venv, install kag, run the demo on the embedded store (offline)
#   make test   install dev dependencies, start Neo4j, run lint + types + the whole suite, stop Neo4j
#   make docs   build the documentation site into site/ (strict, offline); open site/index.html
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
NEO4J  := bash deploy/neo4j/neo4j.sh

.PHONY: demo test docs check lint typecheck pytest neo4j-install neo4j-start neo4j-stop neo4j-status bench schemas clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e .
	touch $@

# llama-cpp-python has no wheel for this platform on the registry: build it once (about 5-6 min on
# 2 cores) into ~/.cache/kag-wheels, reuse it after; then pip finds it installed
$(VENV)/.installed-dev: pyproject.toml scripts/llama_wheel.sh | $(BIN)/python
	bash scripts/llama_wheel.sh $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $@ $(VENV)/.installed

demo: $(VENV)/.installed
	$(BIN)/python -m kag.demo

test: $(VENV)/.installed-dev
	bash scripts/test.sh

# the documentation site (Sphinx + MyST + furo) into site/: any warning fails, nothing is fetched; the
# executed pages run in Jupyter kernels, whose scratch folder (jupyter_execute/, beside site/) is removed
docs: $(VENV)/.installed-dev
	$(BIN)/sphinx-build -q -W --keep-going -E -b html docs site
	rm -rf jupyter_execute

# lint + types + tests against an already running Neo4j (see neo4j-start)
check: lint typecheck pytest

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check kag tests benchmarks scripts
	$(BIN)/ruff format --check kag tests benchmarks scripts

typecheck: $(VENV)/.installed-dev
	$(BIN)/mypy

pytest: $(VENV)/.installed-dev
	$(BIN)/pytest

neo4j-install:
	$(NEO4J) install

neo4j-start:
	$(NEO4J) start

neo4j-stop:
	$(NEO4J) stop

neo4j-status:
	$(NEO4J) status

bench: $(VENV)/.installed-dev
	bash scripts/bench.sh

schemas: $(VENV)/.installed
	$(BIN)/python -m kag.examples.export schemas

clean:
	-$(NEO4J) stop
	rm -rf .neo4j $(VENV) .pytest_cache .mypy_cache .ruff_cache site jupyter_execute
