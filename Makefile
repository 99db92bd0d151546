# capblock: the two commands are `make demo` and `make test` (see README.md).
CAPBLOCK_CACHE ?= $(HOME)/.cache/capblock
# Each clone builds outside itself, in a target directory of its own keyed by its path: two
# clones building at once into one directory overwrite each other's path-crate artifacts. The
# first build of a new clone starts from a copy of the newest target directory in the cache
# (infra/target-dir.sh), so the dependencies are reused.
CLONE_KEY := $(notdir $(CURDIR))-$(firstword $(shell printf '%s' '$(CURDIR)' | cksum))
CARGO_TARGET_DIR ?= $(CAPBLOCK_CACHE)/target-$(CLONE_KEY)
# The local stack `make test` starts and stops (its own state folder per clone, so a developer's
# stack and parallel clones never share one).
TEST_STATE ?= $(CAPBLOCK_CACHE)/test-stack-$(CLONE_KEY)
export CARGO_TARGET_DIR CAPBLOCK_CACHE

.PHONY: test-page demo test verify soak test-future test-py-future test-long check toolchain lint-rust lint-infra test-rust test-sim-boto3 test-resource-groups test-events test-template package bench mutants audit install help

help:
	@echo "make demo      run the main job locally: simulated market + emulated AWS, end to end"
	@echo "make test      every check and test (what CI runs), today and with the date 400 days ahead"
	@echo "make test-future  only the tests with the machine's date 400 days ahead (libfaketime)"
	@echo "make test-long the integration tests with more fault-injection rounds (CAPBLOCK_LONG=1)"
	@echo "make test-page the team page in headless Chromium (installs Debian's chromium)"
	@echo "make check     the quick checks, no local stack: format, clippy, layers, template lint"
	@echo "make verify    the purchase protocol model-checked deeper than make test does (minutes)"
	@echo "make install   build and install the operator CLI, capblock (INSTALL_ROOT=DIR: into DIR/bin)"
	@echo "make package   build the Lambda deployment zips (ARCH=arm64|x86_64)"
	@echo "make audit     cargo-audit on Cargo.lock: make audit ADVISORY_DB=/path/to/advisory-db"
	@echo "make mutants   cargo-mutants on the core's money modules (docs/tests.md, \"Mutation testing\")"

# The toolchain rust-toolchain.toml pins, made available offline (infra/toolchain.sh); every
# target that runs cargo depends on it.
toolchain:
	@bash infra/toolchain.sh
	@bash infra/target-dir.sh "$(CARGO_TARGET_DIR)"

demo: toolchain
	bash infra/demo.sh

# Everything CI runs. The local stack is started and stopped by the command itself, in a state
# folder of its own so it never touches a stack a developer has running.
test: lint-rust lint-infra test-rust test-sim-boto3 test-resource-groups test-events test-template test-page test-py-future
	@echo "make test: all checks passed"

# The core crate (domain, ports, workflows) must not reach the AWS SDK or the Lambda runtime,
# even through a dev-dependency: the adapters are capblock-shared's.
lint-rust: toolchain
	cargo fmt --all --check
	cargo clippy --workspace --all-targets -- -D warnings
	@if cargo tree -p capblock-core -e normal,build,dev --prefix none | grep -E '^(aws-|lambda_runtime )'; then \
	  echo "capblock-core depends on the AWS SDK or the Lambda runtime (the crates above)"; exit 1; fi
	@echo "capblock-core: no AWS SDK crate in its dependency tree (cargo tree)"
	bash infra/lint/unused-deps.sh

# The quick checks before a commit, with no local stack and no tests run (make test runs them all).
check: lint-rust lint-infra test-template

# shellcheck on infra/**/*.sh, ruff (ruff.toml) on infra/**/*.py; pinned in infra/lint/requirements.txt.
lint-infra:
	bash infra/lint/check.sh

# One build with the test targets' features: `--bins` alone would build the AWS SDK crates
# without the dev-dependencies' features (aws-smithy-mocks, test-util), and `cargo test` would
# build them all a second time. The integration tests run the binaries this builds. Then every
# test twice at once, each run on a local stack of its own: today, and with the machine's date
# 400 days ahead under libfaketime (infra/local/test-days.sh): no test may depend on the day it
# runs; `--no-fail-fast`, so a failure anywhere never skips the proof, which runs last. The
# integration tests wait on the simulated network, not the CPU: TEST_THREADS of them
# at once on 2 cores (measured on the 2-core machine: 320 s at 2, 179 s at 4, 136 s at 8).
TEST_THREADS ?= 8
test-rust: toolchain
	cargo build --workspace --all-targets
	bash infra/local/test-days.sh $(TEST_STATE) $(TEST_THREADS)

