# RaftConnect. `make demo` and `make test` install what they need first (`make setup`).
PYTHON ?= python3
# Every target here runs development nodes (demo, tests, benchmarks): a fixed, insecure Django secret key is
# allowed (webapp/settings.py). A deployment never sets this and must set RAFTCONNECT_SECRET_KEY.
export RAFTCONNECT_DEVELOPMENT ?= 1
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: setup demo test test-fast bench scale soak chaos stress fuzz cluster clean

setup: $(STAMP) frontend chromium

$(STAMP): requirements.txt requirements-test.txt pyproject.toml plugins/raftconnect-redis-store/pyproject.toml
	@command -v java >/dev/null || { echo "Java 17+ is required by Spark (install a JDK)"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements-test.txt
	# the project with its [db2] extra (IBM's driver, ~130 MB: tests map db2:// store URLs onto it);
	# everything else it needs is already pinned by the requirements files
	$(PY) -m pip install -q -e '.[db2]'
	$(PY) -m pip install -q --no-deps -e plugins/raftconnect-redis-store
	touch $(STAMP)

.PHONY: frontend frontend-test chromium

# The browser console (frontend/): npm ci from the committed lock file, then vite build into webapp/console/dist
# (package data: the wheel carries it, and its build backend refuses to build without it), which every node
# serves at /console/. Rebuilt when its sources change.
FRONTEND_DEPS := frontend/node_modules/.ci-installed
FRONTEND_SRC := $(shell find frontend/src -type f 2>/dev/null) frontend/index.html frontend/vite.config.ts frontend/tsconfig.json

CONSOLE_DIST := webapp/console/dist

frontend: $(CONSOLE_DIST)/index.html

$(FRONTEND_DEPS): frontend/package.json frontend/package-lock.json
	@command -v npm >/dev/null || { echo "Node.js 20.19+ with npm is required to build the console"; exit 1; }
	cd frontend && npm ci --no-audit --no-fund
	touch $@

$(CONSOLE_DIST)/index.html: $(FRONTEND_DEPS) $(FRONTEND_SRC)
	cd frontend && npm run build

# the console's component tests (vitest), part of `make test`
frontend-test: $(FRONTEND_DEPS)
	cd frontend && npm test

# The console's end-to-end tests drive Debian's chromium through Playwright (no browser download).
chromium:
	@command -v chromium >/dev/null || { SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
		$$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq chromium; }

demo: setup
	$(PY) manage.py demo

# The suite runs in TEST_WORKERS pytest-xdist processes, each taking whole test files (--dist loadfile:
# a file's module fixtures - a broker, a cluster, a Spark session - are built once). Most of a test's time
# is waiting on processes it started (elections, Spark, nodes), so more workers than cores still shorten
# the run: on a 2-core machine (2026-12-02, same host, back to back) -n 2 took 12 min 9 s, -n 3 9 min 36 s.
TEST_WORKERS ?= 3
PYTEST_PARALLEL := -n $(TEST_WORKERS) --dist loadfile

test: setup frontend-test
	$(PY) -m pytest -ra --durations=15 $(PYTEST_PARALLEL) -m "not chaos"

test-fast: setup frontend-test
	$(PY) -m pytest -ra $(PYTEST_PARALLEL) -m "not integration and not chaos"

# schema fuzzing of a live node with many more examples per operation than `make test` (5)
fuzz: setup
	RAFTCONNECT_FUZZ_EXAMPLES=$${RAFTCONNECT_FUZZ_EXAMPLES:-200} $(PY) -m pytest -q -p no:cacheprovider tests/connect/test_openapi_fuzz.py

cluster: setup
	$(PY) manage.py cluster

bench: setup
	$(PY) benchmarks/pipeline/run.py --runs 3
	$(PY) benchmarks/latency/run.py
	$(PY) benchmarks/density/run.py
	$(PY) benchmarks/cluster/run.py
	$(PY) benchmarks/cluster/rest_mix.py
	$(PY) benchmarks/cluster/rest_threads.py
	$(PY) benchmarks/cluster/rest_floor.py
	$(PY) benchmarks/stores/run.py
	$(PY) benchmarks/stores/group_commit.py
	$(PY) benchmarks/stores/rest_reads.py
	$(PY) benchmarks/rest/run.py
	$(PY) benchmarks/transforms/run.py
	$(PY) benchmarks/jdbc/run.py

# The control plane at scale: 3 Raft members plus simulated workers on the real signed protocol
# (benchmarks/scale/run.py; issue 16's full scale by default: 10,000 connectors, 100,000 tasks, 100 workers,
# which takes long on a small machine). Not part of `make bench`. SCALE_ARGS e.g.
# "--connectors 500 --workers 20".
SCALE_ARGS ?=
scale: setup
	$(PY) benchmarks/scale/run.py $(SCALE_ARGS)

# 30 minutes of a running pipeline plus connector churn; RSS and threads sampled (benchmarks/soak/run.py).
# SOAK_ARGS e.g. "--minutes 60 --churn-seconds 2".
SOAK_ARGS ?=
soak: setup
	$(PY) benchmarks/soak/run.py $(SOAK_ARGS)

# Fault campaign: randomized kill -9 / SIGSTOP / network partitions, clock jumps, slow and full disks, damaged
# journals and snapshots on one cluster (benchmarks/chaos/run.py). Partitions need root and iproute2 (network
# namespaces), full disks root and mount (tmpfs); without them those faults are skipped.
# CHAOS_ARGS e.g. "--iterations 100 --minutes 30 --seed 7". It first runs the fault tests marked `chaos`
# (left out of `make test`), then repeats the leader partition test
# CHAOS_PARTITION_RUNS times.
CHAOS_ARGS ?=
CHAOS_PARTITION_RUNS ?= 10
chaos: setup
	@command -v ip >/dev/null || [ "$$(id -u)" != 0 ] || { apt-get update -qq && apt-get install -y -qq iproute2; } || true
	$(PY) -m pytest -ra -p no:cacheprovider -m chaos
	@for i in $$(seq 1 $(CHAOS_PARTITION_RUNS)); do echo "partition test, run $$i of $(CHAOS_PARTITION_RUNS)"; \
		$(PY) -m pytest -q -p no:cacheprovider tests/integration/test_partition.py || exit 1; done
	$(PY) benchmarks/chaos/run.py $(CHAOS_ARGS)

# make test's pytest run STRESS_RUNS times in a row while stress-ng keeps every core busy; each run is a row
# of benchmarks/stress/RESULTS.md (issue 19: a suite that never flakes)
STRESS_RUNS ?= 3
stress: setup
	@command -v stress-ng >/dev/null || { SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
		$$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq stress-ng; }
	$(PY) benchmarks/stress/run.py --runs $(STRESS_RUNS) --workers $(TEST_WORKERS)

clean:
	rm -rf var .pytest_cache $(CONSOLE_DIST)
