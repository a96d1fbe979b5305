# The commands a person types. Every target bootstraps .venv itself on a fresh machine.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: test check unit coverage lint typecheck pytest demo chaos bench clean build synth cfn-lint
# jsii silences its end-of-life warning only for the node majors listed here.
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 18,20

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c constraints.txt -e '.[dev]'
	touch $(STAMP)

# Everything: lint, types, and the whole suite (the e2e tests start local stacks).
test: check pytest

# Lint and types only (seconds).
check: lint typecheck

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: $(STAMP)
	$(VENV)/bin/mypy

# The infra tests synthesize, and every synth bundles the assets itself.
pytest: $(STAMP)
	$(VENV)/bin/pytest

# The inner loop: the suite without the e2e tests.
unit: $(STAMP) build
	$(VENV)/bin/pytest -m "not e2e"

# The same under coverage (config in pyproject.toml); prints the report and the total.
coverage: $(STAMP) build
	$(VENV)/bin/pytest -m "not e2e" --cov --cov-report=term

# Every shared vector through the handler (a table), then the whole pipeline's scenario.
demo: $(STAMP)
	$(PY) -m local.vector_demo
	$(VENV)/bin/relaylink-receiver demo

# Fault injection against the local stack (docs/reliability.md): a few minutes.
CHAOS_ARGS ?= --deliveries 500 --kills 5 --seed 1
chaos: $(STAMP)
	$(VENV)/bin/relaylink-receiver chaos $(CHAOS_ARGS)

# Performance and cost, measured side by side in one run (budget: under 5 minutes
# on 2 cores): writes docs/benchmarks.md, docs/benchmarks.json and docs/cost.md.
bench: $(STAMP)
	$(PY) -m bench

# The Lambda assets every synth bundles (arm64 / Python 3.14 wheels, cached in
# build/deps/; no Docker), written to build/assets/ to inspect; deploy needs no build.
build: $(STAMP)
	$(PY) -m infra.bundle

node_modules/.package-lock.json: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error

# Writes the templates and the assets (bundled from what is on disk) to cdk.out/
# with the pinned CDK CLI; offline once build/deps/ holds the pip step's wheels.
synth: $(STAMP) node_modules/.package-lock.json
	npx --no-install cdk synth --quiet --no-notices

# W3005: CDK itself adds DependsOn on each function's role next to the GetAtt; redundant, harmless.
cfn-lint: synth
	$(VENV)/bin/cfn-lint --ignore-checks W3005 -- cdk.out/*.template.json

clean:
	rm -rf $(VENV) cdk.out build .pytest_cache .mypy_cache .ruff_cache .coverage
