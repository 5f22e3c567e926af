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
        "ecs.instance_type = 'p5.48xlarge': not a one-GPU instance type of a family the ECS route supports (g6, g6e, g7e). "
        "Fix: use one of g6.2xlarge, g6.4xlarge, g6.xlarge, g6e.2xlarge, g6e.xlarge, g7e.2xlarge, g7e.4xlarge, or describe it in "
        "config/instance_types.toml"
    )


def test_sagemaker_type_on_ecs(edit_config: EditConfig) -> None:
    config = edit_config(DEV, 'instance_type = "g6e.xlarge"', 'instance_type = "ml.g6e.xlarge"')
    assert error_for(config).startswith("ecs.instance_type = 'ml.g6e.xlarge': not a one-GPU instance type")


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


def test_one_nats_server(edit_config: EditConfig) -> None:
    config = edit_config(DEV, "nats_tasks = 3", "nats_tasks = 1")
    assert error_for(config) == "ecs.nats_tasks = 1: fewer than 2 NATS servers. Fix: set ecs.nats_tasks to 3"


@pytest.mark.parametrize("servers", [4, 5])
def test_more_nats_servers_than_one_dns_seed_keeps_joined(edit_config: EditConfig, servers: int) -> None:
    config = edit_config(DEV, "nats_tasks = 3", f"nats_tasks = {servers}")
    assert error_for(config) == (
        f"ecs.nats_tasks = {servers}: more than 3 NATS servers dialling each other through one DNS name can stay "
        "split for good (nats-server drops a route that resolves only to itself), cutting API servers off from "
        "workers. Fix: set ecs.nats_tasks to 3"
    )


def test_nats_servers_that_form_no_cluster(edit_config: EditConfig) -> None:
    start = '\ncommand = ["--cluster_name"'
    text = (edit_config(DEV, "", "") / DEV).read_text()
    line = text[text.index(start) : text.index("\n", text.index(start) + 1)]
    config = edit_config(DEV, line, "")
    assert error_for(config) == (
        "ecs.services.nats.command = []: 3 NATS servers that do not form a cluster. Fix: set command = "
        '["--cluster_name", "sonic", "--cluster", "nats://0.0.0.0:6222", "--routes", "nats://nats.sonic.internal:6222"]'
    )


# [ecs.api]: TLS on the load balancer, on by default outside dev.
CA = "arn:aws:acm-pca:us-east-2:210987654321:certificate-authority/0b4f6e3a-1c2d-4e5f-8a9b-0c1d2e3f4a5b"
CERT = "arn:aws:acm:us-east-2:210987654321:certificate/5e6f7a8b-9c0d-4e1f-a2b3-c4d5e6f7a8b9"


def stage_config(edit_config: EditConfig, api_table: str, *, canary: bool = False) -> Path:
    """config/ with environment `stage`: dev's ECS route outside dev (an account, an on-call address), with
    `api_table` as its [ecs.api] table, and the canary off unless `canary`."""
    text = (edit_config(DEV, "", "") / DEV).read_text()
    assert "# enabled = true" in text
    text = text.replace("# enabled = true", f"enabled = {str(canary).lower()}", 1)
    start, end = text.index("[ecs.api]"), text.index("[ecs.secrets]")
    text = 'account = "210987654321"\n' + text[:start] + api_table + "\n" + text[end:]
    text = text.replace("[sagemaker.alarms]\n", '[sagemaker.alarms]\nemail = ["oncall@sonic.test"]\n')
    text = text.replace("[ecs.secrets]\n", '[ecs.alarms]\nemail = ["oncall@sonic.test"]\n\n[ecs.secrets]\n')
    config = edit_config(DEV, "", "")
    (config / "environments/stage.toml").write_text(text)
    return config


def stage_error(edit_config: EditConfig, api_table: str) -> str:
    with pytest.raises(ConfigError) as caught:
        load_settings(stage_config(edit_config, api_table), "stage")
    return str(caught.value).split(": ", 1)[1]


def test_outside_dev_the_ecs_route_needs_a_certificate_source(edit_config: EditConfig) -> None:
    assert stage_error(edit_config, "") == (
        "ecs.api.certificate_arn = (missing): TLS is on by default outside dev, and the listener has no "
        'certificate source. Fix: set certificate_arn = "arn:aws:acm:us-east-2:<account>:certificate/<id>" '
        '(imported into or issued by ACM in us-east-2), or private_ca_arn = "arn:aws:acm-pca:us-east-2:'
        '<account>:certificate-authority/<id>" and the stack has ACM issue one; or, to serve ws:// in clear '
        "inside the VPC on purpose, `tls = false` and `allow_plaintext_outside_dev = true` under [ecs.api]"
    )


