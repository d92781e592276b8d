# The two commands: `make demo` runs the whole system, `make test` runs the whole test suite.
PYTHON ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: demo test install clean system-deps cluster cluster-stop mutation screenshot

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

# ruff check: the lint rules in pyproject.toml ([tool.ruff]: pyflakes, pycodestyle with lines of at
# most 120 characters, sorted imports), then lint-imports: the import contracts in pyproject.toml
# ([tool.importlinter]), both before the suite. The suite runs in two phases, at the same time, that
# together run every test `pytest` collects:
#   1. every test not marked spark, e2e or browser, on 2 processes (pytest-xdist, `-n 2`) at the lowest
#      CPU priority (`nice -n 19`): CPU-bound Python (fuzzers, the policy benchmark, schemathesis,
#      Django) that takes only the CPU phase 2 leaves idle (its JVM starts, triggers and waits); once
#      phase 2 is done, phase 1 gets the recipe's own niceness back (scripts/renice-tree.py; it needs
#      root, else phase 1 stays at 19), or a busy host's other processes would starve it;
#   2. the spark, e2e and browser tests one at a time (`-n 0`) at normal priority: a Spark test
#      measures batch times, so no other test of its own priority runs beside it; a browser test
#      drives Chromium against a live server.
# Phase 1's output follows phase 2's. `make test` fails at the end and names the phase that failed;
# an interrupt stops both phases.
# JUNIT_DIR=dir (.ci/run sets it): each phase writes its JUnit report, dir/junit-1.xml and dir/junit-2.xml.
SERIAL_TESTS := spark or e2e or browser
junit = $(if $(JUNIT_DIR),--junitxml=$(JUNIT_DIR)/junit-$(1).xml)

test: $(STAMP) system-deps
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports
	@export PYSPARK_PYTHON=$(abspath $(VPY)); failed=""; log1=$$(mktemp); trap 'kill 0' INT TERM; \
	echo "== make test, phase 1 of 2, beside phase 2 at low CPU priority: pytest -n 2 -m 'not ($(SERIAL_TESTS))' (its output follows phase 2's)"; \
	(nice -n 19 $(VPY) -m pytest -n 2 -m "not ($(SERIAL_TESTS))" $(call junit,1) >"$$log1" 2>&1) & phase1=$$!; \
	echo "== make test, phase 2 of 2: pytest -n 0 -m '$(SERIAL_TESTS)'"; \
	$(VPY) -m pytest -n 0 -m "$(SERIAL_TESTS)" $(call junit,2) || failed="phase 2 (exit code $$?)"; \
	$(VPY) scripts/renice-tree.py $$phase1 $$(nice); \
	wait $$phase1; code=$$?; echo "== make test, phase 1 of 2: its output"; cat "$$log1"; rm -f "$$log1"; \
	[ $$code -eq 0 ] || failed="phase 1 (exit code $$code)$${failed:+, $$failed}"; \
	if [ -n "$$failed" ]; then echo "make test failed: $$failed" >&2; exit 1; fi

# The mutation run, a slow job outside `make test` and CI: mutmut over `[tool.mutmut]` (pyproject.toml),
# one mutant at a time, stopped after MUTATION_MINUTES; prints killed / checked per module and package
# and writes the survivors' names to mutants/survivors.txt (scripts/mutation.py). MUTATION_ONLY takes
# mutant globs (MUTATION_ONLY='scaling.values.readiness.*'); a stopped run goes on with those not checked.
MUTATION_MINUTES ?= 40
MUTATION_ONLY ?=
mutation: $(STAMP)
	$(VPY) -m pip install --quiet -e '.[test,mutation]'
	$(VPY) scripts/mutation.py --minutes $(MUTATION_MINUTES) $(MUTATION_ONLY)

# The README's screenshot, docs/job-page.png: the browser test of the job page saves it from the live
# server's page (tests/browser/conftest.py `screenshot`, only with UPDATE_DOCS_SCREENSHOTS=1, so a test run
# leaves the tree clean). Run it after a change to what the job page draws, and commit the picture.
screenshot: $(STAMP) system-deps
	UPDATE_DOCS_SCREENSHOTS=1 $(VPY) -m pytest -q -n 0 -m browser -p no:cacheprovider \
	  "tests/browser/test_dashboard_browser.py::test_job_page_dag_has_one_node_per_vertex_coloured_by_utilization"

clean:
	rm -rf var .pytest_cache mutants
