# Two commands matter: `make demo` and `make test`. Both build .venv first.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test bench lint venv clean browser mutants

venv: $(STAMP)

# torch first, by its pin: that takes the CPU build from local disk; a plain `torch`
# requirement would download a CUDA build of several GB.
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e ".[all,dev,docs]"
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m nadaraya demo

lint: $(STAMP)
	$(PY) -m ruff check src tests benchmarks examples
	$(VENV)/bin/lint-imports

# Debian's chromium for the report's browser test (CI runs as root on a fresh machine); the
# test skips, saying why, when it cannot be installed.
browser:
	command -v chromium >/dev/null || (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium) || \
		echo "chromium could not be installed; the browser test will be skipped"

test: $(STAMP) lint browser
	$(PY) -m pytest -q -n 2

bench: $(STAMP)
	$(PY) benchmarks/run.py

# The documentation site, built offline into docs/_build/html with warnings as errors (a broken
# reference or a failing gallery example stops it); the toolchain is the `docs` extra.
.PHONY: docs
docs: $(STAMP)
	$(PY) -c "import sphinx, pydata_sphinx_theme, numpydoc, sphinx_gallery, myst_parser" 2>/dev/null || \
		$(PY) -m pip install -q -e ".[all,docs]"
	$(PY) -m sphinx -b html -W --keep-going docs docs/_build/html
	@echo "open docs/_build/html/index.html"

clean:
	rm -rf $(VENV) demo-output .pytest_cache .ruff_cache mutants

# Mutation testing (not part of `make test`; docs/testing.md): mutmut mutates the core modules one
# function variant at a time and runs the fast tests that reach each variant ([tool.mutmut] in
# pyproject.toml). MODULES picks the modules, e.g. `make mutants MODULES="kernels partials"`;
# `bandwidth` means its criteria (_Objective, score_bandwidth), `bandwidth-search` the search and
# its optimisers, `bandwidth.rules` the rules of thumb.
# One worker (the machine is shared). The summary counts a survivor listed in docs/testing.md as equivalent.
MODULES ?= kernels partials backends.reference pooling _core.call _core.finish _core.attention bandwidth
MUTMUT := $(VENV)/bin/mutmut
mutant_globs = $(foreach m,$(MODULES),$(if $(filter bandwidth,$(m)),nadaraya.bandwidth._objective.xǁ_Objectiveǁ* \
	nadaraya.bandwidth.criteria.x_score_bandwidth__mutmut_*,$(if $(filter bandwidth-search,$(m)),nadaraya.bandwidth.search.x_* \
	nadaraya.bandwidth.optimise.x_*,nadaraya.$(m).*)))

mutants: $(STAMP)
	$(PY) -c "import mutmut" 2>/dev/null || $(PY) -m pip install -q "mutmut>=3.8,<4"
	rm -rf mutants
	mkdir -p mutants
	$(MUTMUT) run --max-children 1 \
		$(foreach g,$(mutant_globs),'$(g)') > mutants/run.log 2>&1 || (tr '\r' '\n' < mutants/run.log | tail -n 40; exit 1)
	@tr '\r' '\n' < mutants/run.log | grep 'mutations/second'
	@echo; echo "module                       killed survived equivalent timeout no-tests other"
	@$(MUTMUT) results --all true | awk -F': ' '\
		NR == FNR { s = $$0; while (match(s, /nadaraya\.[^ |`]*__mutmut_[0-9]+/)) { \
			eq[substr(s, RSTART, RLENGTH)] = 1; s = substr(s, RSTART + RLENGTH) }; next } \
		{ name = $$1; sub(/^ +/, "", name); st = $$2; if (st == "not checked") next; \
		  mod = name; sub(/\.x[^.]*$$/, "", mod); \
		  if (st == "survived" && (name in eq)) st = "equivalent"; \
		  if (st != "killed" && st != "survived" && st != "equivalent" && st != "timeout" && st != "no tests") \
			st = "other"; \
		  n[mod, st]++; mods[mod] = 1; n["TOTAL", st]++ } \
		END { mods["TOTAL"] = 1; for (m in mods) printf "%-28s %6d %8d %10d %7d %8d %5d\n", m, \
			n[m, "killed"], n[m, "survived"], n[m, "equivalent"], n[m, "timeout"], n[m, "no tests"], \
			n[m, "other"] }' docs/testing.md - | sort
	@echo "survivors: $(MUTMUT) results; one mutant's diff: $(MUTMUT) show NAME"
