# The two commands: `make run` and `make test`. Both set up .venv from the lock first.
VENV := .venv
PY := $(VENV)/bin/python
export TF_USE_LEGACY_KERAS := 1
export GRPC_FAIL_FAST := use_caller

.PHONY: setup run test lock lint quick

setup:
	@bash tools/setup_env.sh

run: setup
	$(VENV)/bin/asynctrain run $(ARGS)

# Three pytest workers (the suite waits on subprocesses, Beam and gRPC: on 2 cores two workers
# left a fifth of the CPU idle); an xdist_group's tests stay on one worker; the 25 slowest listed.
# The JUnit XML feeds tools/reliability_report.py --from-xml (the table of docs/reliability.md).
# The order is random (pytest-randomly; the header prints `Using --randomly-seed=N`); `make test
# SEED=N` replays a run's order.
PYTEST_ARGS ?= -n 3 --dist loadgroup --durations=25 --junitxml=runs/test-results.xml
SEED ?=
SEED_ARGS := $(if $(SEED),-p randomly --randomly-seed=$(SEED))

test: setup
	$(PY) -m pytest $(PYTEST_ARGS) $(SEED_ARGS)

# The inner loop: lint, then the unit tests (no `e2e` or `integration` marker, no benchmarks).
QUICK_ARGS ?= -n 2 --dist loadgroup -m 'not e2e and not integration' --ignore=tests/benchmarks --durations=10

quick: lint
	$(PY) -m pytest $(QUICK_ARGS) $(SEED_ARGS)

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# Re-resolve the lock after editing requirements.in.
lock: setup
	$(VENV)/bin/uv pip compile requirements.in -o requirements.lock --python $(PY) --python-version 3.10

# The TFX 1.21 / Python 3.13 line (issue 46), inside a Debian 13 root (glibc 2.41: TFX 1.21's ML
# Metadata and TFDV need 2.39) that tools/debian_root.sh builds once per machine under
# ~/.cache/asynctrain. The checkout is mounted at the same path inside; the venv is .venv-tfx121.
ROOT_RUN := bash tools/debian_root.sh run
VENV_TFX121 := .venv-tfx121
TFX121_ENV := env TF_USE_LEGACY_KERAS=1 GRPC_FAIL_FAST=use_caller
TEST_TFX121_ARGS ?= -n 3 --dist loadgroup --durations=25 --junitxml=runs/test-results-tfx121.xml

.PHONY: setup-tfx121 test-tfx121 lock-tfx121 run-tfx121

setup-tfx121:
	@$(ROOT_RUN) bash tools/setup_env_tfx121.sh

test-tfx121: setup-tfx121
	$(ROOT_RUN) $(TFX121_ENV) $(VENV_TFX121)/bin/python -m pytest $(TEST_TFX121_ARGS) $(SEED_ARGS)

run-tfx121: setup-tfx121
	$(ROOT_RUN) $(TFX121_ENV) $(VENV_TFX121)/bin/asynctrain run $(ARGS)

lock-tfx121: setup-tfx121
	$(ROOT_RUN) $(VENV_TFX121)/bin/uv pip compile requirements-tfx121.in -o requirements-tfx121.lock --python $(VENV_TFX121)/bin/python --python-version 3.13
