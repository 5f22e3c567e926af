"""Bad ECS config caught at synth, each with the message a user sees."""

from __future__ import annotations

from pathlib import Path

import pytest

from sonic_deploy.config import ConfigError, load_settings
from tests.conftest import EditConfig

DEV = "environments/dev.toml"


def error_for(config_dir: Path) -> str:
    with pytest.raises(ConfigError) as caught:
        load_settings(config_dir, "dev")
    return str(caught.value).split(": ", 1)[1]  # without the (temporary) file path


def test_unknown_gpu_family(edit_config: EditConfig) -> None:
    config = edit_config(DEV, 'instance_type = "g6e.xlarge"', 'instance_type = "p5.48xlarge"')
    assert error_for(config) == (
        "ecs.instance_type = 'p5.48xlarge': not a GPU instance type of a family the ECS route supports (g6, g6e). "
        "Fix: use one of g6.2xlarge, g6.4xlarge, g6.xlarge, g6e.2xlarge, g6e.xlarge, or describe it in "
        "config/instance_types.toml"
    )


def test_sagemaker_type_on_ecs(edit_config: EditConfig) -> None:
    config = edit_config(DEV, 'instance_type = "g6e.xlarge"', 'instance_type = "ml.g6e.xlarge"')
    assert error_for(config).startswith("ecs.instance_type = 'ml.g6e.xlarge': not a GPU instance type")


def test_az_not_in_vpc(edit_config: EditConfig) -> None:
    config = edit_config(DEV, 'availability_zone = "us-east-2a"', 'availability_zone = "us-east-2c"')
    assert error_for(config) == (
        "ecs.availability_zone = 'us-east-2c': not one of the VPC's Availability Zones. "
        "Fix: use one of us-east-2a, us-east-2b"
    )


def test_fewer_than_two_workers(edit_config: EditConfig) -> None:
    config = edit_config(DEV, "min_workers = 2", "min_workers = 1")
    assert error_for(config) == (
        "ecs.min_workers = 1: fewer than 2 GPU workers (one failure would stop all speech). "
        "Fix: set ecs.min_workers to 2 or more"
    )


def test_workers_min_above_max(edit_config: EditConfig) -> None:
    config = edit_config(DEV, "max_workers = 6", "max_workers = 1")
    assert (
        error_for(config)
        == "ecs.max_workers = 1: below min_workers (2). Fix: set ecs.max_workers to 2 or more"
    )


def test_one_api_server(edit_config: EditConfig) -> None:
    config = edit_config(DEV, "api_server_tasks = 2", "api_server_tasks = 1")
    assert error_for(config).startswith("ecs.api_server_tasks = 1: fewer than 2 API server tasks")


def test_misspelt_service_name(edit_config: EditConfig) -> None:
    config = edit_config(DEV, "[ecs.services.gpu_worker]", "[ecs.services.gpu_wroker]")
    assert error_for(config) == (
        "ecs.services.gpu_wroker = 'gpu_wroker': unknown name. Fix: did you mean 'gpu_worker'? use one of "
        "api_server, gpu_worker, licence_proxy, nats, cloudwatch_agent, licence_loader"
    )


def test_missing_service_table(edit_config: EditConfig) -> None:
    text = (edit_config(DEV, "", "") / DEV).read_text()
    start = text.index("[ecs.services.licence_proxy]")
    end = text.index("[ecs.services.nats]")
    config = edit_config(DEV, text[start:end], "")
    assert error_for(config) == (
        "ecs.services.licence_proxy = (missing): no image configured for this service. Fix: add an "
        "[ecs.services.licence_proxy] table with source, tag and port (from Cartesia's bundle)"
    )


def test_air_gapped_with_nat(edit_config: EditConfig) -> None:
    config = edit_config(DEV, 'licence_mode = "connected"', 'licence_mode = "air-gapped"')
    assert error_for(config) == (
        "ecs.nat_gateways = 1: air-gapped mode must have no egress, but a NAT gateway gives the containers a way "
        'out. Fix: set ecs.nat_gateways = 0, or licence_mode = "connected"'
    )


def test_connected_without_nat(edit_config: EditConfig) -> None:
    config = edit_config(DEV, "nat_gateways = 1", "nat_gateways = 0")
    assert error_for(config).startswith("ecs.nat_gateways = 0: connected mode needs HTTPS egress")


