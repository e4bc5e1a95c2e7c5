# Two commands matter: `make demo` and `make test`. Both build .venv first.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test bench lint venv clean browser

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
	$(PY) -m nadaraya demo

lint: $(STAMP)
	$(PY) -m ruff check src tests benchmarks examples

# Debian's chromium for the report's browser test (CI runs as root on a fresh machine); the
# test skips, saying why, when it cannot be installed.
browser:
	command -v chromium >/dev/null || (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium) || \
		echo "chromium could not be installed; the browser test will be skipped"

test: $(STAMP) lint browser
	$(PY) -m pytest -q

bench: $(STAMP)
	$(PY) benchmarks/run.py

clean:
	rm -rf $(VENV) demo-output .pytest_cache .ruff_cache
