"""Every bad input the loader must catch, with the exact message a user sees."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from sonic_deploy.config import ConfigError, load_settings
from tests.conftest import CONFIG_DIR, EditConfig

DEV = "environments/dev.toml"
SHIPPED_ARN = "arn:aws:sagemaker:us-east-2:570011132906:model-package/Sonic3-Sagemaker-V5"
SHIPPED_LINE = f'us-east-2 = "{SHIPPED_ARN}"'


def error_for(config_dir: Path, env: str = "dev") -> str:
    with pytest.raises(ConfigError) as caught:
        load_settings(config_dir, env)
    return str(caught.value)


def test_shipped_environments_load() -> None:
    dev = load_settings(CONFIG_DIR, "dev")
    assert dev.model_package_arn == SHIPPED_ARN
    assert dev.sagemaker_streams_per_instance == 8  # Sonic 3's listing: 8 per ml.g6e.xlarge
    assert dev.endpoint_name == "sonic-dev"
    assert load_settings(CONFIG_DIR, "prod").environment.account == "123456789012"


def test_default_environment_is_dev() -> None:
    assert load_settings(CONFIG_DIR).environment_name == "dev"


def test_unknown_environment() -> None:
    assert error_for(CONFIG_DIR, "staging") == (
        f"{CONFIG_DIR}/environments: env = 'staging': unknown environment. Fix: use one of dev, dev-eks, prod "
        f"(`cdk synth -c env=NAME`), or create {CONFIG_DIR}/environments/staging.toml"
    )


@pytest.mark.parametrize("file", ["environments/dev.toml", "instance_types.toml", "model_packages.toml"])
def test_a_folder_where_a_file_should_be(edit_config: EditConfig, file: str) -> None:
    """Not 'unknown environment ... or create dev.toml' (it exists) nor 'file not found' (it is there)."""
    config = edit_config(file, "", "")
    (config / file).unlink()
    (config / file).mkdir()
    with pytest.raises(ConfigError) as caught:
        load_settings(config, "dev")
    assert caught.value.file == str(config / file)
    assert caught.value.problem == "a folder, where a TOML file should be"
    assert "remove or rename the folder" in caught.value.fix


def test_region_without_model_package(edit_config: EditConfig) -> None:
    config = edit_config(DEV, 'region = "us-east-2"', 'region = "eu-west-1"')
    config = edit_config(DEV, '["us-east-2a", "us-east-2b"]', '["eu-west-1a", "eu-west-1b"]')
    config = edit_config(DEV, 'availability_zone = "us-east-2a"', 'availability_zone = "eu-west-1a"')
    assert error_for(config) == (
        f'{config}/model_packages.toml: versions."sonic-3"."eu-west-1" = (missing): no model-package ARN for '
        f"sonic-3 in eu-west-1 (needed by {config}/environments/dev.toml). Fix: subscribe on AWS Marketplace, "
        'then add `eu-west-1 = "<ARN from SageMaker AI > Model packages > My subscriptions>"`, or deploy to '
        "one of: us-east-2"
    )


def test_sonic_version_without_model_packages(edit_config: EditConfig) -> None:
    """A version the catalogue knows, but with no ARN yet: the SageMaker route says where to add one."""
    config = edit_config(DEV, 'sonic_version = "sonic-3"', 'sonic_version = "sonic-3.6"')
    assert error_for(config) == (
        f"{config}/environments/dev.toml: sonic_version = 'sonic-3.6': no model packages listed for this version "
        f'in model_packages.toml. Fix: use one of sonic-3, or add [versions."sonic-3.6"] to '
        f"{config}/model_packages.toml"
    )


def test_instance_type_not_gpu_ml(edit_config: EditConfig) -> None:
    config = edit_config(DEV, 'instance_type = "ml.g6e.xlarge"', 'instance_type = "ml.m5.xlarge"')
    assert error_for(config) == (
        f"{config}/environments/dev.toml: sagemaker.instance_type = 'ml.m5.xlarge': not a GPU SageMaker (ml.) "
        "instance type. Fix: use one of ml.g5.xlarge, ml.g6.2xlarge, ml.g6.xlarge, ml.g6e.2xlarge, "
        "ml.g6e.xlarge, or describe it in config/instance_types.toml"
    )


def test_ec2_type_is_not_a_sagemaker_type(edit_config: EditConfig) -> None:
    config = edit_config(DEV, 'instance_type = "ml.g6e.xlarge"', 'instance_type = "g6e.xlarge"')
    assert "sagemaker.instance_type = 'g6e.xlarge': not a GPU SageMaker (ml.) instance type" in error_for(
        config
    )


def test_min_above_max(edit_config: EditConfig) -> None:
    config = edit_config(DEV, "max_instances = 4", "max_instances = 3")
    config = edit_config(DEV, "min_instances = 2", "min_instances = 5")
    assert error_for(config) == (
        f"{config}/environments/dev.toml: sagemaker.max_instances = 3: below min_instances (5). "
        "Fix: set sagemaker.max_instances to 5 or more"
    )


def test_fewer_than_two_instances(edit_config: EditConfig) -> None:
    config = edit_config(DEV, "min_instances = 2", "min_instances = 1")
    assert error_for(config) == (
        f"{config}/environments/dev.toml: sagemaker.min_instances = 1: fewer than 2 instances (the SageMaker "
        "SLA covers only endpoints with more than one instance). Fix: set sagemaker.min_instances to 2 or more"
    )


def test_malformed_arn(edit_config: EditConfig) -> None:
    config = edit_config(
        "model_packages.toml",
        SHIPPED_LINE,
        SHIPPED_LINE.replace("model-package/Sonic3-Sagemaker-V5", "modelpackage/Sonic3"),
    )
    assert error_for(config) == (
        f'{config}/model_packages.toml: versions."sonic-3"."us-east-2" = '
        "'arn:aws:sagemaker:us-east-2:570011132906:modelpackage/Sonic3': not a SageMaker model-package ARN. "
        "Fix: copy the ARN from SageMaker AI > Model packages > My subscriptions; it looks like "
        "arn:aws:sagemaker:<region>:<12-digit account>:model-package/<name>"
    )


def test_arn_for_another_region(edit_config: EditConfig) -> None:
    config = edit_config(
        "model_packages.toml",
        SHIPPED_LINE,
        SHIPPED_LINE.replace("sagemaker:us-east-2:", "sagemaker:us-west-2:"),
    )
    assert "the ARN is for us-west-2, not us-east-2. Fix: move it under `us-west-2 = ...`" in error_for(
        config
    )


def test_unknown_key_suggests_the_right_one(edit_config: EditConfig) -> None:
    config = edit_config(DEV, "max_instances = 4", "max_instance = 4")
    assert error_for(config) == (
        f"{config}/environments/dev.toml: sagemaker.max_instance = 4: unknown key. Fix: did you mean "
        "'max_instances'? remove or rename it; known keys here: alarms, capacity, endpoint_name, instance_type, "
        "max_instances, min_instances, model_data_download_timeout_s, scale_in_cooldown_s, scale_out_cooldown_s, "
        "startup_health_check_timeout_s, streams_per_instance, target_utilisation"
    )


def test_unknown_top_level_key(edit_config: EditConfig) -> None:
    config = edit_config(DEV, 'region = "us-east-2"', 'regoin = "us-east-2"')
    message = error_for(config)
    assert message.startswith(
        f"{config}/environments/dev.toml: regoin = 'us-east-2': unknown key. Fix: did you mean 'region'?"
    )


def test_wrong_type_names_field_and_value(edit_config: EditConfig) -> None:
    config = edit_config(DEV, "target_utilisation = 0.8", "target_utilisation = 1.5")
    assert error_for(config) == (
        f"{config}/environments/dev.toml: sagemaker.target_utilisation = 1.5: Input should be less than or "
        "equal to 1. Fix: write a number in that range for sagemaker.target_utilisation (default 0.8)"
    )


def test_toml_syntax_error(edit_config: EditConfig) -> None:
    config = edit_config(DEV, 'region = "us-east-2"', "region = us-east-2")
    assert error_for(config).startswith(
        f"{config}/environments/dev.toml: (syntax) = (missing): not valid TOML:"
    )


def test_one_availability_zone(edit_config: EditConfig) -> None:
    config = edit_config(DEV, '["us-east-2a", "us-east-2b"]', '["us-east-2a"]')
    assert error_for(config) == (
        f"{config}/environments/dev.toml: network.availability_zones = ['us-east-2a']: fewer than two distinct "
        "Availability Zones (SageMaker's VpcConfig needs subnets in two AZs). Fix: name two or more, e.g. "
        '["us-east-2a", "us-east-2b"]'
    )


def test_zone_of_another_region(edit_config: EditConfig) -> None:
    config = edit_config(DEV, '"us-east-2b"]', '"us-west-2b"]')
    assert "network.availability_zones = 'us-west-2b': not an Availability Zone of us-east-2" in error_for(
        config
    )


def test_non_default_environment_needs_account(edit_config: EditConfig) -> None:
    config = edit_config("environments/prod.toml", 'account = "123456789012"\n', "")
    assert error_for(config, "prod") == (
        f"{config}/environments/prod.toml: account = (missing): only the default environment (dev) may leave "
        'the account out. Fix: add `account = "<12-digit AWS account id>"`'
    )


def test_bad_log_retention(edit_config: EditConfig) -> None:
    config = edit_config(DEV, "log_retention_days = 30", "log_retention_days = 31")
    assert (
        "log_retention_days = 31: CloudWatch Logs does not offer this retention. Fix: use one of 1, 3, 5"
        in (error_for(config))
    )


EXISTING_VPC = """
[network.existing_vpc]
vpc_id = "vpc-0123456789abcdef0"
vpc_cidr = "10.0.0.0/16"
availability_zones = ["us-east-2a", "us-east-2b"]
private_subnet_ids = ["subnet-0aaaaaaaaaaaaaaa0", "subnet-0bbbbbbbbbbbbbbb0"]
"""


def test_existing_vpc_needs_route_tables(edit_config: EditConfig) -> None:
    config = edit_config(
        DEV, "flow_log_retention_days = 30\n", "flow_log_retention_days = 30\n" + EXISTING_VPC
    )
    assert error_for(config) == (
        f"{config}/environments/dev.toml: network.existing_vpc.private_route_table_ids = []: the stacks add an "
        "S3 gateway endpoint (model data, image layers) to the private subnets' route tables. Fix: list each private subnet's "
        "route table id, in the same order as private_subnet_ids"
    )


def test_cidr_too_small(edit_config: EditConfig) -> None:
    config = edit_config(DEV, 'cidr = "10.60.0.0/16"', 'cidr = "10.60.0.0/24"')
    assert error_for(config) == (
        f"{config}/environments/dev.toml: network.cidr = '10.60.0.0/24': too small: each route's VPC takes half "
        "of it, and a half needs a /20 private subnet in each of 2 AZs and the public subnets. Fix: use a /17 or "
        'larger, e.g. "10.60.0.0/16"'
    )


def test_each_route_gets_its_own_half_of_the_environments_range() -> None:
    dev = load_settings(CONFIG_DIR, "dev")
    assert (dev.route_cidr("sagemaker"), dev.route_cidr("ecs")) == ("10.60.0.0/17", "10.60.128.0/17")


def test_a_client_range_that_overlaps_the_routes_is_refused(edit_config: EditConfig) -> None:
    config = edit_config(
        DEV, 'cidr = "10.60.0.0/16"', 'cidr = "10.60.0.0/16"\nclient_cidrs = ["10.60.200.0/24"]'
    )
    assert error_for(config) == (
        f"{config}/environments/dev.toml: network.client_cidrs = '10.60.200.0/24': overlaps the routes' own range "
        "10.60.0.0/16: a VPC with that range cannot be peered or routed to them. Fix: give the client VPC a "
        "range outside network.cidr, or move network.cidr"
    )
    config = edit_config(DEV, '["10.60.200.0/24"]', '["10.20.0.1/16"]')
    assert (
        "network.client_cidrs = '10.20.0.1/16': host bits set: the range /16 starts at 10.20.0.0. Fix: write "
        '"10.20.0.0/16"' in error_for(config)
    )


def test_cidr_not_a_network(edit_config: EditConfig) -> None:
    config = edit_config(DEV, 'cidr = "10.60.0.0/16"', 'cidr = "10.60.0.0/33"')
    assert "network.cidr = '10.60.0.0/33': not an IPv4 network" in error_for(config)


def test_alarm_email_must_be_an_address(edit_config: EditConfig) -> None:
    config = edit_config(DEV, "model_latency_p95_ms = 500", 'model_latency_p95_ms = 500\nemail = ["ops"]')
    assert "sagemaker.alarms.email[0] = 'ops': String should match pattern" in error_for(config)


def test_environment_name_that_cannot_name_resources(edit_config: EditConfig) -> None:
    config = edit_config(DEV, "", "")
    (config / "environments" / "Staging_EU.toml").write_text((config / DEV).read_text())
    assert error_for(config, "Staging_EU") == (
        f"{config}/environments: env = 'Staging_EU': not a usable environment name (it names stacks, ECR "
        "repositories and the endpoint). Fix: use lower-case letters, digits and hyphens, starting with a letter, "
        "e.g. staging-eu"
    )


def test_an_unconfirmed_arn_must_be_one_of_those_listed(edit_config: EditConfig) -> None:
    config = edit_config("model_packages.toml", f'  "{SHIPPED_ARN}",', f'  "{SHIPPED_ARN}-typo",')
    assert error_for(config) == (
        f"{config}/model_packages.toml: unconfirmed = '{SHIPPED_ARN}-typo': not one of the ARNs listed under "
        "[versions]. Fix: remove it from `unconfirmed`, or correct it to match the ARN it stands for"
    )


def test_shipped_placeholders_are_found_per_route() -> None:
    dev = load_settings(CONFIG_DIR, "dev")
    sagemaker = [(p.field, p.value) for p in dev.placeholders["sagemaker"]]
    assert sagemaker == [('versions."sonic-3"."us-east-2"', SHIPPED_ARN)]
    ecs = {p.field for p in dev.placeholders["ecs"]}
    images = {
        f"ecs.services.{s}.{f}"
        for s in ("api_server", "gpu_worker", "licence_proxy")
        for f in ("source", "tag")
    }
    # The variables the API server and workers read their peers' addresses from: not public either.
    addresses = {
        f"ecs.services.{s}.{f}"
        for s in ("api_server", "gpu_worker")
        for f in ("nats_url_variable", "licence_proxy_url_variable")
    }
    assert ecs == images | addresses
    prod = load_settings(CONFIG_DIR, "prod")
    assert [(p.field, p.value) for p in prod.placeholders["sagemaker"]] == [
        ("account", "123456789012"),
        ('versions."sonic-3"."us-east-2"', SHIPPED_ARN),
        ("sagemaker.alarms.email", "oncall@example.com"),
    ]


def test_replaced_placeholders_leave_none(deployable_config: Path) -> None:
    assert load_settings(deployable_config, "dev").placeholders == {"sagemaker": (), "ecs": ()}
    assert load_settings(deployable_config, "prod").placeholders == {"sagemaker": ()}


def test_alarms_must_reach_someone_outside_dev(edit_config: EditConfig) -> None:
    config = edit_config("environments/prod.toml", 'email = ["oncall@example.com"]', "email = []")
    assert error_for(config, "prod") == (
        f"{config}/environments/prod.toml: sagemaker.alarms.email = []: no one is subscribed to the sagemaker "
        'route\'s alarms. Fix: add the on-call address: `email = ["oncall@your-company.com"]` under '
        "[sagemaker.alarms]"
    )


def test_a_deployed_routes_range_can_be_kept(edit_config: EditConfig) -> None:
    """An ECS VPC deployed on the whole 10.60.0.0/16 keeps it; SageMaker then has to move out of it."""
    config = edit_config(
        DEV, 'cidr = "10.60.0.0/16"', 'cidr = "10.60.0.0/16"\nroute_cidrs = { ecs = "10.60.0.0/16" }'
    )
    assert error_for(config) == (
        f"{config}/environments/dev.toml: network.route_cidrs = {{'sagemaker': '10.60.0.0/17', 'ecs': "
        "'10.60.0.0/16'}: the two routes' VPCs overlap: one client VPC could not be peered with both. Fix: give "
        'one route another range (moving a deployed route\'s range replaces its VPC: see docs/configuration.md, "Network ranges")'
    )
    config = edit_config(
        DEV, '{ ecs = "10.60.0.0/16" }', '{ ecs = "10.60.0.0/16", sagemaker = "10.70.0.0/17" }'
    )
    dev = load_settings(config, "dev")
    assert (dev.route_cidr("ecs"), dev.route_cidr("sagemaker")) == ("10.60.0.0/16", "10.70.0.0/17")
    config = edit_config(DEV, 'sagemaker = "10.70.0.0/17"', 'sagemaker = "10.70.0.0/22"')
    assert "network.route_cidrs.sagemaker = '10.70.0.0/22': too small" in error_for(config)


def test_the_first_route_the_file_lists_is_the_first_named_without_alarm_recipients(
    tmp_path: Path,
) -> None:
    """Both routes without an alarm address: the error names the one `routes` lists first."""
    config = tmp_path / "config"
    shutil.copytree(CONFIG_DIR, config)
    dev = (config / "environments" / "dev.toml").read_text()
    staging = dev.replace('routes = ["sagemaker", "ecs"]', 'routes = ["ecs", "sagemaker"]').replace(
        "[ecs.api]", "[ecs.api]\nallow_plaintext_outside_dev = true", 1
    )
    (config / "environments" / "staging.toml").write_text('account = "111122223333"\n' + staging)
    assert error_for(config, "staging").startswith(
        f"{config}/environments/staging.toml: ecs.alarms.email = []: no one is subscribed to the ecs route's"
    )
