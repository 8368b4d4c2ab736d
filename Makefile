# Engram — the two commands that matter are `make run` and `make test`.
SHELL := /bin/bash
export UV_LINK_MODE ?= copy
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION ?= 20
export CDK_DISABLE_VERSION_CHECK ?= 1
export CDK_DISABLE_CLI_TELEMETRY ?= true
STAGE ?= dev
UV ?= $(shell command -v uv 2>/dev/null || echo "python3 -m uv")

.PHONY: setup console screenshots run test test-unit test-integration test-infrastructure test-e2e test-typescript test-console lint format typecheck bench eval synth diff deploy clean

setup: ## install uv (if missing), every locked dependency, and the console's build when Node is there
	@command -v uv >/dev/null 2>&1 || python3 -m uv --version >/dev/null 2>&1 || python3 -m pip install --quiet uv
	@$(UV) sync --locked --all-groups
	@$(MAKE) --no-print-directory console

CONSOLE_HINT := install Node.js 20.19+ and run 'make setup' (or: cd console && npm ci && npm run build)
# Newer than the build: any file of console/ but its packages and its builds.
CONSOLE_CHANGED = find console \( -path console/node_modules -o -path console/dist -o -path console/dist-aws \) -prune \
	-o -type f -newer console/dist/index.html -print -quit

console: ## the console's build (console/dist) with npm ci, when Node is there and it is out of date
	@if [ ! -f console/package.json ]; then \
		true; \
	elif ! command -v npm >/dev/null 2>&1; then \
		echo "engram: Node.js not found: the API runs without the console; to get it, $(CONSOLE_HINT)"; \
	elif [ -f console/dist/index.html ] && [ -z "$$($(CONSOLE_CHANGED))" ]; then \
		true; \
	else \
		cd console && npm ci --no-audit --no-fund --prefer-offline && npm run build; \
	fi

# The browser tests write every page at both widths under build/screenshots/; these are the
# committed copies the README links.
screenshots: setup ## refresh docs/console/*.png from the browser tests
	rm -rf build/screenshots
	$(UV) run pytest tests/browser -q
	mkdir -p docs/console
	cp build/screenshots/*.png docs/console/

run: setup ## the whole service locally on embedded defaults
	$(UV) run engram serve

test: setup lint typecheck ## every tier that needs no AWS account
	$(UV) run pytest tests
	$(MAKE) --no-print-directory test-typescript
	$(MAKE) --no-print-directory test-console

# The TypeScript client: locked packages (npm ci), then its type check and tests against a
# real `engram serve` it starts itself. Needs Node 20.19 or later.
test-typescript: setup
	cd clients/typescript && npm ci --no-audit --no-fund --prefer-offline
	cd clients/typescript && ENGRAM_CMD="$(UV) run engram" npm test

# The memory console (console/): locked packages, its type check, unit tests (PKCE, tokens,
# errors) and both builds, checking that the AWS build has no dev sign-in.
test-console:
	cd console && npm ci --no-audit --no-fund --prefer-offline
	cd console && npm test

test-unit: setup
	$(UV) run pytest tests/unit

test-integration: setup
	$(UV) run pytest tests/integration

test-infrastructure: setup
	$(UV) run pytest tests/infrastructure

test-e2e: setup
	$(UV) run pytest tests/e2e

lint: setup
	$(UV) run ruff check .
	$(UV) run ruff format --check .

format: setup
	$(UV) run ruff format .
	$(UV) run ruff check --fix .

typecheck: setup
	$(UV) run mypy shared/engram functions infra clients/python/src/engram_client

bench: setup ## measured against floors of the same machine; results in bench/results/
	$(UV) run python -m bench

# LoCoMo data (a file or folder) and the served configurations the quality harness compares
EVAL_DATA ?= ../shared/data/locomo-dev/
EVAL_CONFIGS ?= keyword,hybrid-local,hybrid-minilm

eval: setup ## recall quality on LoCoMo through the HTTP API (bench/quality); EVAL_DATA=, EVAL_CONFIGS=
	ENGRAM_BENCH_QUALITY_DATA="$(EVAL_DATA)" ENGRAM_BENCH_QUALITY_CONFIGS="$(EVAL_CONFIGS)" \
		$(UV) run python -m bench quality

synth: setup ## offline; then cfn-lint over the stage's templates (infra/lint.py)
	$(UV) run bash infra/cdk.sh synth $(STAGE)
	$(UV) run --color never python -m infra.lint $${CDK_OUTDIR:-cdk.out/$(STAGE)}

diff: setup
	$(UV) run bash infra/cdk.sh diff $(STAGE)

deploy: setup
	$(UV) run bash infra/cdk.sh deploy $(STAGE)

clean:
	rm -rf .engram build cdk.out .mypy_cache .pytest_cache .ruff_cache
