# The two entry points of the README: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: install demo test lint bench

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -c constraints.txt -e '.[test]'
	touch $@

# Start the sandbox shops, seed them, crawl twice, print the prices and the crawl stats.
demo: install
	$(BIN)/python -m pricewatch.demo

# The whole test suite (needs PostgreSQL and Redis on 127.0.0.1, see .ci/run).
test: install
	$(BIN)/pytest -q

lint: install
	$(BIN)/ruff check pricewatch tests bench
	$(BIN)/ruff format --check pricewatch tests bench
	$(BIN)/mypy pricewatch

bench: install
	$(BIN)/python bench/extraction.py
	$(BIN)/python bench/store.py
	$(BIN)/python bench/frontier.py
