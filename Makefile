# Two commands on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
HOST   ?= 127.0.0.1
PORT   ?= 8000

.PHONY: run test install native bench lint clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

install: $(VENV)/.installed native

# The core's and the delivery's modules compiled with mypyc into build/native (responses_app/native.py):
# a second when up to date, a minute otherwise. Without a C compiler they run interpreted; CI insists.
native: $(VENV)/.installed
	@$(PY) -m responses_app.native_build $(if $(filter true,$(CI)),--strict)

run: install
	$(PY) manage.py migrate --noinput
	$(PY) manage.py bootstrap_demo --address http://$(HOST):$(PORT)/
	$(PY) -m project.serve --host $(HOST) --port $(PORT) --reload

# The relay's tests run twice: on SQLite (the default) and on PostgreSQL, whose write path
# differs (a thread pool per process, bytes sent as they are). CI must have PostgreSQL.
PG_TEST_URL ?= postgres://postgres@127.0.0.1:5432/relay
test: install
	$(PY) -m pytest $(PYTEST_ARGS)
	@echo "== the core's tests again, interpreted (RELAY_COMPILED=false; the run above used build/native when current)"
	RELAY_COMPILED=false $(PY) -m pytest tests/streaming tests/test_native.py $(PYTEST_ARGS)
	@if (command -v pg_isready >/dev/null && pg_isready -q -h 127.0.0.1 -p 5432) || [ "$$CI" = "true" ]; then \
		echo "== the relay's tests again, on PostgreSQL"; \
		DATABASE_URL=$(PG_TEST_URL) $(PY) -m pytest tests/relay $(PYTEST_ARGS); \
	else echo "== PostgreSQL not reachable: the relay's tests ran on SQLite only"; fi

bench: install
	$(PY) -m bench core

lint: install
	$(VENV)/bin/ruff check project responses_app tests bench
	$(VENV)/bin/mypy
	$(PY) manage.py makemigrations --check --dry-run

clean:
	rm -rf $(VENV) db.sqlite3 build/native
