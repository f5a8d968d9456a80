# Kiwi: the two commands are `make demo` and `make test`; `make db` brings up the stack alone.
# Every target is idempotent: a second run only confirms what is already in place.

SHELL := /bin/bash
VENV  := .venv
PY    := $(VENV)/bin/python
# The stack's port: KIWI_DB_PORT from the environment or the command line (make demo
# KIWI_DB_PORT=5433), else scripts/stack's default. Exported, so every target's commands
# (the stack, the demo, pytest, the benches) and the kiwi they start use the same one.
ifndef KIWI_DB_PORT
KIWI_DB_PORT := $(shell scripts/stack port)
endif
export KIWI_DB_PORT
# the runner's login (not a superuser), on that port
RUNNER_URL := $(shell KIWI_DB_PORT='$(KIWI_DB_PORT)' scripts/stack runner-url)

.PHONY: deps db reset demo test test-fast bench lint seed baseline stop status clean

## deps: Python (uv, into .venv) and Node (npm) dependencies
deps: $(VENV)/.synced node_modules/.installed

$(VENV)/.synced: pyproject.toml uv.lock
	@command -v uv >/dev/null || python3 -m pip install --quiet --user uv==0.13.9 || python3 -m pip install --quiet --break-system-packages uv==0.13.9
	@PATH="$$HOME/.local/bin:$$PATH" uv sync --frozen --quiet --compile-bytecode
	@touch $@

# `npm install`, not `npm ci`: the registry mirror here serves only this platform's
# build of the Supabase CLI, so the lock cannot list the other platforms' optional
# packages that `npm ci` insists on. Versions are pinned exactly in package.json.
node_modules/.installed: package.json package-lock.json
	@npm install --no-audit --no-fund --loglevel=error
	@touch $@

## db: PostgreSQL 18 + pgvector on 127.0.0.1:$KIWI_DB_PORT with migrations and seed applied
db: deps
	@scripts/stack up

## reset: re-apply migrations and seed now (drops all data)
reset: deps
	@scripts/stack reset

## demo: the registry at work: a chain, a merged plan, a search
demo: db
	@KIWI_DATABASE_URL=$(RUNNER_URL) $(PY) scripts/demo.py

## test: the whole suite (pytest, which runs the pgTAP files through pg_prove); what CI runs. It
## works in a database of its own on the stack (kiwi_test: scripts/stack test-up), never the demo's
test: db
	@$(PY) -m pytest

## test-fast: the tests that need no database and are not slow (tests/_markers.py): no stack,
## an answer in seconds. Bytecode is written even under PYTHONDONTWRITEBYTECODE, so pytest
## keeps the test modules it rewrote (its assertions) instead of rewriting them every run.
test-fast: deps
	@PYTHONDONTWRITEBYTECODE= $(PY) -m pytest -m "not db and not slow" -q

## bench: performance figures, each bench's table written into docs/performance.md (BENCH_ARGS="--only gate"
## runs some and rewrites only theirs); not part of the test suite
bench: db
	@$(PY) bench/all.py $(BENCH_ARGS)

## lint: ruff, mypy (pyproject's [tool.mypy]), and the seed and the baseline migration compiled
## from supabase/seed/ and supabase/schemas/ are current
lint: deps
	@$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check . && $(VENV)/bin/mypy \
		&& $(PY) scripts/build_seed.py --check && $(PY) scripts/build_baseline.py --check

## seed: recompile supabase/seed.sql from supabase/seed/*/
seed: deps
	@$(PY) scripts/build_seed.py

## baseline: recompile the baseline migration from supabase/schemas/*.sql
baseline: deps
	@$(PY) scripts/build_baseline.py

stop:
	@scripts/stack stop

status:
	@scripts/stack status

clean: stop
	rm -rf .kiwi $(VENV) node_modules
