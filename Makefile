# Thin targets; the work lives in scripts and the Python packages.
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
HASH    = $(shell sha256sum pyproject.toml | cut -c1-12)
RUNTIME = $(VENV)/.runtime-$(HASH)
STAMP   = $(VENV)/.installed-$(HASH)
PYTEST_ARGS ?=
PORT   ?= 9092
DATA   ?= ./rillet-data

.PHONY: venv venv-run run test unit integration e2e bench bench-compare \
	clean sim chaos fuzz system-packages bench-cluster bench-compare-cluster bench-move bench-scale \
	isr-scale demo demo-down kind-up kind-down kind-memory-load

# pip shows its progress: a cold install of the test extras downloads ~600 MB.
$(BIN)/pip:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --upgrade pip

# The broker's own dependencies only: what `make run` needs.
$(RUNTIME): pyproject.toml | $(BIN)/pip
	$(BIN)/pip install -e .
	rm -f $(VENV)/.runtime-*
	touch $@

# Everything, test extras included (clients, Spark: pyspark alone is ~470 MB).
$(STAMP): $(RUNTIME)
	$(BIN)/pip install -e '.[test]'
	rm -f $(VENV)/.installed-*
	touch $@

venv-run: $(RUNTIME)

venv: $(STAMP)

# Single-node broker on 127.0.0.1:$(PORT), data in $(DATA): make run PORT=9093 DATA=./d
run: venv-run
	$(BIN)/rillet serve --set listeners=PLAINTEXT://127.0.0.1:$(PORT) --set log.dirs=$(DATA)

# Debian packages the tests use beyond the venv, pinned: libfaketime for the clock faults
# (tests/clock_faults.py; without it those tests skip, saying so). Installed once, as root.
FAKETIME_PKG = libfaketime=0.9.10-2.1
# The failing disk of tests/faulty_fs.py is a FUSE file system (mfusepy needs libfuse3 and
# fusermount3); without them the disk I/O-error tests would skip.
FUSE_PKGS = fuse3=3.14.0-4 libfuse3-3=3.14.0-4
system-packages:
	@ls /usr/lib/*/faketime/libfaketime.so.1 >/dev/null 2>&1 || { \
	  echo "installing $(FAKETIME_PKG) (apt)"; \
	  DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(FAKETIME_PKG); }
	@command -v fusermount3 >/dev/null 2>&1 && ls /usr/lib/*/libfuse3.so.3 >/dev/null 2>&1 || { \
	  echo "installing $(FUSE_PKGS) (apt)"; \
	  DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(FUSE_PKGS) || \
	  echo "fuse3 not installed: the disk I/O-error tests will say they skip"; }

# The whole suite: unit, integration (real brokers, real clients) and e2e.
test: venv system-packages
	$(BIN)/python -m pytest -q -ra --durations=25 $(PYTEST_ARGS) tests e2e

unit: venv
	$(BIN)/python -m pytest -q tests/unit

integration: venv system-packages
	$(BIN)/python -m pytest -q tests/integration

# End-to-end: the kind cluster of e2e/kind.sh (brought up and taken down by the suite), or the
# cluster $KUBECONFIG names.
e2e: venv
	$(BIN)/python -m pytest -q -ra $(PYTEST_ARGS) e2e

# kind on this machine (e2e/README.md, "kind"): the cluster, then the memory must-show: one
# broker under a 512Mi limit through a 5-minute produce+consume load; prints its peak RSS.
kind-up:
	e2e/kind.sh up

kind-down:
	e2e/kind.sh down

kind-memory-load: venv
	KUBECONFIG=$$(e2e/kind.sh kubeconfig) RILLET_MEMORY_LOAD_S=$${RILLET_MEMORY_LOAD_S:-300} \
		$(BIN)/python -m pytest -q -s -ra e2e/test_kubelet.py -k 512mi

# The whole mission on this machine, stage by stage (kind with the chart installed, Cluster,
# Topic, producer, the Spark operator and the job as a SparkApplication, scaling and a roll under
# load, the output table); the cluster stays up afterwards (make demo-down). DEMO_ARGS e.g. "--events-seconds 120" or "--no-scaling".
DEMO_ARGS ?=
demo: venv
	$(BIN)/python e2e/demo.py up $(DEMO_ARGS)