# Only the date-ahead half of test-rust, and the Python checks under it (infra/local/future.sh).
test-future: toolchain
	cargo build --workspace --all-targets
	CAPBLOCK_STATE=$(TEST_STATE)-future bash infra/local/future.sh \
	  bash infra/local/stack.sh run -- cargo test --workspace --no-fail-fast -- --test-threads $(TEST_THREADS)
	$(MAKE) --no-print-directory test-py-future

# The boto3 checks again with the date 400 days ahead (a few seconds each); their sleeps need
# the monotonic clock moved too (infra/local/future.sh).
test-py-future:
	CAPBLOCK_FAKE_MONOTONIC=1 bash infra/local/future.sh $(MAKE) --no-print-directory test-sim-boto3 test-resource-groups test-events

# The integration tests with bigger loop counts (fault-injection rounds): CAPBLOCK_LONG=1.
test-long: toolchain
	cargo build --workspace --all-targets
	CAPBLOCK_LONG=1 CAPBLOCK_STATE=$(TEST_STATE) bash infra/local/stack.sh run -- cargo test --workspace --test integration -- --nocapture

# The simulator against a second, independent EC2 client (boto3 validates its XML).
test-sim-boto3: toolchain
	bash infra/market-sim/tests/run_boto3_check.sh $(CAPBLOCK_CACHE)/venv/bin/python

# The Resource Groups membership calls the local stack adds in front of moto
# (infra/local/moto_resource_groups.py), through boto3 against moto_serial.py on a free port. The
# stack's venv (made by test-rust's stack.sh) has moto and boto3; no cargo, a few seconds.
test-resource-groups:
	$(CAPBLOCK_CACHE)/venv/bin/python infra/local/tests/resource_groups_check.py

# PutEvents onto another account's bus, which the local stack delivers in front of moto
# (infra/local/moto_events.py) as that bus's policy (member.yaml's) allows, through boto3 against
# moto_serial.py on a free port; same venv, no cargo, a few seconds.
test-events:
	$(CAPBLOCK_CACHE)/venv/bin/python infra/local/tests/events_check.py

# The team page in headless Chromium (Debian's chromium, installed by the script): the demo
# story's page loads with no console message and no request, each section holds the story, and a
# screenshot is saved (infra/page/browser.sh says how each is checked).
test-page: toolchain
	bash infra/page/browser.sh $(CAPBLOCK_CACHE)/page-$(CLONE_KEY)

# The SkyPilot recipe's check (infra/handoff/test.sh) is offline once its venv exists: SkyPilot's
# own schemas and CLI parser, a few seconds.
test-template:
	python3 infra/deploy/check_layers.py .
	bash infra/deploy/lint.sh
	bash infra/deploy/crosscheck.sh
	bash infra/deploy/unit.sh
	bash infra/handoff/test.sh

# The purchase protocol's model (verify/), checked exhaustively to bounds deeper than make test's
# (tests/bounded.rs there): more actors and faults at once. Release-built, in the bench's target
# directory. Prints each bound's states and any property broken, with its shortest path.
verify: toolchain
	CARGO_TARGET_DIR=$(BENCH_TARGET_DIR) cargo build --release -p capblock-verify
	for bound in bounded budgets ultraservers deep deep-ultraservers deep-segments deep-requests; do \
	  $(BENCH_TARGET_DIR)/release/capblock-verify --bound $$bound || exit 1; done

# The seeded simulation of every actor (not part of `make test`, which runs fixed seeds): new
# seeds, a simulated year each, for SOAK_MINUTES; a failing seed prints the command that replays
# it exactly. Built with the `soak` profile (optimized; the Lambda binaries keep `release`).
SOAK_MINUTES ?= 10
soak: toolchain
	CARGO_TARGET_DIR=$(BENCH_TARGET_DIR) cargo build --profile soak -p capblock-verify --bin capblock-soak
	$(BENCH_TARGET_DIR)/soak/capblock-soak --minutes $(SOAK_MINUTES)

