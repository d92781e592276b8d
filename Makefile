# The two commands: `make demo` runs the whole system, `make test` runs the whole test suite.
PYTHON ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: demo test install clean system-deps cluster cluster-stop

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Python 3.11+ is needed"'
	@command -v java >/dev/null || { echo "Java 17 is needed by PySpark 4: install openjdk-17-jre-headless"; exit 1; }
	test -x $(VPY) || $(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install --quiet --upgrade pip
	$(VPY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	PYSPARK_PYTHON=$(abspath $(VPY)) $(VPY) -m sparkclient.demo

# A local Spark standalone master and worker (127.0.0.1:7077, UI :8080); `make demo CLUSTER=standalone`
# runs the demo pipeline on it (and starts it when it is not running).
cluster: $(STAMP)
	$(VPY) -m sparkclient.demo.cluster start --workdir var/cluster

cluster-stop:
	$(VPY) -m sparkclient.demo.cluster stop --workdir var/cluster

system-deps:
	bash scripts/system-deps.sh

# lint-imports: the import contracts in pyproject.toml ([tool.importlinter]) before the suite. The suite
# runs in two phases that together run every test `pytest` collects:
#   1. every test not marked spark, e2e or browser, on 2 processes (pytest-xdist, `-n 2`): CPU-bound
#      Python (fuzzers, the policy benchmark, schemathesis, Django) that kept one of the 2 cores busy;
#   2. then the spark, e2e and browser tests one at a time (`-n 0`): a Spark test measures batch
#      times, so nothing runs beside it; a browser test drives Chromium against a live server.
# Phase 2 runs even when phase 1 failed (one pytest run went on past a failure too); `make test`
# then fails at the end and names the phase that failed.
# JUNIT_DIR=dir (.ci/run sets it): each phase writes its JUnit report, dir/junit-1.xml and dir/junit-2.xml.
SERIAL_TESTS := spark or e2e or browser
junit = $(if $(JUNIT_DIR),--junitxml=$(JUNIT_DIR)/junit-$(1).xml)

test: $(STAMP) system-deps
	$(VENV)/bin/lint-imports
	@export PYSPARK_PYTHON=$(abspath $(VPY)); failed=""; \
	echo "== make test, phase 1 of 2: pytest -n 2 -m 'not ($(SERIAL_TESTS))'"; \
	$(VPY) -m pytest -n 2 -m "not ($(SERIAL_TESTS))" $(call junit,1) || failed="phase 1 (exit code $$?)"; \
	echo "== make test, phase 2 of 2: pytest -n 0 -m '$(SERIAL_TESTS)'"; \
	$(VPY) -m pytest -n 0 -m "$(SERIAL_TESTS)" $(call junit,2) || failed="$${failed:+$$failed, }phase 2 (exit code $$?)"; \
	if [ -n "$$failed" ]; then echo "make test failed: $$failed" >&2; exit 1; fi

clean:
	rm -rf var .pytest_cache
