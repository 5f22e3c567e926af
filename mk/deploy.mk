# Diff, baselines and laptop deploys. Included by the Makefile; uses its PY, CDK, ENV and setup.
#
#   make diff [ENV=dev] [ROUTE=ecs] [LIVE=1] [ALLOW_DANGEROUS=1] [SUMMARY=file.md]
#   make baseline [ENV=dev]
#   make bootstrap ENV=dev
#   make deploy ENV=dev ROUTE=sagemaker|ecs [APPROVAL=never]
#   make destroy ENV=dev ROUTE=sagemaker|ecs [FORCE=1]
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
DEPLOY_SETUP ?= setup

CHANGES = $(PY) -m sonic_deploy.changes
truthy = $(filter 1 true yes,$(1))
DIFF_ENVS = $(or $(ENV),$(shell $(CHANGES) environments))
ENV_ARGS = $(foreach env,$(DIFF_ENVS),--env $(env))
# Reads `key=value` lines printed by `python -m sonic_deploy.changes target` into shell variables.
read_facts = sed -n 's/^$(1)=//p' <<<"$$facts"
RETAINED_NOTE = Kept on purpose (RETAIN), still in the account: ECR repositories, KMS keys, log groups. \
See docs/deploy.md, "What stays behind", to delete them.

.PHONY: diff baseline synth-envs bootstrap deploy destroy

synth-envs: $(DEPLOY_SETUP)
	@$(if $(ENV),$(CHANGES) target --env "$(ENV)" >/dev/null || exit 2;) \
	set -e; for env in $(DIFF_ENVS); do \
	  echo "synthesizing environment $$env into $(SYNTH_DIR)/$$env"; \
	  rm -rf "$(SYNTH_DIR)/$$env"; \
	  $(CDK) synth --quiet -c env=$$env --output "$(SYNTH_DIR)/$$env"; \
	done

diff: synth-envs
	@$(CHANGES) diff $(ENV_ARGS) --synthesized "$(SYNTH_DIR)" --baselines "$(BASELINES)" \
	  $(if $(ROUTE),--route "$(ROUTE)") \
	  $(if $(call truthy,$(LIVE)),--live) \
	  $(if $(call truthy,$(ALLOW_DANGEROUS)),--allow-dangerous) \
	  $(if $(SUMMARY),--markdown "$(SUMMARY)")

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

deploy: $(DEPLOY_SETUP)
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
	echo "cdk bootstrap aws://$$account/$$region"; \
	$(CDK) bootstrap "aws://$$account/$$region" -c env=$(ENV)
