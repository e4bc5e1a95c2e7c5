# Two commands matter: `make demo` and `make test`. Both build .venv first.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test bench lint venv clean

venv: $(STAMP)

# torch first, by its pin: that takes the CPU build from local disk; a plain `torch`
# requirement would download a CUDA build of several GB.
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e ".[all,dev]"
	touch $(STAMP)

demo: $(STAMP)
	$(PY) examples/textbook.py

lint: $(STAMP)
	$(PY) -m ruff check src tests benchmarks examples

test: $(STAMP) lint
	$(PY) -m pytest -q

bench: $(STAMP)
	$(PY) benchmarks/run.py

clean:
	rm -rf $(VENV) demo-output .pytest_cache .ruff_cache
