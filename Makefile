# The commands a person types. Every target bootstraps what it needs itself on a fresh
# machine (bootstrap.py: uv, pip as the fallback, a line per step): `make demo` only the
# demo's dependencies, `make test` the whole development install.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
DEMO_STAMP := $(VENV)/.stamp-demo
DEV_STAMP := $(VENV)/.stamp-dev
# The functions' tests run a second time on the Lambda runtime's Python (infra/bundle.py).
LAMBDA_PYTHON_VERSION := $(shell sed -n 's/^LAMBDA_PYTHON_VERSION = "\(.*\)"$$/\1/p' infra/bundle.py)
LAMBDA_PYTHON ?= python$(LAMBDA_PYTHON_VERSION)
# The synth compiles each asset's bytecode with it (infra/bytecode.py).
export LAMBDA_PYTHON
LAMBDA_VENV := .venv-lambda
LAMBDA_STAMP := $(LAMBDA_VENV)/.stamp-test
BOOTSTRAP_INPUTS := pyproject.toml constraints.txt bootstrap.py

.DEFAULT_GOAL := setup
.PHONY: setup test test-lambda check unit integration coverage lint typecheck pytest demo chaos simulate bench clean build synth deploy cfn-lint
# jsii silences its end-of-life warning only for the node majors listed here.
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 18,20
# A shell that sets PYTHONDONTWRITEBYTECODE makes every run compile every module again
# (pytest's collection alone: 27 s instead of 3 s); the caches are git-ignored.
unexport PYTHONDONTWRITEBYTECODE

$(DEMO_STAMP): $(BOOTSTRAP_INPUTS)
	@$(PYTHON) bootstrap.py --venv $(VENV) --extra local --stamp $@

$(DEV_STAMP): $(BOOTSTRAP_INPUTS)
	@$(PYTHON) bootstrap.py --venv $(VENV) --extra dev --stamp $@

$(LAMBDA_STAMP): $(BOOTSTRAP_INPUTS) infra/bundle.py
	@$(PYTHON) bootstrap.py --venv $(LAMBDA_VENV) --python $(LAMBDA_PYTHON) --extra test --stamp $@

# `make` alone: the development install and the pinned CDK CLI (then `npx cdk ...` works).
setup: $(DEV_STAMP) node_modules/.package-lock.json

# Everything: lint, types, and the whole suite (the e2e tests start local stacks).
# mypy runs after the infra tests in their lane: a fresh clone's first mypy run takes
# over two minutes on one core, which the lane has to spare beside the e2e tests.
test: lint test-lambda
	@$(MAKE) --no-print-directory pytest SIDE_LANE_TYPECHECK=1

# Lint and types only (seconds).
check: lint typecheck