demo-down: venv
	$(BIN)/python e2e/demo.py down

bench: venv
	$(BIN)/python bench/produce_consume.py

# Long runs of what the suite runs briefly: the Raft simulation (20x the seeds), and the
# chaos tests (CHAOS_CYCLES fault cycles each, at most CHAOS_SECONDS): the metadata quorum
# under faults, and acks=all producers and consumers under faults with the loss checker
# (every link between nodes, data links too, and wall clock steps where libfaketime is
# installed); a transactional ETL while the coordinator's and partition leaders' nodes are
# killed -9, checked exactly once with read_committed; each prints the faults it injected per type.
CHAOS_CYCLES ?= 100
CHAOS_SECONDS ?= 900
# Protocol fuzz (issue 31): FUZZ_FRAMES mutated client and controller frames against a single
# node and a 3-node cluster, at most FUZZ_SECONDS; a crash or hang fails it and keeps the batch
# in ./fuzz-failures. The suite runs the same campaign with RILLET_FUZZ_FRAMES (20,000).
FUZZ_FRAMES ?= 1000000
FUZZ_SECONDS ?= 3600
fuzz: venv
	$(BIN)/python -m tests.fuzz.campaign --frames $(FUZZ_FRAMES) --seconds $(FUZZ_SECONDS)

sim: venv
	RILLET_SIM_SCALE=20 $(BIN)/python -m pytest -q --timeout 3600 tests/unit/raft/test_sim.py

chaos: venv system-packages
	RILLET_CHAOS_CYCLES=$(CHAOS_CYCLES) RILLET_CHAOS_SECONDS=$(CHAOS_SECONDS) \
		$(BIN)/python -m pytest -q -s tests/integration/test_quorum_chaos.py \
		tests/integration/test_replication.py tests/integration/test_txn_chaos.py -k chaos

# Three rillet nodes beside three Kafka nodes: RF=3, min.insync.replicas=2, acks=all (~15 min).
bench-compare-cluster: venv
	$(BIN)/python bench/compare_cluster.py $(BENCH_ARGS)

# Issue 25's test alone: 3 nodes, 2,000 partitions RF=3 (the default; ~3.5 min), a node killed -9
# and restarted under an acks=all producer to every partition: make isr-scale ISR_SCALE_PARTITIONS=300
ISR_SCALE_PARTITIONS ?= 2000
isr-scale: venv
	RILLET_ISR_SCALE_PARTITIONS=$(ISR_SCALE_PARTITIONS) $(BIN)/python -m pytest -q -s \
		tests/integration/test_isr_scale.py $(PYTEST_ARGS)

# Many partitions on three nodes, rillet beside Kafka (bench/scale.py): create, Metadata size and
# latency, kill -9 failover and ISR recovery, heartbeat lateness, peak RSS per node; fresh clusters
# per count. The full list takes hours on 2 cores; SCALE_PARTITIONS=1000 is the quick run (~5 min).
SCALE_PARTITIONS ?= 1000,5000,10000
bench-scale: venv
	$(BIN)/python bench/scale.py --partitions $(SCALE_PARTITIONS) $(BENCH_ARGS)

# Start-up and controller failover times of a local three-node cluster (20 kill -9 rounds).
bench-cluster: venv
	$(BIN)/python bench/cluster_failover.py --runs 20

# rillet beside Apache Kafka 4.3.1 (Maven Central jars), same Java perf tools, one table (~5 min/round).
BENCH_ARGS ?=
bench-compare: venv
	$(BIN)/python bench/compare.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) rillet-data

.PHONY: spark-demo
# Sample events into a local rillet, the Spark job over them (local mode), the resulting table.
spark-demo: venv
	spark/demo

# 1 GiB of partition data moved between brokers by kafka-reassign-partitions, unthrottled and
# throttled, with an acks=all producer's latency before and during each move (~10 min).
bench-move: venv
	$(BIN)/python bench/reassign_move.py $(BENCH_ARGS)
