# capblock: the two commands are `make demo` and `make test` (see README.md).
# Builds share a target directory outside the clone, so a fresh clone reuses earlier builds.
CARGO_TARGET_DIR ?= $(HOME)/.cache/capblock/target
CAPBLOCK_CACHE ?= $(HOME)/.cache/capblock
export CARGO_TARGET_DIR CAPBLOCK_CACHE

.PHONY: demo test check lint-rust test-rust test-sim-boto3 test-template package bench help

help:
	@echo "make demo      run the main job locally: simulated market + emulated AWS, end to end"
	@echo "make test      every check and test (what CI runs)"
	@echo "make package   build the Lambda deployment zips (ARCH=arm64|x86_64)"

demo:
	bash infra/demo.sh

# Everything CI runs. The local stack is started and stopped by the command itself, in a state
# folder of its own so it never touches a stack a developer has running.
test: lint-rust test-rust test-sim-boto3 test-template
	@echo "make test: all checks passed"

lint-rust:
	cargo fmt --all --check
	cargo clippy --workspace --all-targets -- -D warnings

test-rust:
	cargo build --workspace --bins
	CAPBLOCK_STATE=$(CAPBLOCK_CACHE)/test-stack bash infra/local/stack.sh run -- cargo test --workspace

# The simulator against a second, independent EC2 client (boto3 validates its XML).
test-sim-boto3:
	bash infra/market-sim/tests/run_boto3_check.sh $(CAPBLOCK_CACHE)/venv/bin/python

test-template:
	bash infra/deploy/lint.sh
	bash infra/deploy/crosscheck.sh

ARCH ?= arm64
package:
	bash infra/deploy/package.sh $(ARCH)
