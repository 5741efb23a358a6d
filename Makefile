# The two commands: `make run` and `make test`. Both set up the newest supported line this machine
# can install (tools/machine_line.sh: TFX 1.21 / Python 3.13 where glibc >= 2.39, else TFX 1.16 /
# Python 3.10; `make LINE=tfx116 ...` chooses) from its lock first, and say which.
LINE ?= $(shell bash tools/machine_line.sh)
ifeq ($(LINE),tfx121)
VENV := .venv-tfx121
SETUP_SCRIPT := tools/setup_env_tfx121.sh
RESULTS := runs/test-results-tfx121.xml
else ifeq ($(LINE),tfx116)
VENV := .venv
SETUP_SCRIPT := tools/setup_env.sh
RESULTS := runs/test-results.xml
else
$(error LINE is tfx116 or tfx121, got '$(LINE)')
endif
PY := $(VENV)/bin/python
export TF_USE_LEGACY_KERAS := 1
export GRPC_FAIL_FAST := use_caller

.PHONY: setup run test lock lint quick

setup:
	@bash tools/machine_line.sh --why
	@bash $(SETUP_SCRIPT)

run: setup
	$(VENV)/bin/asynctrain run $(ARGS)

# Three pytest workers (the suite waits on subprocesses, Beam and gRPC: on 2 cores two workers
# left a fifth of the CPU idle); an xdist_group's tests stay on one worker (its module fixtures built
# once), and the work goes out in the suite's own start order (tests/conftest.py: slowest files
# first), not xdist's largest-group-first; the 25 slowest listed.
# The JUnit XML feeds tools/reliability_report.py --from-xml (the table of docs/reliability.md).
# The order is random (pytest-randomly; the header prints `Using --randomly-seed=N`); `make test
# SEED=N` replays a run's order.
PYTEST_ARGS ?= -n 3 --dist loadgroup --no-loadscope-reorder --durations=25 --junitxml=$(RESULTS)
SEED ?=
SEED_ARGS := $(if $(SEED),-p randomly --randomly-seed=$(SEED))

test: setup
	$(PY) -m pytest $(PYTEST_ARGS) $(SEED_ARGS)

# The inner loop: lint, then the unit tests (no `e2e` or `integration` marker, no benchmarks).
QUICK_ARGS ?= -n 2 --dist loadgroup --no-loadscope-reorder -m 'not e2e and not integration' --ignore=tests/benchmarks --durations=10

quick: lint
	$(PY) -m pytest $(QUICK_ARGS) $(SEED_ARGS)

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# Re-resolve the 1.16 lock after editing requirements.in.
lock: setup
	$(VENV)/bin/uv pip compile requirements.in -o requirements.lock --python $(PY) --python-version 3.10

# The TFX 1.21 / Python 3.13 line on a machine older than glibc 2.39: inside a Debian 13 root
# (glibc 2.41) that tools/debian_root.sh builds once per machine under ~/.cache/asynctrain, where
# `make` picks that line by itself. The checkout is mounted at the same path inside.
ROOT_RUN := bash tools/debian_root.sh run

.PHONY: setup-tfx121 test-tfx121 lock-tfx121 run-tfx121

setup-tfx121:
	@$(ROOT_RUN) make setup LINE=tfx121

test-tfx121:
	$(ROOT_RUN) make test LINE=tfx121 SEED=$(SEED)

run-tfx121:
	$(ROOT_RUN) make run LINE=tfx121 ARGS='$(ARGS)'

lock-tfx121: setup-tfx121
	$(ROOT_RUN) .venv-tfx121/bin/uv pip compile requirements-tfx121.in -o requirements-tfx121.lock --python .venv-tfx121/bin/python --python-version 3.13