def test_outside_dev_plain_text_needs_the_deliberate_setting(edit_config: EditConfig) -> None:
    """dev's [ecs.api] block (tls = false) copied into another environment is refused."""
    assert stage_error(edit_config, "[ecs.api]\ntls = false\n").startswith(
        "ecs.api.tls = False: outside the default environment (dev) a plain listener (ws://) would carry the "
        "API key, transcripts and audio in clear inside the VPC. Fix: remove tls = false and set domain_name "
        'and certificate_arn = "arn:aws:acm:us-east-2:<account>:certificate/<id>"'
    )
    assert stage_error(edit_config, "[ecs.api]\ntls = false\n").endswith(
        "or, to accept plain text here on purpose, add allow_plaintext_outside_dev = true under [ecs.api]"
    )


@pytest.mark.parametrize(
    ("api_table", "problem"),
    [
        (
            f'[ecs.api]\nprivate_ca_arn = "{CA}"\ndomain_name = "sonic.stage.internal"\n',
            "TLS is on here, so it accepts nothing",
        ),
        ("[ecs.api]\ntls = true\n", "TLS is on here, so it accepts nothing"),
    ],
)
def test_the_plaintext_setting_with_tls_on_is_refused(
    edit_config: EditConfig, api_table: str, problem: str
) -> None:
    table = api_table + "allow_plaintext_outside_dev = true\n"
    assert stage_error(edit_config, table).startswith(
        f"ecs.api.allow_plaintext_outside_dev = True: {problem}. Fix: remove it"
    )


def test_the_plaintext_setting_in_dev_is_refused(edit_config: EditConfig) -> None:
    config = edit_config(DEV, "tls = false\n", "tls = false\nallow_plaintext_outside_dev = true\n")
    with pytest.raises(ConfigError) as caught:
        load_settings(config, "dev")
    assert str(caught.value).split(": ", 1)[1] == (
        "ecs.api.allow_plaintext_outside_dev = True: the default environment (dev) is plain unless tls = true: "
        "it accepts nothing. Fix: remove it"
    )


def test_tls_needs_the_name_agents_dial(edit_config: EditConfig) -> None:
    assert stage_error(edit_config, f'[ecs.api]\nprivate_ca_arn = "{CA}"\n').startswith(
        "ecs.api.domain_name = (missing): TLS is on by default outside dev: agents check the certificate "
        "against the host they dial"
    )


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("certificate_arn", CERT + "\\n", "holds the control character '\\n'"),  # a pasted newline
        (
            "certificate_arn",
            CERT.replace("us-east-2", "eu-west-1"),
            "not an ACM certificate ARN in us-east-2",
        ),
        ("certificate_arn", CERT.replace(":aws:", ":aws-cn:"), "not an ACM certificate ARN in us-east-2"),
        ("certificate_arn", CA, "not an ACM certificate ARN in us-east-2"),
        ("private_ca_arn", CA + "\\n", "holds the control character '\\n'"),
        ("private_ca_arn", CERT, "not an AWS Private CA ARN in us-east-2"),
        ("private_ca_arn", CA.replace("acm-pca", "acm"), "not an AWS Private CA ARN in us-east-2"),
    ],
)
def test_a_bad_arn_is_refused(edit_config: EditConfig, field: str, value: str, problem: str) -> None:
    table = f'[ecs.api]\n{field} = "{value}"\ndomain_name = "sonic.stage.internal"\n'
    shown = value.replace("\\n", "\n")
    assert stage_error(edit_config, table).startswith(f"ecs.api.{field} = {shown!r}: {problem}")


def test_one_certificate_source_only(edit_config: EditConfig) -> None:
    table = f'[ecs.api]\ncertificate_arn = "{CERT}"\nprivate_ca_arn = "{CA}"\ndomain_name = "a.internal"\n'
    assert "both certificate_arn and private_ca_arn are set" in stage_error(edit_config, table)


def test_a_domain_name_that_is_not_one(edit_config: EditConfig) -> None:
    table = f'[ecs.api]\nprivate_ca_arn = "{CA}"\ndomain_name = "https://sonic.internal"\n'
    assert stage_error(edit_config, table).startswith(
        "ecs.api.domain_name = 'https://sonic.internal': not a DNS name"
    )


def test_a_drain_longer_than_the_tls_idle_timeout(edit_config: EditConfig) -> None:
    table = f'[ecs.api]\nprivate_ca_arn = "{CA}"\ndomain_name = "sonic.stage.internal"\n'
    text = (
        edit_config(DEV, "deregistration_delay_s = 300", "deregistration_delay_s = 600") / DEV
    ).read_text()
    assert "deregistration_delay_s = 600" in text
    assert stage_error(edit_config, table).startswith(
        "ecs.deregistration_delay_s = 600: TLS is on by default outside dev, and a TLS listener's idle "
        "timeout is fixed at 350 s"
    )


