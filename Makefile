# Two commands on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
HOST   ?= 127.0.0.1
PORT   ?= 8000

.PHONY: run test install bench lint clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

install: $(VENV)/.installed

run: install
	$(PY) manage.py migrate --noinput
	$(PY) manage.py bootstrap_demo --address http://$(HOST):$(PORT)/
	$(PY) manage.py runserver $(HOST):$(PORT)

test: install
	$(PY) -m pytest $(PYTEST_ARGS)

bench: install
	$(PY) -m bench

lint: install
	$(VENV)/bin/ruff check project responses_app tests bench
	$(VENV)/bin/mypy

clean:
	rm -rf $(VENV) db.sqlite3
