# The README's two commands: `make demo` and `make test`. Both set up everything they need.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# torch 2.13.0 is the CPU wheel available on this kind of machine; GPU users: see README.
TORCH_SPEC ?= torch==2.13.0
export PIP_DISABLE_PIP_VERSION_CHECK=1

.PHONY: demo test test-fast lint fuzz setup setup-test browser nsys clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip wheel

$(VENV)/.setup-core: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q "$(TORCH_SPEC)"
	$(BIN)/python -m pip install -q -e ".[all,examples]"
	touch $@

# the demo's step 4 (the 2-rank CPU DeepSpeed example); without it the demo report leaves step 4 out with a note
$(VENV)/.setup-deepspeed: $(VENV)/.setup-core
	DS_BUILD_OPS=0 $(BIN)/python -m pip install -q "deepspeed>=0.14" || echo "deepspeed not installed: the demo leaves step 4 out"
	touch $@

$(VENV)/.setup-test: pyproject.toml $(VENV)/.setup-core
	$(BIN)/python -m pip install -q -e ".[all,test,examples]"
	DS_BUILD_OPS=0 $(BIN)/python -m pip install -q "deepspeed>=0.14" || echo "deepspeed not installed: its tests will skip"
	touch $@

setup: $(VENV)/.setup-core
setup-test: $(VENV)/.setup-test

browser:
	@command -v chromium >/dev/null 2>&1 || (apt-get update -qq && apt-get install -y -qq chromium >/dev/null) || echo "chromium not installed: browser tests will skip"

nsys: $(VENV)/.setup-core
	$(BIN)/python -m nbprof.capture.nsys_fetch || echo "nsys not obtained: nsys tests will skip"

# the workflow's whole loop (nbprof/report_demo.py): before/after the DataLoader fix, the 2-rank DeepSpeed example, the report
demo: setup nsys $(VENV)/.setup-deepspeed
	$(BIN)/python -m nbprof.report_demo --out results --steps 6 --preprocess-ms 5

# static checks first (seconds): ruff over the code, the tests and the notebooks' sources; mypy (strict on
# nbprof/trace and nbprof/analysis, see pyproject); the committed notebooks against notebooks/src
lint: setup-test
	$(BIN)/ruff check nbprof tests scripts benchmarks notebooks/src
	$(BIN)/mypy
	$(BIN)/python scripts/make_notebooks.py --check

# tests/ includes the docstring examples (tests/test_doctests.py) and the layer contract (tests/test_layers.py)
test: lint browser nsys
	$(BIN)/python -m pytest tests
	$(BIN)/python -m pytest --nbval-lax --nbval-sanitize-with notebooks/sanitize.cfg -p no:cacheprovider notebooks

# the fast loop while editing (issue 35): the tests under 10 s (not `slow`) on TEST_JOBS pytest-xdist workers, one
# test file at a time per worker (--dist loadfile: a module's fixtures, e.g. its Chromium, start once); the tests that
# assert bounds on live timings (marker `timing`, tests/_support/timing_guard.py) are left out, since a second worker
# on the cores disturbs them: `make test` runs them, serially
TEST_JOBS ?= 2
test-fast: setup-test
	$(BIN)/python -m pytest tests -m "not slow and not timing" -n $(TEST_JOBS) --dist loadfile

# the long fuzz run (issue 18): ~20,000 cases over every format; failing cases land in fuzz-failures/; the summary
# JSON is rewritten every 250 cases, so a stopped run (Ctrl-C, SIGTERM) continues with `make fuzz FUZZ_RESUME=1`
FUZZ_SEED ?= 0
FUZZ_CASES ?= 20000
FUZZ_JOBS ?= 2
FUZZ_RESUME ?=
fuzz: setup-test
	$(BIN)/python -m tests.fuzz --seed $(FUZZ_SEED) --cases $(FUZZ_CASES) --jobs $(FUZZ_JOBS) --timeout 5 \
		--analyses-rate 1 --html-rate 0.02 --out fuzz-failures --json fuzz-failures/summary-seed$(FUZZ_SEED).json \
		$(if $(FUZZ_RESUME),--resume fuzz-failures/summary-seed$(FUZZ_SEED).json)

clean:
	rm -rf $(VENV) results
