# The two quick-start commands are `make demo` and `make test`; the rest are conveniences.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
# `make demo PORT=8123` serves on another port; the demo data and its links follow it.
PORT ?= 8000
DEMO_ENV := PORTAL_DEMO=true PORT=$(PORT) PORTAL_BASE_URL=http://127.0.0.1:$(PORT) \
	PORTAL_IN_PROCESS_SCHEDULER=true PORTAL_SYNTHETIC_METRICS=true

.PHONY: demo test bench lint format venv clean messages

venv: $(VENV)/.installed

# Find Python 3.12+, create the virtual environment, install the tested versions.
$(VENV)/.installed: pyproject.toml constraints.txt
	@py=""; \
	for candidate in python3.14 python3.13 python3.12 python3; do \
	  if command -v $$candidate >/dev/null 2>&1 && \
	     $$candidate -c 'import sys; sys.exit(sys.version_info < (3, 12))' >/dev/null 2>&1; then \
	    py=$$candidate; break; \
	  fi; \
	done; \
	if [ -z "$$py" ]; then \
	  echo "error: Python 3.12 or newer is needed and none was found on PATH." >&2; \
	  echo "       Install it (Debian 13: apt-get install python3 python3-venv; elsewhere: pyenv install 3.12) and run make again." >&2; \
	  exit 1; \
	fi; \
	if [ ! -x $(PY) ]; then \
	  echo "Creating $(VENV) with $$($$py --version)"; \
	  $$py -m venv $(VENV) || { echo "error: '$$py -m venv' failed; install the venv module (Debian: apt-get install python3-venv)." >&2; exit 1; }; \
	fi
	$(PY) -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(PY) -m pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[dev]'
	@touch $@

# 1. Run the portal on the embedded defaults: SQLite, tasks and periodic tasks in-process,
#    cluster dry-run, demo data; served by gunicorn (deploy/demo/gunicorn.conf.py) on 127.0.0.1:PORT
#    (8000 unless given: `make demo PORT=8123`), with PORTAL_DEMO on and DEBUG off.
demo: venv messages
	$(DEMO_ENV) $(PY) manage.py migrate --noinput
	$(DEMO_ENV) $(PY) manage.py demo_data
	$(DEMO_ENV) $(PY) -m gunicorn --config deploy/demo/gunicorn.conf.py

# The translation catalogs: locale/<lang>/LC_MESSAGES/django.po compiled to the .mo files Django
# reads. The .mo files are build output (not committed); GNU gettext's msgfmt compiles them.
messages: venv
	@if command -v msgfmt >/dev/null 2>&1; then \
	  $(DEMO_ENV) $(PY) manage.py compilemessages -l zh_Hans -i .venv -i var -i node_modules; \
	else \
	  echo "warning: msgfmt not found, so the pages are in English only." >&2; \
	  echo "         Install GNU gettext (Debian: apt-get install gettext) and run make again." >&2; \
	fi

# 2. Install what is missing, start throwaway PostgreSQL, Redis and Prometheus, run ruff, mypy
#    the translation check (every marked string translated), compile the catalogs, run the whole
#    pytest suite, stop the services. ARGS are passed to pytest (`--no-lint` and
#    `--no-i18n-check` skip checks while developing).
test: venv
	$(PY) -m tests.harness $(ARGS)

# Benchmarks (tests/bench/bench_*.py) on the same throwaway services; results in var/bench/.
bench: venv
	$(PY) -m tests.harness --no-lint tests/bench -o python_files='bench_*.py' \
	  -o python_functions='bench_*' -p no:cacheprovider -q $(ARGS)

lint: venv
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	DEBUG=true $(PY) -m mypy .

format: venv
	$(PY) -m ruff format .
	$(PY) -m ruff check --fix .

clean:
	rm -rf $(VENV) var .mypy_cache .ruff_cache .pytest_cache
	find locale -name '*.mo' -delete