lint: $(DEV_STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: $(DEV_STAMP)
	$(VENV)/bin/mypy

# Each test runs once, on the Python its code runs on. The functions' unit and
# integration tests run on the Lambda runtime's Python (without the CDK; tests/runtime
# asserts the interpreter is that runtime's). The development run takes the rest: the
# declared-dependencies check (it reads the whole install) and the tests of code that
# never ships to Lambda (operator CLI and console, sender, emulators, simulator, bench),
# among them every test file that imports nothing from functions. The functions also
# run on the development Python in the CLI and the local stacks: mypy and ruff check
# them at its version, and the e2e tests run every function there.
DEV_ONLY_TESTS := tests/unit/test_declared_dependencies.py \
	tests/unit/test_bench_history.py tests/unit/test_overhead_pooling.py \
	tests/integration/test_write_meter.py tests/integration/test_cli_errors.py \
	tests/unit/test_fault_injector.py tests/integration/test_front_door.py \
	tests/unit/test_kill_point.py tests/unit/test_memory_dynamodb.py \
	tests/integration/test_memory_dynamodb_parity.py tests/unit/test_model_script.py \
	tests/unit/test_mutate.py tests/integration/test_operator_identity.py \
	tests/unit/test_shown_text.py tests/integration/test_simulated_requests_parity.py \
	tests/integration/test_state_lock.py tests/unit/test_time_window.py \
	tests/unit/test_local_state.py tests/unit/test_sender.py \
	tests/unit/test_loopback_http.py tests/unit/test_cost_model.py \
	tests/integration/test_operator.py tests/integration/test_operator_budget.py \
	tests/integration/test_operator_effects.py tests/integration/test_sender_http.py \
	tests/integration/test_bedrock_emulator.py tests/unit/test_simulate.py \
	tests/integration/test_bench_timing.py tests/unit/test_stream_mapping.py \
	tests/integration/test_burst_lock_share.py

# The infra tests synthesize (every synth bundles the assets itself), some with the
# pinned CDK CLI; the e2e tests start local stacks. Each lane runs one test at a time,
# the two side by side (they share no folder but the pip cache, which each synth fills
# through a staging folder of its own); the infra lane's report follows the other's.
# Under `make test` the infra lane then runs mypy (SIDE_LANE_TYPECHECK).
# (Two plain runs: xdist's loadgroup ignores groups under pytest 9.2, xdist #1386.)
# The rest runs on every core.
LAMBDA_DIRS := tests/runtime tests/unit tests/integration
PARALLEL_DIRS := tests/simulation tests/adversarial tests/vectors
PARALLEL_TESTS := $(DEV_ONLY_TESTS) $(PARALLEL_DIRS)
INFRA_LANE_LOG := build/pytest-infra.log
pytest: $(DEV_STAMP) node_modules/.package-lock.json
	$(VENV)/bin/pytest -n auto $(PARALLEL_TESTS)
	@mkdir -p build
	@echo "==> tests/infra$(if $(SIDE_LANE_TYPECHECK), then mypy,) beside the rest, its report in $(INFRA_LANE_LOG) (printed after)"
	@{ $(VENV)/bin/pytest tests/infra; status=$$?; \
	$(if $(SIDE_LANE_TYPECHECK),$(VENV)/bin/mypy || status=1;) exit $$status; } >$(INFRA_LANE_LOG) 2>&1 & infra=$$!; \
	$(VENV)/bin/pytest $(addprefix --ignore=,$(LAMBDA_DIRS) $(PARALLEL_DIRS) tests/infra); rest=$$?; \
	wait $$infra; infra_status=$$?; \
	echo "==> tests/infra$(if $(SIDE_LANE_TYPECHECK), and mypy,) (exit $$infra_status)"; cat $(INFRA_LANE_LOG); \
	test $$rest -eq 0 && test $$infra_status -eq 0

LAMBDA_TESTS := $(LAMBDA_DIRS) $(addprefix --ignore=,$(DEV_ONLY_TESTS))
test-lambda: $(LAMBDA_STAMP)
	$(LAMBDA_VENV)/bin/pytest -p no:cacheprovider -q -n auto $(LAMBDA_TESTS)

# The inner loop, seconds: the unit tests only (fakes, no sockets, no asset build), on
# every core (pytest-xdist).
unit: $(DEV_STAMP)
	$(VENV)/bin/pytest -q -n auto tests/unit

# The suite without the e2e tests (which start local stacks).
integration: $(DEV_STAMP) build
	$(VENV)/bin/pytest -m "not e2e"

# The same under coverage (config in pyproject.toml); prints the report and the total.
coverage: $(DEV_STAMP) build
	$(VENV)/bin/pytest -m "not e2e" --cov --cov-report=term

# Every shared vector through the handler (a table), then the whole pipeline's scenario.
demo: $(DEMO_STAMP)
	@echo "==> every signed test vector through the receiver handler"
	$(PY) -m local.vector_demo
	@echo "==> the whole pipeline on a local stack"
	$(VENV)/bin/relaylink-receiver demo

# Fault injection against the local stack (docs/reliability.md): a few minutes.
CHAOS_ARGS ?= --deliveries 500 --kills 5 --seed 1
chaos: $(DEMO_STAMP)
	$(VENV)/bin/relaylink-receiver chaos $(CHAOS_ARGS)

# The deterministic simulator (docs/simulation.md): the acceptance's seeds, 2,000 of
# each shipped workflow on both cores (minutes); exit 1 with each violating seed and its
# shrunk schedule. Then its mutation check: each planted bug must be found by 2,000
# seeds of its workflow, but the one it is known to miss: the decision record's own
# once-condition (the decision's transaction also needs the item parked for it, so no
# simulated history can show it missing); docs/simulation.md, the mutation table.
# The long soak (hours): make simulate SIMULATE_ARGS='--seeds 100000 --processes 2'
SIMULATE_ARGS ?= --seeds 2000 --processes 2
MUTATION_ARGS ?= --seeds 2000 --processes 2 --known-missed $(KNOWN_MISSED)
KNOWN_MISSED ?= decision_not_once
simulate: $(DEV_STAMP)
	$(VENV)/bin/relaylink-receiver simulate $(SIMULATE_ARGS)
	$(VENV)/bin/relaylink-receiver simulate --mutations $(MUTATION_ARGS)

# Performance and cost, measured side by side in one run (budget: under 10 minutes
# on 2 cores): writes docs/benchmarks.md, docs/benchmarks.json and docs/cost.md.
bench: $(DEV_STAMP)
	$(PY) -m bench

# The Lambda assets every synth bundles (arm64 / Python $(LAMBDA_PYTHON_VERSION) wheels, cached in
# build/deps/; no Docker), written to build/assets/ to inspect; deploy needs no build.
build: $(DEV_STAMP)
	$(PY) -m infra.bundle

node_modules/.package-lock.json: package.json package-lock.json
	@echo "==> installing the pinned CDK CLI (npm ci)"
	npm ci --no-audit --no-fund --loglevel=error

# Writes the templates and the assets (bundled from what is on disk) to cdk.out/
# with the pinned CDK CLI; offline once build/deps/ holds the pip step's wheels.
# Node 22 or 24 (docs/deploy.md); with an older one the app warns in one line and goes on.
# Extra context for both: CDK_ARGS='-c key=value ...' (docs/deploy.md lists the keys).
CDK_ARGS ?=
synth: $(DEV_STAMP) node_modules/.package-lock.json
	npx --no-install cdk synth --quiet --no-notices $(CDK_ARGS)

# Needs AWS credentials for the target account (and `npx cdk bootstrap` once per
# account and region, docs/deploy.md).
deploy: $(DEV_STAMP) node_modules/.package-lock.json
	npx --no-install cdk deploy --no-notices $(CDK_ARGS)

# W3005: CDK itself adds DependsOn on each function's role next to the GetAtt; redundant, harmless.
cfn-lint: synth
	$(VENV)/bin/cfn-lint --ignore-checks W3005 -- cdk.out/*.template.json

clean:
	rm -rf $(VENV) $(LAMBDA_VENV) cdk.out build .pytest_cache .mypy_cache .ruff_cache .coverage