def test_unknown_licence_mode(edit_config: EditConfig) -> None:
    config = edit_config(DEV, 'licence_mode = "connected"', 'licence_mode = "offline"')
    assert error_for(config).startswith(
        "ecs.licence_mode = 'offline': Input should be 'connected' or 'air-gapped'"
    )


def test_created_secrets_with_image_copy(edit_config: EditConfig) -> None:
    config = edit_config(
        DEV,
        'registry_credentials = "sonic/dev/cartesia-registry"',
        'registry_credentials = "sonic/dev/cartesia-registry"\ncreate = true',
    )
    assert error_for(config).startswith(
        "ecs.secrets.create = True: the image copy would run before you can store"
    )


def test_worker_does_not_fit_instance(edit_config: EditConfig) -> None:
    config = edit_config(DEV, 'instance_type = "g6e.xlarge"', 'instance_type = "g6.xlarge"')
    assert error_for(config) == (
        "ecs.services.gpu_worker.memory_mib = 28672: with the metrics agent (256 MiB) it does not fit a g6.xlarge "
        "(15400 MiB usable). Fix: set it to 15144 or less, or use a larger instance type"
    )


def test_bad_fargate_size(edit_config: EditConfig) -> None:
    config = edit_config(DEV, "cpu = 1024\nmemory_mib = 2048", "cpu = 1024\nmemory_mib = 1000")
    assert error_for(config) == (
        "ecs.services.api_server.memory_mib = 1000: Fargate does not offer this memory with 1024 CPU units. "
        "Fix: use 2048 to 8192 in steps of 1024"
    )


def test_ecs_route_without_table(edit_config: EditConfig) -> None:
    text = (edit_config(DEV, "", "") / DEV).read_text()
    config = edit_config(DEV, text[text.index("# The self-managed route") :], "")
    assert error_for(config).startswith('ecs = (missing): routes include "ecs" but there is no [ecs] table')


def test_image_tag_that_ecr_refuses(edit_config: EditConfig) -> None:
    config = edit_config(DEV, 'tag = "2.10-alpine"', 'tag = "2.10 alpine"')
    assert error_for(config).startswith("ecs.services.nats.tag = '2.10 alpine': String should match pattern")


def test_service_without_port(edit_config: EditConfig) -> None:
    config = edit_config(DEV, "port = 4222\n", "")
    assert error_for(config) == (
        "ecs.services.nats.port = (missing): this service needs the port it serves on. Fix: add `port = ...` to "
        "[ecs.services.nats] (from Cartesia's bundle)"
    )


@pytest.mark.parametrize(
    ("name", "part"),
    [
        ("API_TOKEN", "TOKEN"),
        ("CARTESIA_API_KEY", "KEY"),
        ("DB_PASSWORD", "PASSWORD"),
        ("AWS_SECRET_ACCESS_KEY", "SECRET"),
        ("GOOGLE_APPLICATION_CREDENTIALS", "CREDENTIALS"),
        ("PRIVATE_KEY_PEM", "PRIVATE"),
        ("hfAuthToken", "AUTH"),
        ("api-key", "KEY"),
    ],
)
def test_secret_named_plain_variable(edit_config: EditConfig, name: str, part: str) -> None:
    config = edit_config(
        DEV, 'environment = { WORKER_REPLICAS = "1" }', f'environment = {{ {name} = "s3cr3t" }}'
    )
    message = error_for(config)
    assert message == (
        f"ecs.services.gpu_worker.environment.{name} = (value not shown): named like a secret ({part}), but a "
        "plain variable is stored in the task definition, readable by anyone who may describe it. Fix: keep the "
        f'value in Secrets Manager and write secrets = {{ {name} = "<name in [ecs.secrets]>" }} in '
        "[ecs.services.gpu_worker] instead; or rename it if it is not a secret"
    )
    assert "s3cr3t" not in message


@pytest.mark.parametrize(
    "name", ["WORKER_REPLICAS", "KEYBOARD_LAYOUT", "MONKEY_PATCH", "TOKENIZER_PATH", "AUTHOR", "LOG_LEVEL"]
)
def test_setting_named_plain_variable(edit_config: EditConfig, name: str) -> None:
    config = edit_config(DEV, 'environment = { WORKER_REPLICAS = "1" }', f'environment = {{ {name} = "1" }}')
    assert load_settings(config, "dev").environment.ecs is not None
