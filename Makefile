# brokerjepsen: make setup, make test, make test-scenario SCENARIO=<id>
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
SCENARIO ?= baseline
COMMA := ,

.PHONY: setup test test-nightly test-unit test-cluster test-scenario claims chaos kafka-image heal lint format reference docs-figures docs bench bench-lazyfs bench-clients bench-evidence bench-runs clean

setup:
	@bash scripts/setup.sh

# The fast tier, CI's gate on every change (tests/tiers.py): unit, checker and real-cluster
# tests and one end-to-end smoke on each system's default line (Kafka 3.9, RabbitMQ 3.10); it says
# its wall time at the end, after its slowest tests (up to 25 over 20 s: what to move as it nears its budget).
test:
	$(PY) -m pytest --tier fast --record-durations --durations=25 --durations-min=20

# The nightly tier (.ci/nightly): every other end-to-end test, the claims matrix on the default
# lines (CLAIMS_MINUTES, default 240) and chaos for HOURS (default 1); writes
# results/nightly/<time>/summary.md and junit.xml.
test-nightly:
	@bash .ci/nightly

# Pure Python: neither Java, Docker nor root (the markers are in pyproject.toml).
test-unit:
	$(PY) -m pytest -m unit

test-cluster:
	$(PY) -m pytest -m cluster

# One scenario end to end; exit 0 when the verdict matches the claim the scenario tests.
# Kafka scenarios: MODE=zk|kraft|kraft-dedicated picks the mode (default: the scenario's first),
# KAFKA=4.4 (or any line or release from 3.7, e.g. 4.3.1: built on first use) the Kafka release
# (default 3.9; 4.x has no zk mode); RABBITMQ=4.0|4.3|3.10 the RabbitMQ release. Several lines
# (KAFKA=3.9,4.1,4.4 or RABBITMQ=3.10,4.0,4.3) run once each and print one table of verdicts
# (harness compare). CONFIG="broker=server.properties producer=p.properties": a team's own files.
# make turns every failing recipe into its own exit 2, so the harness's code is printed first.
test-scenario:
	@$(VENV)/bin/harness $(if $(findstring $(COMMA),$(KAFKA)$(RABBITMQ)),compare,run) $(SCENARIO) \
	  $(if $(MODE),--mode $(MODE)) $(if $(KAFKA),--kafka $(KAFKA)) \
	  $(if $(RABBITMQ),--rabbitmq $(RABBITMQ)) $(foreach c,$(CONFIG),--config $(c)); \
	  code=$$?; bash scripts/exit-meaning.sh harness $$code; exit $$code

# The local Kafka image from a release tarball (KAFKA_TARBALL=... or compose/images/kafka-dist/).
kafka-image:
	@bash compose/images/build_kafka_image.sh

# The nightly claims matrix (not part of make test): every claim scenario x mode x release line
# on the default lines, the oldest and newest make setup builds (Kafka 3.9 and 4.4, RabbitMQ 3.10
# and 4.3), RUNS times (loss rows: 3), resumable; CLAIMS=K1,K4 MODES=kraft KAFKA=4.1 filter (a line
# between the default ones runs only when named; KAFKA takes RabbitMQ lines too: KAFKA=4.0).
# Writes docs/claims-results.md (and .json, the measured cells).
claims:
	$(VENV)/bin/harness claims --runs $(or $(RUNS),1) $(if $(CLAIMS),--claims $(CLAIMS)) \
	  $(if $(MODES),--modes $(MODES)) $(if $(KAFKA),--kafka $(KAFKA)) $(if $(AGAIN),--again)

# Nightly chaos: generated fault schedules over the base matrix for HOURS (default 1), each
# violation shrunk to scenarios/found/; writes results/chaos/<date>/summary.md and junit.xml.
# One run of one base: harness chaos chaos/kafka-safe --seed N (--dry-run prints the schedule).
chaos:
	$(VENV)/bin/harness nightly --hours $(or $(HOURS),1) $(if $(BASES),--bases $(BASES)) \
	  $(if $(MINUTES),--minutes $(MINUTES))

# Heal every fault and remove every cluster a killed run left behind.
heal:
	$(VENV)/bin/harness heal

lint:
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy contract faults systems nemesis compose lazyfs checkers reports chaos harness workloads bench

# The documentation as a site in site/ (strict: a broken link or a page left out fails).
docs:
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict -q -d site

# The scenario JSON Schema and the reference in docs/, generated from the code (a test fails
# while either is stale).
reference:
	$(PY) -m harness.cli schema --out docs/scenario.schema.json --reference docs/reference

# The figures the pages quote (release lines, images, CI time from docs/figures.yaml, the table of
# shipped scenarios), written between their markers (a test fails while a page is stale).
docs-figures:
	$(PY) -m harness.figures

format:
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

# Checker speed and memory on synthetic histories of growing size (figures, not assertions).
bench:
	$(PY) -m bench.checker

# What recording costs: our producers against the bare confluent-kafka and pika clients on real
# clusters (messages/s, CPU); BENCH_MESSAGES (default 100k), BENCH_ROUNDS (default 3).
bench-clients:
	$(PY) -m bench.clients

# What keeping the brokers' evidence costs the runs under RESULTS (default results/): seconds
# before teardown and MiB in the run folder, per run and per system, beside the targets.
bench-evidence:
	$(PY) -m bench.evidence

# How much of a campaign's wall time its fault schedules get: K4 and T1 (both clients) on Kafka
# 4.4, BENCH_RUNS times each (default 3), one at a time and then pipelined (efficiency, where
# each run's time went, every verdict). Real clusters, about 45 minutes at the default.
bench-runs:
	$(PY) -m bench.runs

# What the power-loss filesystem costs against the plain directory under it (MB/s, as root).
bench-lazyfs:
	$(PY) -m bench.disks

clean:
	rm -rf .pytest_cache .ruff_cache .mypy_cache .hypothesis
