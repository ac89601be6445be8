# The two commands a newcomer needs: `make run` starts the host, `make test` runs every test.
# Both create .venv and install what is missing on a fresh clone (Debian 12, Python 3.11).

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
RUN_STAMP := $(VENV)/.run-installed
TEST_STAMP := $(VENV)/.test-installed
PYTEST_ARGS ?=
# Test workers (pytest-xdist): one per core, at most 4. Each test file stays on one worker
# (its module-scoped host starts once), slow files first (tests/conftest.py); tests marked
# `exclusive` run alone.
TEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 2); [ "$$n" -gt 4 ] && n=4; echo $$n)

.PHONY: run test test-fast lint format clean system-deps system-deps-test fresh-root-check

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

$(RUN_STAMP): requirements.txt | $(PY)
	$(PY) -m pip install --quiet -r requirements.txt
	touch $@

$(TEST_STAMP): requirements.txt requirements-test.txt | $(PY)
	$(PY) -m pip install --quiet -r requirements-test.txt
	touch $@ $(RUN_STAMP)

# Debian packages the host (and its tests) drive for real: Xvfb for virtual displays, PulseAudio
# for session audio, Chromium and xdotool for tests. Installed only when missing (root or sudo).
system-deps:
	@sh scripts/system-deps.sh run

system-deps-test:
	@sh scripts/system-deps.sh test

run: $(RUN_STAMP) system-deps
	$(PY) manage.py runhost

test: $(TEST_STAMP) system-deps-test
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS)

# Everything but the end-to-end tests that start the real host.
test-fast: $(TEST_STAMP)
	$(PY) -m pytest -m "not e2e" $(PYTEST_ARGS)

lint: $(TEST_STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(VENV)/bin/lint-imports --no-cache
	$(PY) scripts/check_layers.py
	HOST_STATE_DIR="$$(mktemp -d)" $(PY) manage.py makemigrations --check --dry-run

# `make test` from a clean clone of HEAD inside a throw-away Debian 12 root (root, debootstrap):
# proves the README's test command installs everything it needs on a newcomer's machine.
fresh-root-check:
	bash scripts/fresh-root-check.sh test

format: $(TEST_STAMP)
	$(PY) -m ruff format .
	$(PY) -m ruff check --fix .

clean:
	rm -rf $(VENV)
