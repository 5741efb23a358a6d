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
