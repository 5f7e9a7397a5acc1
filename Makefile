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

.PHONY: run test test-second test-third test-browser test-services test-postgresql test-django52 install native \
	pinned-venvs setup bench lint wheel clean

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

# The pinned environments of tests/sdk3 and tests/litellm (tests/pinned_venv.py): each does nothing
# when already made. `make -j setup` makes everything the tests need at once (.ci/run does).
pinned-venvs: $(VENV)/.created
	$(PY) -m tests.sdk3.venv & sdk=$$!; $(PY) -m tests.litellm.venv; litellm=$$?; \
	wait $$sdk && [ $$litellm -eq 0 ]

setup: install pinned-venvs $(VENV_OLD)/.installed

# Migrations quietly: one line says how many were applied (errors still shown), then the banner.
run: $(VENV)/.demo
	@$(PY) manage.py migrate_quietly
	$(PY) manage.py bootstrap_demo --address http://$(HOST):$(PORT)/
	$(PY) -m project.serve --host $(HOST) --port $(PORT) --reload

# Three runs side by side (the machine's two cores; most of a test is waiting on a socket), each
# lane about as long as the others, every test in exactly one of the newest-Django runs, and every
# test that touches Django once more on Django 5.2 LTS and Python 3.11 with the core interpreted:
# - in front, the whole suite on the newest Django, the core compiled, on SQLite, but for
#   the browser and the private services; then the host projects' tests on Django 5.2;
# - test-second (its log printed after): the browser's tests and the wheel's host in Chromium;
# - test-third (its log printed last), on Django 5.2: what touches Django (not the simulator nor
#   the core's own tests, which do not) but the relay's tests, which then run on PostgreSQL, whose
#   write path differs (a thread pool per process, bytes sent as they are; CI must have PostgreSQL);
#   then the tests that start services of their own (the scaled-out cluster, LiteLLM's proxy).
PG_TEST_URL ?= postgres://postgres@127.0.0.1:5432/relay
# Beside the relay: what answers differently on PostgreSQL (U+0000 in text, the search index), and
# the upstream clients' tests that drive the relay.
PG_TOO := tests/web/test_search_indexed.py tests/web/test_search_export.py tests/web/test_nul_inputs.py tests/web/test_fuzz_routes.py \
	tests/web/test_security_login.py \
	tests/upstream/test_body_chunks.py tests/upstream/test_websocket.py tests/upstream/test_websocket_captures.py \
	tests/upstream/test_websocket_drops.py tests/upstream/test_websocket_lanes.py
SECOND_LOG := build/test-second.log
THIRD_LOG := build/test-third.log
test: install $(VENV_OLD)/.installed
	@mkdir -p build; echo "== beside this run: make test-second and make test-third (logs: $(SECOND_LOG), $(THIRD_LOG))"
	@( $(MAKE) --no-print-directory test-second > $(SECOND_LOG) 2>&1; echo $$? > $(SECOND_LOG).rc ) & \
	( $(MAKE) --no-print-directory test-third > $(THIRD_LOG) 2>&1; echo $$? > $(THIRD_LOG).rc ) & \
	$(PY) -m pytest -m "not browser and not services" --basetemp=build/pytest-main $(PYTEST_ARGS); first=$$?; \
	$(MAKE) --no-print-directory test-django52 DJANGO52_PATHS="$(DJANGO52_FRONT)" || first=1; \
	wait; \
	echo "== make test-second, as it ran beside:"; cat $(SECOND_LOG); \
	echo "== make test-third, as it ran beside:"; cat $(THIRD_LOG); \
	second=$$(cat $(SECOND_LOG).rc); third=$$(cat $(THIRD_LOG).rc); rm -f $(SECOND_LOG).rc $(THIRD_LOG).rc; \
	echo "== the suite but browser and services: exit $$first; make test-second: exit $$second;" \
		"make test-third: exit $$third"; \
	[ $$first -eq 0 ] && [ $$second -eq 0 ] && [ $$third -eq 0 ]

# In order, not side by side: each lane is one core's worth of waiting.
test-second:
	@$(MAKE) --no-print-directory test-browser

test-third:
	@$(MAKE) --no-print-directory test-django52 DJANGO52_LEAVE="$(DJANGO52_FRONT)"; a=$$?; $(MAKE) --no-print-directory test-postgresql; b=$$?; \
	$(MAKE) --no-print-directory test-services; c=$$?; \
	echo "== on Django 5.2: exit $$a; on PostgreSQL: exit $$b; the services' tests: exit $$c"; \
	[ $$a -eq 0 ] && [ $$b -eq 0 ] && [ $$c -eq 0 ]

test-browser: install
	@echo "== the browser's tests and the wheel's host, in Chromium"
	$(PY) -m pytest -m browser --basetemp=build/pytest-browser $(PYTEST_ARGS)

test-services: install
	@echo "== the tests that start services of their own: the scaled-out cluster, LiteLLM's proxy"
	$(PY) -m pytest -m "services and not browser" --basetemp=build/pytest-services $(PYTEST_ARGS)

test-postgresql: $(VENV_OLD)/.installed
	@if (command -v pg_isready >/dev/null && pg_isready -q -h 127.0.0.1 -p 5432) || [ "$$CI" = "true" ]; then \
		echo "== the relay's tests, search and the malformed-input walk on PostgreSQL, Django 5.2"; \
		DATABASE_URL=$(PG_TEST_URL) RELAY_COMPILED=false $(VENV_OLD)/bin/python -m pytest \
			--basetemp=build/pytest-postgresql tests/relay $(PG_TOO) $(PYTEST_ARGS); \
	else echo "== PostgreSQL not reachable: the relay's tests ran on SQLite only"; fi

# On the oldest supported Django and Python, with the core interpreted (RELAY_COMPILED=false: the
# first run used the compiled core, and tests/streaming/test_native.py compares the two on every
# fixture), what the PostgreSQL run did not take, but for the browser, the scaled-out cluster, the
# wheel's fresh virtualenv and what runs no Django: the simulator, the streaming core's own tests (on
# Python 3.11 and interpreted it runs under the relay's tests on PostgreSQL), the renderers' timing, bench.
DJANGO52_SKIP := tests/scaled tests/relay tests/simulator tests/benchmarks tests/web/test_markdown_linear.py $(PG_TOO) \
	$(filter-out tests/streaming/test_security_redact.py,$(wildcard tests/streaming/test_*.py))
# In `make test`, this part of it runs in the first lane, after the first run (the lanes' balance).
DJANGO52_FRONT := tests/host
DJANGO52_PATHS ?=
DJANGO52_LEAVE ?=
$(VENV_OLD)/.installed: pyproject.toml
	$(PYTHON_OLD) -m venv --clear $(VENV_OLD)
	$(VENV_OLD)/bin/python -m pip install -q --upgrade pip
	$(VENV_OLD)/bin/python -m pip install -q -e '.[dev]' 'django>=5.2,<6'
	touch $@

test-django52: $(VENV_OLD)/.installed
	@echo "== what touches Django, on $$($(VENV_OLD)/bin/python -c 'import django, sys; print("Django", django.__version__, "on Python", sys.version.split()[0])'), the core interpreted"
	RELAY_COMPILED=false $(VENV_OLD)/bin/python -m pytest -m "not browser and not services and not wheel" \
		--basetemp=build/pytest-django52$(if $(DJANGO52_PATHS),-front) \
		$(addprefix --ignore=,$(DJANGO52_SKIP) $(DJANGO52_LEAVE)) $(DJANGO52_PATHS) $(PYTEST_ARGS)

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
