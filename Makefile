# lakehouse — build, demo, test, bench. `make demo` and `make test` work on a fresh machine.
SHELL := /bin/bash
.DEFAULT_GOAL := release

VENV        ?= .venv
PY          := $(VENV)/bin/python
DUCKDB      := $(VENV)/bin/duckdb
CARGO_TARGET_DIR ?= target
export CARGO_TARGET_DIR
EXT_VERSION := v$(shell sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
DEMO_DIR    ?= demo/events_lakehouse

.PHONY: release debug install deploy repository size configure test_debug test_release venv spark servers zamboni demo test test-unit test-sql test-integration test-versions bench chaos fuzz clean

$(VENV)/.installed: test/requirements.txt
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r test/requirements.txt
	touch $@

venv: $(VENV)/.installed

# Apache Spark, the reference engine the conformance tests and benchmarks compare with: PySpark
# from PyPI into the venv, Iceberg's Spark runtime (and sqlite-jdbc) from Maven Central into
# ~/.cache/lakehouse/jars (LAKEHOUSE_JAR_CACHE), once; Java 17+ must be installed.
$(VENV)/.spark-installed: test/requirements-spark.txt $(VENV)/.installed
	$(PY) -m pip install --quiet -r test/requirements-spark.txt
	touch $@

spark: $(VENV)/.spark-installed
	scripts/spark_jars.sh >/dev/null

# The servers the object-storage tests start on loopback: versitygw (an S3-compatible gateway,
# built once from the Go module proxy, ~2 minutes), Apache Iceberg's REST catalog fixture
# (resolved once from Maven Central, ~25 s), Azurite (Azure Storage's emulator, from npm,
# ~20 s) and fake-gcs-server (GCS's emulator, from the Go module proxy, ~1.5 min), all cached
# under ~/.cache/lakehouse. moto (AWS) comes with test/requirements.txt.
servers:
	scripts/s3_server.sh all >/dev/null
	scripts/rest_catalog.sh >/dev/null
	scripts/azurite.sh >/dev/null
	scripts/fake_gcs.sh >/dev/null

# iceberg-zamboni, the nearest peer, for the benchmarks only: an environment of its own (it pins
# pyiceberg-core<0.11 and pulls DuckDB 2.x).
.venv-zamboni/.installed: bench/requirements-zamboni.txt
	python3 -m venv .venv-zamboni
	.venv-zamboni/bin/python -m pip install --quiet --upgrade pip
	.venv-zamboni/bin/python -m pip install --quiet -r bench/requirements-zamboni.txt
	touch $@

zamboni: .venv-zamboni/.installed

# Spark 4.0.0 for bench/bench_delta_purge.py (Delta 4.0.0's REORG fails under Spark 4.0.1; see the file).
.venv-spark400/.installed: bench/requirements-spark400.txt test/requirements.txt
	python3 -m venv .venv-spark400
	.venv-spark400/bin/python -m pip install --quiet --upgrade pip
	.venv-spark400/bin/python -m pip install --quiet -r bench/requirements-spark400.txt
	touch $@

# The debug build (the tests') has the test hooks (a pause before commit); release builds never do.
build/%/lakehouse.duckdb_extension: FORCE
	cargo build $(if $(filter release,$*),--release,--features test-hooks) --lib
	mkdir -p build/$*
	python3 scripts/append_extension_metadata.py \
	  $(CARGO_TARGET_DIR)/$(if $(filter release,$*),release,debug)/liblakehouse.so $@ \
	  --extension-version $(EXT_VERSION)

release: build/release/lakehouse.duckdb_extension
debug: build/debug/lakehouse.duckdb_extension

# What the release binary weighs, stripped and gzipped, and which crates make it up
# (scripts/binary_size.py) → bench/results/binary_size.md.
size: venv release
	{ echo "# The release binary's size (\`make size\`)"; echo; \
	  $(PY) scripts/binary_size.py $(CARGO_TARGET_DIR)/release/liblakehouse.so; } > bench/results/binary_size.md
	cat bench/results/binary_size.md

# The targets DuckDB's community-extension CI drives (extension-ci-tools' c_api_extensions
# makefiles for Rust: configure, debug, release, test_debug, test_release), with the variables it
# reads. The stable C API only: one binary for every DuckDB from 1.3 on (description.yml).
EXTENSION_NAME        := lakehouse
USE_UNSTABLE_C_API    := 0
TARGET_DUCKDB_VERSION := v1.2.0
configure: venv
	$(PY) -c "import duckdb; print(duckdb.connect().execute('PRAGMA platform').fetchone()[0])" > build_platform.txt
	@echo "platform: $$(cat build_platform.txt)"
test_debug: venv debug
	LAKEHOUSE_EXTENSION=build/debug/lakehouse.duckdb_extension $(PY) test/sqllogictest.py
test_release: venv release
	LAKEHOUSE_EXTENSION=build/release/lakehouse.duckdb_extension $(PY) test/sqllogictest.py

# Install by name: after `make install`, `LOAD lakehouse;` works in the DuckDB CLI of .venv
# (`duckdb -unsigned`) and in its Python duckdb (with allow_unsigned_extensions); DuckDB copies the
# file into its extension directory (~/.duckdb/extensions/v<version>/<platform>/). For another
# DuckDB, run its `INSTALL '<path>/build/release/lakehouse.duckdb_extension'` once.
install: venv release
	$(VENV)/bin/duckdb -unsigned -c "INSTALL '$(CURDIR)/build/release/lakehouse.duckdb_extension'"
	$(PY) -c "import duckdb; duckdb.connect(config={'allow_unsigned_extensions': 'true'}).execute(\"INSTALL '$(CURDIR)/build/release/lakehouse.duckdb_extension'\")"
	@echo "installed: $(VENV)/bin/duckdb -unsigned -c 'LOAD lakehouse; SELECT * FROM lakehouse_demo(\"/tmp/demo\")'"

# The scheduled and event-driven gates on this machine (docs/scheduling.md): the DuckDB binary,
# the extension, the SQL and the systemd units under /opt/lakehouse, the run history in
# /var/lib/lakehouse/history (scripts/deploy.sh; PREFIX, STATE, CONF, LOGS, OWNER override).
deploy: venv release
	EXTENSION=build/release/lakehouse.duckdb_extension VENV=$(VENV) scripts/deploy.sh

# A local extension repository (build/repository/v<duckdb>/<platform>/lakehouse.duckdb_extension)
# for every supported DuckDB release: `INSTALL lakehouse FROM '<path>/build/repository'` in any of
# them (scripts/extension_repository.py; checked in the version matrix).
repository: venv release
	$(PY) scripts/extension_repository.py build/release/lakehouse.duckdb_extension build/repository

# Writes the demo table, profiles it (files and metadata), plans the gate (dry run), runs it —
# compaction of the degraded partitions, snapshot expiry, measured scan speedup, scorecard — and
# profiles again, in the DuckDB CLI. The demo's files are KiB-sized (scale 0.001), so the
# reference 64 MiB threshold and 128 MiB target are scaled the same way. With SLACK_WEBHOOK_URL
# set, the scorecard is posted to Slack too.
DEMO_SCALED := small_file_threshold_mb := 0.064, target_file_size_mb := 0.128
demo: venv release
	rm -rf $(DEMO_DIR)
	$(DUCKDB) -unsigned -c "LOAD 'build/release/lakehouse.duckdb_extension'; \
	  SELECT data_files, snapshots, record_count, small_file_threshold_mb FROM lakehouse_demo('$(DEMO_DIR)'); \
	  SELECT partition, total_files, small_files, round(total_size_mb, 3) AS total_size_mb, \
	         round(avg_file_size_mb, 4) AS avg_file_size_mb, round(fragmentation_ratio, 4) AS fragmentation_ratio, \
	         requires_compaction, file_sizes \
	  FROM lakehouse_fragmentation('$(DEMO_DIR)', small_file_threshold_mb := 0.064, fragmentation_ratio_threshold := 0.35); \
	  SELECT * EXCLUDE (compactable_bytes) \
	  FROM lakehouse_fragmentation_summary('$(DEMO_DIR)', $(DEMO_SCALED)); \
	  SELECT snapshots, snapshots_past_retention, expirable_snapshots, manifests, metadata_files, orphan_files, reason \
	  FROM lakehouse_metadata_health('$(DEMO_DIR)'); \
	  SELECT partition, verdict, reason, files_before, files_after \
	  FROM lakehouse_gate('$(DEMO_DIR)', $(DEMO_SCALED), dry_run := true); \
	  SELECT partition, verdict, files_before AS files, files_after AS after, small_files_before AS small, \
	         small_files_after AS small_after, round(mb_consolidated, 3) AS mb, action \
	  FROM lakehouse_gate('$(DEMO_DIR)', $(DEMO_SCALED), history_table := 'lakehouse_runs'); \
	  SELECT status, partitions_compacted AS compacted, small_files_eliminated AS eliminated, \
	         measured_speedup, projected_speedup_low, projected_speedup_high, \
	         snapshots_expired, files_deleted, notification \
	  FROM lakehouse_runs LIMIT 1; \
	  SELECT partition, total_files, small_files, round(fragmentation_ratio, 4) AS fragmentation_ratio, requires_compaction, \
	         file_sizes \
	  FROM lakehouse_fragmentation('$(DEMO_DIR)', small_file_threshold_mb := 0.064);"

TEST_EXT ?= build/debug/lakehouse.duckdb_extension

test: venv debug test-unit test-sql test-integration test-versions

test-unit:
	python3 scripts/module_graph.py --check
	cargo test --lib

test-sql: venv debug
	LAKEHOUSE_EXTENSION=$(TEST_EXT) $(PY) test/sqllogictest.py

test-integration: venv spark servers debug
	LAKEHOUSE_EXTENSION=$(TEST_EXT) $(PY) -m pytest -q test/integration

# The version matrix: every SQL function on each DuckDB release line that loads the binary, one
# virtual environment each (pyiceberg is the reader there: DuckDB's iceberg extension is not on
# PyPI for every version). 1.5 runs in the main environment, where the whole suite runs too.
DUCKDB_VERSIONS ?= 1.3.2 1.4.5 2.0.1
VERSION_VENVS   ?= .venv-duckdb

$(VERSION_VENVS)/%/.installed: test/requirements-versions.txt
	python3 -m venv $(VERSION_VENVS)/$*
	$(VERSION_VENVS)/$*/bin/python -m pip install --quiet --upgrade pip
	$(VERSION_VENVS)/$*/bin/python -m pip install --quiet -r test/requirements-versions.txt duckdb==$*
	touch $@

test-versions: venv debug $(foreach v,$(DUCKDB_VERSIONS),$(VERSION_VENVS)/$(v)/.installed)
	LAKEHOUSE_EXTENSION=$(TEST_EXT) $(PY) -m pytest -q test/versions
	set -e; for v in $(DUCKDB_VERSIONS); do \
	  echo "DuckDB $$v:"; \
	  LAKEHOUSE_EXPECT_DUCKDB=$$v LAKEHOUSE_EXTENSION=$(TEST_EXT) $(VERSION_VENVS)/$$v/bin/python -m pytest -q test/versions; \
	done

# Benchmarks (not tests): each compares us with the peers on the same data in one run and writes
# bench/results/*.md. The compaction one needs ~4 GB of scratch space under /tmp and ~10 minutes;
# the expiry one ~4 GB (a 2,000-snapshot table, its pristine copy and a working copy); the object
# storage one ~2 minutes the first time (20,000 objects on a local S3 server, kept in /tmp); the
# 20,000-snapshot expiry ~2.5 minutes to build (40,001 metadata files); the memory-limited
# compaction ~25 GB and ~25 minutes (10 GiB of Parquet, built once); zamboni's ~1.6 GB.
bench: venv spark servers release .venv-zamboni/.installed .venv-spark400/.installed
	LAKEHOUSE_EXTENSION=build/release/lakehouse.duckdb_extension $(PY) bench/bench_profile.py
	LAKEHOUSE_EXTENSION=build/release/lakehouse.duckdb_extension $(PY) bench/bench_compact.py --repeat 2
	LAKEHOUSE_EXTENSION=build/release/lakehouse.duckdb_extension $(PY) bench/bench_compact.py --methods lakehouse,floor --repeat 10 --output bench/results/compact_floor.md
	LAKEHOUSE_EXTENSION=build/release/lakehouse.duckdb_extension $(PY) bench/bench_stitch.py --repeat 10
	LAKEHOUSE_EXTENSION=build/release/lakehouse.duckdb_extension $(PY) bench/bench_gate_scale.py
	LAKEHOUSE_EXTENSION=build/release/lakehouse.duckdb_extension $(PY) bench/bench_expire.py
	LAKEHOUSE_EXTENSION=build/release/lakehouse.duckdb_extension $(PY) bench/bench_object_storage.py
	LAKEHOUSE_EXTENSION=build/release/lakehouse.duckdb_extension $(PY) bench/bench_serve.py
	LAKEHOUSE_EXTENSION=build/release/lakehouse.duckdb_extension $(PY) bench/bench_merge_on_read.py
	LAKEHOUSE_EXTENSION=build/release/lakehouse.duckdb_extension $(PY) bench/bench_iceberg_v3.py
	LAKEHOUSE_PYSPARK_VERSION=4.0.0 LAKEHOUSE_EXTENSION=build/release/lakehouse.duckdb_extension .venv-spark400/bin/python bench/bench_delta_purge.py
	LAKEHOUSE_EXTENSION=build/release/lakehouse.duckdb_extension $(PY) bench/bench_gate.py --repeat 5
	LAKEHOUSE_EXTENSION=build/release/lakehouse.duckdb_extension $(PY) bench/bench_profile_scale.py
	LAKEHOUSE_EXTENSION=build/release/lakehouse.duckdb_extension $(PY) bench/bench_expire.py --history merged
	LAKEHOUSE_EXTENSION=build/release/lakehouse.duckdb_extension $(PY) bench/bench_compact_memory.py --repeat 2
	LAKEHOUSE_EXTENSION=build/release/lakehouse.duckdb_extension $(PY) bench/bench_zamboni.py
	LAKEHOUSE_EXTENSION=build/release/lakehouse.duckdb_extension $(PY) bench/bench_layout.py

# The chaos harness (test/chaos/harness.py): four runs of CHAOS_SECONDS each (Iceberg written by
# pyiceberg; Iceberg v2 written by pyiceberg and Spark — merge-on-read deletes in Parquet, Avro or
# ORC, rollbacks, set-current, cherry-picks — and read by Spark; the same upgraded to v3 mid-run,
# Spark writing deletion vectors and row lineage; Delta written and RESTOREd by deltalake) on a
# random seed (or CHAOS_SEED); each run's summary is appended to bench/results/chaos.jsonl and
# bench/results/chaos.md is made from that file. A failure prints its seed, the invariant it
# broke and how to replay it. `make test` runs a seeded 50 s of each (test/integration/test_chaos.py).
# Then the gate on a busy table, partial progress off and on, BUSY_RUNS runs per format
# (test/chaos/busy.py) → bench/results/partial_progress.md.
CHAOS_SECONDS ?= 600
BUSY_RUNS ?= 5
CHAOS_RUN = LAKEHOUSE_EXTENSION=$(TEST_EXT) $(PY) test/chaos/harness.py --seconds $(CHAOS_SECONDS) \
  $(if $(CHAOS_SEED),--seed $(CHAOS_SEED)) --json bench/results/chaos.jsonl
chaos: venv spark debug
	status=0; \
	$(CHAOS_RUN) --format iceberg || status=1; \
	$(CHAOS_RUN) --format iceberg --spark || status=1; \
	$(CHAOS_RUN) --format iceberg --spark --upgrade || status=1; \
	$(CHAOS_RUN) --format delta || status=1; \
	$(PY) test/chaos/report.py bench/results/chaos.jsonl > bench/results/chaos.md; \
	rm -f bench/results/partial_progress.jsonl; \
	for format in iceberg delta; do for every in 2.0 0.5; do \
	  LAKEHOUSE_EXTENSION=$(TEST_EXT) $(PY) test/chaos/busy.py --format $$format --runs $(BUSY_RUNS) \
	    --delete-every $$every --jsonl bench/results/partial_progress.jsonl || status=1; \
	done; done; \
	$(PY) test/chaos/busy_report.py bench/results/partial_progress.jsonl > bench/results/partial_progress.md; \
	exit $$status

# The fuzzer of the readers of foreign bytes (src/fuzz.rs: manifest lists and manifests, lean and
# iceberg-rust's, table metadata, Delta commits, webhook bodies) for FUZZ_SECONDS per target;
# executions and distinct outcomes per target go to bench/results/fuzz.md. `make test` runs 3,000
# executions per target (cargo test --lib).
FUZZ_SECONDS ?= 120
fuzz:
	set -o pipefail; LAKEHOUSE_FUZZ_SECONDS=$(FUZZ_SECONDS) cargo test --features test-hooks --lib \
	  fuzz::tests::fuzz_every_reader_of_foreign_bytes -- --nocapture | tee /tmp/lakehouse-fuzz.log; \
	status=$$?; { echo "# Fuzzing (\`make fuzz\`, $(FUZZ_SECONDS) s per target, $$(nproc) cores, $$(date -u +%F))"; echo; \
	  echo "| target | executions | distinct outcomes |"; echo "|---|---|---|"; \
	  sed -n 's/^fuzz target \(.*\): \([0-9]*\) executions, \([0-9]*\) distinct outcomes/| \1 | \2 | \3 |/p' \
	  /tmp/lakehouse-fuzz.log; } > bench/results/fuzz.md; exit $$status

clean:
	rm -rf build demo build_platform.txt

FORCE:
