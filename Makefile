# Two commands on a fresh machine: `make run` and `make test`.
# The newest Python 3.12+ found gets Django 6.x; with only 3.11, Django 5.2 LTS.
PYTHON ?= $(shell for p in python3.12 $$HOME/.pyenv/versions/3.12*/bin/python3 python3.13 \
	$$HOME/.pyenv/versions/3.13*/bin/python3 python3; do \
	$$p -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null && { echo $$p; break; }; done)
# The second run, on the older supported Django (5.2 LTS) and Python (3.11).
PYTHON_OLD ?= $(shell for p in python3.11 $$HOME/.pyenv/versions/3.11*/bin/python3 $(PYTHON); do \
	$$p -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' 2>/dev/null && { echo $$p; break; }; done)
VENV    := .venv
PY      := $(VENV)/bin/python
VENV_OLD := .venv-django52
HOST    ?= 127.0.0.1
PORT    ?= 8000

.PHONY: run test test-second test-postgresql test-django52 install native bench lint wheel clean

$(VENV)/.created:
	$(PYTHON) -m venv --clear $(VENV)
	$(PY) -m pip install -q --upgrade pip
	touch $@

# The demo's packages only: `make run` compiles nothing optional and installs no test tools first.
$(VENV)/.demo: pyproject.toml $(VENV)/.created
	$(PY) -m pip install -q -e '.[demo]'
	touch $@

$(VENV)/.installed: pyproject.toml $(VENV)/.created
	$(PY) -m pip install -q -e '.[dev]'
	touch $(VENV)/.demo $@

install: $(VENV)/.installed native

# The core's and the delivery's modules compiled with mypyc into build/native (responses_app/native.py):
# a second when up to date, a minute otherwise. Without a C compiler they run interpreted; CI insists.
native: $(VENV)/.installed
	@$(PY) -m responses_app.native_build $(if $(filter true,$(CI)),--strict)

run: $(VENV)/.demo
	$(PY) manage.py migrate --noinput
	$(PY) manage.py bootstrap_demo --address http://$(HOST):$(PORT)/
	$(PY) -m project.serve --host $(HOST) --port $(PORT) --reload

# Two runs side by side (the machine's two cores; most of a test is waiting on a socket):
# - in front, the whole suite on the newest Django, the core compiled, on SQLite;
# - behind it (test-second, its log printed after), the fast suite on Django 5.2 LTS and Python
#   3.11 with the core interpreted, then the relay's tests on PostgreSQL, whose write path differs
#   (a thread pool per process, bytes sent as they are). CI must have PostgreSQL.
PG_TEST_URL ?= postgres://postgres@127.0.0.1:5432/relay
# Beside the relay: what answers differently on PostgreSQL (U+0000 in text, the search index), and
# the upstream clients' tests that drive the relay.
PG_TOO := tests/web/test_search_indexed.py tests/web/test_nul_inputs.py tests/web/test_fuzz_routes.py \
	tests/upstream/test_body_chunks.py tests/upstream/test_websocket.py tests/upstream/test_websocket_captures.py \
	tests/upstream/test_websocket_drops.py tests/upstream/test_websocket_lanes.py
SECOND_LOG := build/test-second.log
test: install $(VENV_OLD)/.installed
	@mkdir -p build; echo "== beside this run: make test-second (its log: $(SECOND_LOG))"
	@( $(MAKE) --no-print-directory test-second > $(SECOND_LOG) 2>&1; echo $$? > $(SECOND_LOG).rc ) & \
	$(PY) -m pytest $(PYTEST_ARGS); first=$$?; wait; \
	echo "== make test-second, as it ran beside:"; cat $(SECOND_LOG); \
	second=$$(cat $(SECOND_LOG).rc); rm -f $(SECOND_LOG).rc; \
	echo "== the whole suite: exit $$first; make test-second: exit $$second"; \
	[ $$first -eq 0 ] && [ $$second -eq 0 ]

test-second: test-django52 test-postgresql

test-postgresql: install
	@if (command -v pg_isready >/dev/null && pg_isready -q -h 127.0.0.1 -p 5432) || [ "$$CI" = "true" ]; then \
		echo "== the relay's tests, search and the malformed-input walk on PostgreSQL"; \
		DATABASE_URL=$(PG_TEST_URL) $(PY) -m pytest --basetemp=build/pytest-postgresql \
			tests/relay $(PG_TOO) $(PYTEST_ARGS); \
	else echo "== PostgreSQL not reachable: the relay's tests ran on SQLite only"; fi

# Everything but the browser, the scaled-out cluster and the wheel's fresh virtualenv, on the
# oldest supported Django and Python, with the core interpreted (RELAY_COMPILED=false): the first
# run used the compiled core, and tests/streaming/test_native.py compares the two on every fixture.
$(VENV_OLD)/.installed: pyproject.toml
	$(PYTHON_OLD) -m venv --clear $(VENV_OLD)
	$(VENV_OLD)/bin/python -m pip install -q --upgrade pip
	$(VENV_OLD)/bin/python -m pip install -q -e '.[dev]' 'django>=5.2,<6'
	touch $@

test-django52: $(VENV_OLD)/.installed
	@echo "== the fast suite on $$($(VENV_OLD)/bin/python -c 'import django, sys; print("Django", django.__version__, "on Python", sys.version.split()[0])'), the core interpreted"
	RELAY_COMPILED=false $(VENV_OLD)/bin/python -m pytest -m "not browser and not services and not wheel" \
		--basetemp=build/pytest-django52 --ignore=tests/scaled $(PYTEST_ARGS)

bench: install
	$(PY) -m bench core

lint: install
	$(VENV)/bin/ruff check project responses_app tests bench
	$(VENV)/bin/mypy
	$(PY) manage.py makemigrations --check --dry-run

wheel: install
	$(PY) -m build --wheel --outdir dist .

clean:
	rm -rf $(VENV) $(VENV_OLD) db.sqlite3 build/native dist
