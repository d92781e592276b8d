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

# lint-imports: the import contracts in pyproject.toml ([tool.importlinter]) before the suite.
test: $(STAMP) system-deps
	$(VENV)/bin/lint-imports
	PYSPARK_PYTHON=$(abspath $(VPY)) $(VPY) -m pytest

clean:
	rm -rf var .pytest_cache