def test_outside_dev_tls_is_on_unless_turned_off_explicitly(edit_config: EditConfig) -> None:
    table = "[ecs.api]\ntls = false\nallow_plaintext_outside_dev = true\n"
    settings = load_settings(stage_config(edit_config, table), "stage")
    assert (settings.ecs_tls, settings.ecs_listener_port, settings.ecs_deletion_protection) == (
        False,
        80,
        True,
    )
    assert settings.ecs_plaintext_accepted_by == "ecs.api.allow_plaintext_outside_dev = true in stage"
    table = f'[ecs.api]\nprivate_ca_arn = "{CA}"\ndomain_name = "sonic.stage.internal"\n'
    settings = load_settings(stage_config(edit_config, table), "stage")
    assert (settings.ecs_tls, settings.ecs_listener_port, settings.ecs_deletion_protection) == (
        True,
        443,
        True,
    )


def test_dev_ships_with_tls_off_and_says_so(edit_config: EditConfig) -> None:
    text = (edit_config(DEV, "", "") / DEV).read_text()
    table = text[text.index("[ecs.api]") : text.index("[ecs.secrets]")]
    assert "tls = false" in table and "in clear" in table
    settings = load_settings(edit_config(DEV, "", ""), "dev")
    assert (settings.ecs_tls, settings.ecs_listener_port, settings.ecs_deletion_protection) == (
        False,
        80,
        False,
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
    key = f'"{name}"' if "-" in name else name  # TOML quotes a key with a hyphen in it, as toml_path does
    assert message == (
        f"ecs.services.gpu_worker.environment.{key} = (value not shown): named like a secret ({part}), but a "
        "plain variable is stored in the task definition, readable by anyone who may describe it. Fix: keep the "
        f'value in Secrets Manager and write secrets = {{ {name} = "<name in [ecs.secrets]>" }} in '
        f'[ecs.services.gpu_worker] instead; or, if it holds no secret, not_secrets = ["{name}"]'
    )
    assert "s3cr3t" not in message


def test_a_secret_looking_name_declared_no_secret_is_kept_plain(edit_config: EditConfig) -> None:
    config = edit_config(
        DEV,
        'environment = { WORKER_REPLICAS = "1" }',
        'environment = { AUTH_ENABLED = "false" }\nnot_secrets = ["AUTH_ENABLED"]',
    )
    assert load_settings(config, "dev").environment.ecs.services["gpu_worker"].not_secrets == ["AUTH_ENABLED"]  # type: ignore[union-attr]


def test_not_secrets_names_a_variable_of_the_environment(edit_config: EditConfig) -> None:
    config = edit_config(
        DEV,
        'environment = { WORKER_REPLICAS = "1" }',
        'environment = { WORKER_REPLICAS = "1" }\nnot_secrets = ["AUTH"]',
    )
    assert error_for(config) == (
        "ecs.services.gpu_worker.not_secrets = 'AUTH': not a variable of this service's environment. Fix: remove it "
        "from not_secrets, or add it to environment in [ecs.services.gpu_worker]"
    )


@pytest.mark.parametrize(
    "name", ["WORKER_REPLICAS", "KEYBOARD_LAYOUT", "MONKEY_PATCH", "TOKENIZER_PATH", "AUTHOR", "LOG_LEVEL"]
)
def test_setting_named_plain_variable(edit_config: EditConfig, name: str) -> None:
    config = edit_config(DEV, 'environment = { WORKER_REPLICAS = "1" }', f'environment = {{ {name} = "1" }}')
    assert load_settings(config, "dev").environment.ecs is not None


NATS_COMMAND = '["--cluster_name", "sonic", "--cluster", "nats://0.0.0.0:6222", "--routes", "nats://nats.sonic.internal:6222"]'


def test_nats_routes_on_another_port_than_the_security_group_opens(edit_config: EditConfig) -> None:
    config = edit_config(DEV, '"nats://0.0.0.0:6222"', '"nats://0.0.0.0:7222"')
    assert error_for(config).startswith(
        "ecs.services.nats.command = ['--cluster_name', 'sonic', '--cluster', 'nats://0.0.0.0:7222', "
    )
    assert "--cluster nats://0.0.0.0:7222: the servers would listen for routes on another port than 6222" in (
        error_for(config)
    )


def test_nats_routes_to_another_host(edit_config: EditConfig) -> None:
    config = edit_config(
        DEV, '"--routes", "nats://nats.sonic.internal:6222"', '"--routes", "nats://nats:6222"'
    )
    assert error_for(config).endswith(
        "--routes nats://nats:6222: the servers would not dial each other through "
        f"nats://nats.sonic.internal:6222. Fix: set command = {NATS_COMMAND}"
    )


def test_nats_flags_in_gos_equals_form_are_read(edit_config: EditConfig) -> None:
    config = edit_config(
        DEV,
        NATS_COMMAND,
        '["-cluster_name=sonic", "--cluster=nats://0.0.0.0:6222", "-routes=nats://nats.sonic.internal:6222"]',
    )
    load_settings(config, "dev")


def test_canary_runs_too_rarely_for_its_first_audio_window(edit_config: EditConfig) -> None:
    config = edit_config(DEV, "every_minutes = 5", "every_minutes = 6")
    assert error_for(config) == (
        "canary.every_minutes = 6: a run every 6 minutes leaves fewer than 3 runs in the 15-minute window of the "
        "canary's first-audio p95 alarm. Fix: use at most 5"
    )


def test_the_canary_is_refused_with_a_private_ca_certificate(edit_config: EditConfig) -> None:
    """The probe task trusts only public CAs (docs/deploy.md): its runs could never verify the listener."""
    table = f'[ecs.api]\nprivate_ca_arn = "{CA}"\ndomain_name = "sonic.stage.internal"\n'
    with pytest.raises(ConfigError) as caught:
        load_settings(stage_config(edit_config, table, canary=True), "stage")
    assert str(caught.value).split(": ", 1)[1] == (
        "canary.enabled = True: the canary's probe task trusts only public CAs, and ecs.api.private_ca_arn "
        "issues the listener a certificate of a private one: every run would fail its TLS handshake. Fix: "
        "set enabled = false under [canary], or a publicly trusted ecs.api.certificate_arn instead of "
        "private_ca_arn"
    )
    public = f'[ecs.api]\ncertificate_arn = "{CERT}"\ndomain_name = "sonic.stage.internal"\n'
    assert load_settings(stage_config(edit_config, public, canary=True), "stage").canary_enabled


def test_a_dialler_without_the_variable_for_nats_is_refused(edit_config: EditConfig) -> None:
    config = edit_config(DEV, 'nats_url_variable = "REPLACE-ME_NATS_URL"\n', "")
    assert error_for(config) == (
        "ecs.services.api_server.nats_url_variable = (missing): api_server would not be told where NATS is: the "
        "image's default is not its Cloud Map name. Fix: add nats_url_variable = \"<the variable your bundle's "
        'api_server reads>" to [ecs.services.api_server] ("REPLACE-ME_NATS_URL" until you know it: make deploy '
        "refuses that)"
    )


def test_an_address_variable_on_a_service_that_cannot_dial_is_refused(edit_config: EditConfig) -> None:
    config = edit_config(
        DEV, 'tag = "2.10-alpine"\n', 'tag = "2.10-alpine"\nnats_url_variable = "NATS_URL"\n'
    )
    assert error_for(config).startswith(
        "ecs.services.nats.nats_url_variable = 'NATS_URL': only the API server and the GPU workers are given "
    )


def test_an_address_variable_also_set_in_the_environment_is_refused(edit_config: EditConfig) -> None:
    config = edit_config(
        DEV,
        'environment = { WORKER_REPLICAS = "1" }',
        'environment = { REPLACE-ME_NATS_URL = "nats://nats:4222" }',
    )
    assert error_for(config).endswith(
        "Fix: remove REPLACE-ME_NATS_URL from environment and secrets in [ecs.services.gpu_worker]"
    )


def test_one_variable_for_both_addresses_is_refused(edit_config: EditConfig) -> None:
    config = edit_config(
        DEV,
        'licence_proxy_url_variable = "REPLACE-ME_LICENSE_PROXY_URL"\n',
        'licence_proxy_url_variable = "REPLACE-ME_NATS_URL"\n',
    )
    assert "the same variable as nats_url_variable" in error_for(config)


def test_an_address_variable_is_a_variable_name(edit_config: EditConfig) -> None:
    config = edit_config(DEV, '"REPLACE-ME_NATS_URL"', '"NATS URL"')
    assert error_for(config).startswith("ecs.services.api_server.nats_url_variable = 'NATS URL': ")


def test_created_secrets_outside_the_bootstrap_policys_names(edit_config: EditConfig) -> None:
    edit_config(DEV, "copy_images = true", "copy_images = false")
    config = edit_config(
        DEV,
        'registry_credentials = "sonic/dev/cartesia-registry"',
        'registry_credentials = "team/cartesia-registry"\ncreate = true',
    )
    assert error_for(config) == (
        "ecs.secrets.registry_credentials = 'team/cartesia-registry': the stack creates this secret "
        "(create = true), and `make bootstrap`'s execution policy lets CloudFormation manage only secrets "
        'whose names start with sonic/. Fix: name it "sonic/<env>/...", or create it yourself and set create = false'
    )
