# The two commands: `make run` and `make test`. Both set up .venv from the lock first.
VENV := .venv
PY := $(VENV)/bin/python
export TF_USE_LEGACY_KERAS := 1
export GRPC_FAIL_FAST := use_caller

.PHONY: setup run test lock lint

setup:
	@bash tools/setup_env.sh

run: setup
	$(VENV)/bin/asynctrain run $(ARGS)

# Three pytest workers (the suite waits on subprocesses, Beam and gRPC: on 2 cores two workers
# left a fifth of the CPU idle); an xdist_group's tests stay on one worker; the 25 slowest listed.
# The JUnit XML feeds tools/reliability_report.py --from-xml (the README's reliability table).
PYTEST_ARGS ?= -n 3 --dist loadgroup --durations=25 --junitxml=runs/test-results.xml

test: setup
	$(PY) -m pytest $(PYTEST_ARGS)

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# Re-resolve the lock after editing requirements.in.
lock: setup
	$(VENV)/bin/uv pip compile requirements.in -o requirements.lock --python $(PY) --python-version 3.10
