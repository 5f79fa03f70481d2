# RaftConnect. `make demo` and `make test` install what they need first (`make setup`).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: setup demo test test-fast bench chaos cluster clean

setup: $(STAMP)

$(STAMP): requirements.txt pyproject.toml plugins/raftconnect-redis-store/pyproject.toml
	@command -v java >/dev/null || { echo "Java 17+ is required by Spark (install a JDK)"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt
	$(PY) -m pip install -q --no-deps -e .
	$(PY) -m pip install -q --no-deps -e plugins/raftconnect-redis-store
	touch $(STAMP)

demo: setup
	$(PY) manage.py demo

test: setup
	$(PY) -m pytest -ra

test-fast: setup
	$(PY) -m pytest -ra -m "not integration"

cluster: setup
	$(PY) manage.py cluster

bench: setup
	$(PY) benchmarks/pipeline/run.py
	$(PY) benchmarks/cluster/run.py
	$(PY) benchmarks/stores/run.py
	$(PY) benchmarks/jdbc/run.py

clean:
	rm -rf var .pytest_cache