# Mutation testing (not part of `make test`): cargo-mutants (`cargo install cargo-mutants
# --locked`) mutates the core's money modules one mutant at a time and runs capblock-core's
# tests on each; the scope and timeouts are .cargo/mutants.toml's, the figures and the
# survivors explained are docs/tests.md's ("Mutation testing"). One job (-j 1): each mutant
# builds the core again, and two at once only fight over 2 cores. It builds in a target
# directory of its own (seeded like the clone's), so a run of half an hour never holds the
# clone's build lock. The report is mutants.out/ (ignored by git). MUTANTS_ARGS go to
# cargo-mutants (e.g. --iterate to retest only what the last run did not catch).
MUTANTS_TARGET_DIR ?= $(CARGO_TARGET_DIR)-mutants
MUTANTS_ARGS ?=
mutants:
	@bash infra/toolchain.sh
	@bash infra/target-dir.sh "$(MUTANTS_TARGET_DIR)"
	CARGO_TARGET_DIR=$(MUTANTS_TARGET_DIR) cargo mutants -j 1 $(MUTANTS_ARGS)

# Supply chain (not part of `make test`): cargo-audit (`cargo install cargo-audit --locked`) on
# Cargo.lock against a local clone of RustSec's advisory-db; nothing is fetched (--no-fetch).
# AUDIT_FLAGS go to cargo-audit (e.g. --stale for an old clone). infra/deploy/audit-fixture holds
# two stand-in advisories for a dry run without the real database.
ADVISORY_DB ?=
AUDIT_FLAGS ?=
audit: toolchain
	bash infra/deploy/audit.sh "$(ADVISORY_DB)" $(AUDIT_FLAGS)

# The operator CLI `capblock`, release-built with the locked dependencies and installed by cargo
# where cargo installs binaries: INSTALL_ROOT/bin if given, else $CARGO_INSTALL_ROOT/bin, else
# $CARGO_HOME/bin (~/.cargo/bin), so it runs from any directory with no variable of this
# Makefile exported. It builds in this clone's target directory, reusing what make test built.
INSTALL_ROOT ?=
install: toolchain
	cargo install --locked --path cli $(if $(INSTALL_ROOT),--root "$(INSTALL_ROOT)")
	@dir="$(if $(INSTALL_ROOT),$(INSTALL_ROOT),$${CARGO_INSTALL_ROOT:-$${CARGO_HOME:-$$HOME/.cargo}})/bin"; \
	  echo "make install: capblock is $$dir/capblock"; \
	  case ":$$PATH:" in *":$$dir:"*) ;; *) echo "  $$dir is not on PATH: add it (export PATH=\"$$dir:\$$PATH\")";; esac

ARCH ?= arm64
package: toolchain
	bash infra/deploy/package.sh $(ARCH)

# Figures against their targets (docs/benchmarks.md). Not part of `make test`:
# it measures, it does not assert. Release builds go to a target dir of their own, so the bench
# never holds the debug build lock. The arm64 zips need `rustup target add aarch64-unknown-linux-gnu`;
# without it the x86_64 zips are measured (and labelled so).
BENCH_TARGET_DIR ?= $(CARGO_TARGET_DIR)-release
# The bench is built on its own: it enables tokio's test-util (its detection simulation runs on
# the paused clock), which must not reach the function binaries whose cold start it measures.
BENCH_PACKAGES := -p capblock-market-sim -p capblock-cli -p scan-offerings -p track-blocks -p on-capacity-event
bench: toolchain
	CARGO_TARGET_DIR=$(BENCH_TARGET_DIR) cargo build --release $(BENCH_PACKAGES)
	CARGO_TARGET_DIR=$(BENCH_TARGET_DIR) cargo build --release -p capblock-bench
	if CARGO_TARGET_DIR=$(BENCH_TARGET_DIR) bash infra/deploy/package.sh arm64 >&2; then echo arm64; \
	  else CARGO_TARGET_DIR=$(BENCH_TARGET_DIR) bash infra/deploy/package.sh x86_64 >&2 && echo x86_64; fi \
	  > $(CAPBLOCK_CACHE)/bench-package-arch
	CARGO_TARGET_DIR=$(BENCH_TARGET_DIR) CAPBLOCK_SIM_BIN=$(BENCH_TARGET_DIR)/release/capblock-market-sim \
	  CAPBLOCK_STATE=$(CAPBLOCK_CACHE)/bench-stack BENCH_PACKAGE_ARCH=$$(cat $(CAPBLOCK_CACHE)/bench-package-arch) \
	  bash infra/local/stack.sh run -- $(BENCH_TARGET_DIR)/release/capblock-bench --repo $(CURDIR)
