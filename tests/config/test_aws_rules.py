"""What AWS would refuse at deploy, refused at load time: one example per rule, each one line naming the
field, the value and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from sonic_deploy.config import ConfigError, load_settings
from tests.conftest import EditConfig

DEV = "environments/dev.toml"
TAGS = '[tags]\nproject = "sonic-deploy"\nenvironment = "dev"\n'


def error_for(config_dir: Path, env: str = "dev") -> str:
    """The message without its file path; asserts it is one line of printable text."""
    with pytest.raises(ConfigError) as caught:
        load_settings(config_dir, env)
    message = str(caught.value)
    assert message.isprintable(), message
    assert ". Fix: " in message
    return message.split(": ", 1)[1]


def loads(config_dir: Path) -> None:
    load_settings(config_dir, "dev")


# ---------------------------------------------------------------------------------------------- tags ----


def with_tags(edit_config: EditConfig, lines: str) -> Path:
    return edit_config(DEV, TAGS, f"[tags]\n{lines}\n")


@pytest.mark.parametrize(
    ("line", "start"),
    [
        ('"aws:team" = "x"', "tags.\"aws:team\" = 'aws:team': the key: starts with aws:"),
        ('"AWS:team" = "x"', "tags.\"AWS:team\" = 'AWS:team': the key: starts with aws:"),
        ('team = "aws:x"', "tags.team = 'aws:x': starts with aws:"),
        (f'"{"k" * 129}" = "x"', "tags.kkkk"),
        (f'team = "{"v" * 257}"', "tags.team = 'vvvv"),
        ('team = "a#b"', "tags.team = 'a#b': '#' is not a character AWS takes in a tag"),
        ('"a,b" = "x"', "tags.\"a,b\" = 'a,b': the key: ',' is not a character AWS takes in a tag"),
        ('"" = "x"', "tags.\"\" = '': the key: an empty key"),
    ],
)
def test_a_tag_aws_refuses(edit_config: EditConfig, line: str, start: str) -> None:
    assert error_for(with_tags(edit_config, line)).startswith(start)


@pytest.mark.parametrize(("key", "field"), [("team", "tags.team"), ("cost-centre", 'tags."cost-centre"')])
def test_a_tag_is_spelt_the_same_by_schema_and_rules(edit_config: EditConfig, key: str, field: str) -> None:
    """A control character is refused by the schema, a '#' by the rules: the field reads the same."""
    fields = []
    with pytest.raises(ConfigError) as caught:
        loads(with_tags(edit_config, f'"{key}" = "a\\u0007b"'))
    fields.append(caught.value.field)
    with pytest.raises(ConfigError) as caught:
        loads(edit_config(DEV, "a\\u0007b", "a#b"))
    fields.append(caught.value.field)
    assert fields == [field, field]


def test_tags_aws_takes(edit_config: EditConfig) -> None:
    """Letters of any script, digits, spaces and + - = . _ : / @."""
    loads(with_tags(edit_config, '"cost-centre:owner/é" = "Équipe voix 2 + ops@x=1"\n"名前" = "値"'))


@pytest.mark.parametrize("tags", ['project = ""', 'project = "sonic-deploy"\nenvironment = ""'])
def test_an_empty_tag_value_is_refused(edit_config: EditConfig, tags: str) -> None:
    """CloudFormation's AWS::CloudWatch::Alarm Tag takes no empty value, and every alarm carries the tags: the
    synth would fail with a validation error per alarm, dashboard and repository."""
    message = error_for(with_tags(edit_config, tags))
    assert "Fix: write a value" in message and "\n" not in message
    assert message.startswith("tags.") and " = '': an empty value: CloudWatch alarms" in message, message


def test_too_many_tags(edit_config: EditConfig) -> None:
    lines = "\n".join(f'tag{n} = "v"' for n in range(48))
    assert error_for(with_tags(edit_config, lines)).startswith(
        "tags = '(48 tags)': more than 47: with the 3 the stacks add to some resources they would pass AWS's 50"
    )
    loads(edit_config(DEV, 'tag47 = "v"\n', ""))


# -------------------------------------------------------------------------------- secrets and images ----


@pytest.mark.parametrize(
    "name",
    ["", "sonic dev key", "arn:aws:secretsmanager:us-east-2:210987654321:secret:x", "ключ", "k" * 513],
)
def test_a_secret_name_secrets_manager_refuses(edit_config: EditConfig, name: str) -> None:
    config = edit_config(DEV, 'api_key = "sonic/dev/cartesia-api-key"', f'api_key = "{name}"')
    assert error_for(config).startswith(f"ecs.secrets.api_key = {name[:160]!r}"[:40])
    assert "not a Secrets Manager secret name" in error_for(config)


@pytest.mark.parametrize(
    "source",
    [
        "public.ecr.aws/docker/library/nats:2.10",  # a tag in the name
        "public.ecr.aws/docker/library/nats@sha256:" + "a" * 64,
        "public.ecr.aws/Docker/library/nats",  # upper case in the path
        "public.ecr.aws//nats",
        "public.ecr.aws/docker/library/nats/",
        "-registry.example.com/nats",
        "public.ecr.aws/" + "n" * 250,
        "",
        "Myregistry/api-server",  # no '.', ':' or localhost: a path component, so lower case
        "Team/nats",
        "[::1]:5000/nats",  # IPv6 registries stay refused
    ],
)
def test_an_image_name_a_registry_refuses(edit_config: EditConfig, source: str) -> None:
    config = edit_config(DEV, 'source = "public.ecr.aws/docker/library/nats"', f'source = "{source}"')
    message = error_for(config)
    assert message.startswith("ecs.services.nats.source = ")
    assert "not an image name a registry takes" in message


@pytest.mark.parametrize(
    "source",
    [
        "nats",
        "localhost:5000/team/nats",
        "localhost/nats",
        "myregistry/api-server",  # a Docker Hub namespace
        "Registry:5000/nats",  # a ':' makes it a host, which may be upper case
        "REPLACE-ME.pkg.dev/a/b",
        "registry.example.com/a__b/c-d.e_f",
    ],
)
def test_image_names_a_registry_takes(edit_config: EditConfig, source: str) -> None:
    loads(edit_config(DEV, 'source = "public.ecr.aws/docker/library/nats"', f'source = "{source}"'))


# ------------------------------------------------------------------------------------------- numbers ----


@pytest.mark.parametrize(
    ("old", "new", "start"),
    [
        (  # the field's own range comes first
            "max_workers = 6",
            "max_workers = 2147483648",
            "ecs.max_workers = 2147483648: Input should be less than or equal to 1000",
        ),
        (  # a field with no range of its own: CloudFormation's int32
            "flow_log_retention_days = 30",
            "flow_log_retention_days = 2147483648",
            "network.flow_log_retention_days = 2147483648: beyond what any setting here takes (CloudFormation's "
            "integers stop at 2147483647)",
        ),
        (
            "max_workers = 6",
            "max_workers = 5000",
            "ecs.max_workers = 5000: Input should be less than or equal",
        ),
        (
            "cpu = 3072",
            "cpu = -9223372036854775808",
            "ecs.services.gpu_worker.cpu = -9223372036854775808: Input should be greater than or equal to 128",
        ),
        (
            "model_latency_p95_ms = 500",
            "model_latency_p95_ms = 1e308",
            "sagemaker.alarms.model_latency_p95_ms = ",
        ),
        (
            "model_latency_p95_ms = 500",
            "model_latency_p95_ms = 5e5",
            "sagemaker.alarms.model_latency_p95_ms = ",
        ),
    ],
)
def test_an_absurd_number(edit_config: EditConfig, old: str, new: str, start: str) -> None:
    assert error_for(edit_config(DEV, old, new)).startswith(start)


@pytest.mark.parametrize(
    ("old", "new", "start"),
    [
        ("min_instances = 2", 'min_instances = "2"', "sagemaker.min_instances = '2': a quoted string"),
        ("max_workers = 6", 'max_workers = "2147483648"', "ecs.max_workers = '2147483648': a quoted string"),
        (
            "model_latency_p95_ms = 500",
            'model_latency_p95_ms = "500"',
            "sagemaker.alarms.model_latency_p95_ms",
        ),
    ],
)
def test_a_number_written_as_a_string(edit_config: EditConfig, old: str, new: str, start: str) -> None:
    """pydantic's lax mode would read "2" as 2 and skip the int32 check: a number field takes a number."""
    message = error_for(edit_config(DEV, old, new))
    assert message.startswith(start), message
    assert "Fix: write the number without quotes" in message


def test_a_number_written_as_a_string_in_a_table(edit_config: EditConfig) -> None:
    config = edit_config("instance_types.toml", "memory_gib = 48", 'memory_gib = "48"')
    with pytest.raises(ConfigError) as caught:
        loads(config)
    assert caught.value.field == "gpus.L40S.memory_gib"


def test_an_absurd_number_in_the_catalogue(edit_config: EditConfig) -> None:
    config = edit_config("instance_types.toml", "memory_gib = 48", "memory_gib = 1e308")
    with pytest.raises(ConfigError) as caught:
        loads(config)
    assert caught.value.field == "gpus.L40S.memory_gib" and "instance_types.toml" in caught.value.file


def test_a_digit_that_is_not_ascii(edit_config: EditConfig) -> None:
    config = edit_config(
        DEV, 'cartesia_version = "2025-04-16"', 'cartesia_version = "\\uff12\\uff10\\uff12\\uff15-04-16"'
    )
    assert error_for(config).startswith("ecs.cartesia_version = ")


# --------------------------------------------------------------------------------------------- CIDRs ----


@pytest.mark.parametrize(
    ("cidr", "problem"),
    [
        ("10.60.0.0", "not an IPv4 network in CIDR notation"),
        ("10.60/16", "not an IPv4 network in CIDR notation"),
        ("10.60.0.0/16 ", "not an IPv4 network in CIDR notation"),
        ("300.60.0.0/16", "not an IPv4 network ("),
        ("10.60.0.1/16", 'host bits set: the range /16 starts at 10.60.0.0. Fix: write "10.60.0.0/16"'),
        ("10.0.0.0/8", "each route's VPC takes half of this range, and a VPC must be a /16 to a /28"),
    ],
)
def test_a_vpc_range_aws_refuses(edit_config: EditConfig, cidr: str, problem: str) -> None:
    message = error_for(edit_config(DEV, 'cidr = "10.60.0.0/16"', f'cidr = "{cidr}"'))
    assert message.startswith(f"network.cidr = {cidr!r}: ") and problem in message


def test_a_pinned_route_range_outside_vpc_sizes(edit_config: EditConfig) -> None:
    config = edit_config(
        DEV, 'cidr = "10.60.0.0/16"', 'cidr = "10.60.0.0/16"\nroute_cidrs = { ecs = "10.0.0.0/12" }'
    )
    assert error_for(config).startswith(
        "network.route_cidrs.ecs = '10.0.0.0/12': a VPC's range must be a /16 to a /28"
    )


def test_an_existing_vpc_range_that_is_not_one(edit_config: EditConfig) -> None:
    """Unchecked before: the stacks passed it to a construct, which failed with a jsii traceback."""
    existing = (
        '\n[network.existing_vpc]\nvpc_id = "vpc-0123456789abcdef0"\nvpc_cidr = "10.0.0.0/33"\n'
        'availability_zones = ["us-east-2a", "us-east-2b"]\n'
        'private_subnet_ids = ["subnet-0aaaaaaaaaaaaaaa0", "subnet-0bbbbbbbbbbbbbbb0"]\n'
        'private_route_table_ids = ["rtb-0aaaaaaaaaaaaaaa0", "rtb-0bbbbbbbbbbbbbbb0"]\n'
    )
    config = edit_config(DEV, "flow_log_retention_days = 30\n", "flow_log_retention_days = 30\n" + existing)
    assert error_for(config).startswith("network.existing_vpc.vpc_cidr = '10.0.0.0/33': not an IPv4 network")
    config = edit_config(DEV, 'vpc_id = "vpc-0123456789abcdef0"', 'vpc_id = "my-vpc"')
    assert error_for(config).startswith("network.existing_vpc.vpc_id = 'my-vpc': String should match pattern")


# ---------------------------------------------------------------------------------- Regions and AZs ----


def test_a_region_that_does_not_exist(edit_config: EditConfig) -> None:
    config = edit_config(DEV, 'region = "us-east-2"', 'region = "us-north-7"')
    message = error_for(config)
    assert message.startswith("region = 'us-north-7': not a Region AWS has")
    assert "python -m sonic_deploy.config.zones --refresh" in message


def test_an_az_the_region_does_not_have(edit_config: EditConfig) -> None:
    config = edit_config(DEV, '["us-east-2a", "us-east-2b"]', '["us-east-2a", "us-east-2z"]')
    assert error_for(config).startswith(
        "network.availability_zones = 'us-east-2z': not an Availability Zone of us-east-2. Fix: use us-east-2a, "
        "us-east-2b, us-east-2c"
    )


@pytest.mark.parametrize(
    ("region", "zones"),
    [
        ("ap-northeast-1", '["ap-northeast-1a", "ap-northeast-1b"]'),  # b: older accounts only
        ("eusc-de-east-1", '["eusc-de-east-1a", "eusc-de-east-1b"]'),  # the AWS European Sovereign Cloud
    ],
)
def test_a_region_and_zones_some_accounts_have(edit_config: EditConfig, region: str, zones: str) -> None:
    config = edit_config(DEV, 'region = "us-east-2"', f'region = "{region}"')
    config = edit_config(DEV, '["us-east-2a", "us-east-2b"]', zones)
    with pytest.raises(
        ConfigError
    ) as caught:  # dev's ECS zone is still us-east-2a: the region and AZs passed
        loads(config)
    assert caught.value.field == "ecs.availability_zone", str(caught.value)


@pytest.mark.parametrize(
    ("region", "problem"), [("mars-north-1", "not a Region AWS has"), ("mars-1", "not an AWS Region name")]
)
def test_a_model_package_region_that_does_not_exist(
    edit_config: EditConfig, region: str, problem: str
) -> None:
    """The config's one Region rule (check_region), for the Regions model_packages.toml lists too."""
    config = edit_config(
        "model_packages.toml", '[versions."sonic-3"]\n', f'[versions."sonic-3"]\n{region} = "x"\n'
    )
    assert error_for(config).startswith(f'versions."sonic-3"."{region}" = \'{region}\': {problem}')


# ------------------------------------------------------------------------------------ free text ----


@pytest.mark.parametrize(
    ("text", "syntax"),
    [
        ("{{resolve:secretsmanager:prod/db}}", "{{resolve:"),
        ("${AWS::AccountId}", "${AWS::"),
        ("x-Fn::GetAtt", "Fn::"),
        ("${Token[TOKEN.1]}", "${Token["),
    ],
)
def test_cloudformation_syntax_in_a_string(edit_config: EditConfig, text: str, syntax: str) -> None:
    config = edit_config(DEV, 'project = "sonic-deploy"', f'project = "{text}"')
    assert error_for(config).startswith(
        f"tags.project = {text!r}: holds {syntax!r}, which CloudFormation or CDK would resolve instead of "
        "keeping as text. Fix: write plain text"
    )
    config = edit_config(DEV, f'project = "{text}"', 'project = "sonic-deploy"')
    config = edit_config(DEV, 'WORKER_REPLICAS = "1"', f'WORKER_REPLICAS = "{text}"')
    assert error_for(config).startswith(f"ecs.services.gpu_worker.environment.WORKER_REPLICAS = {text!r}: ")


@pytest.mark.parametrize(
    ("escape", "shown"), [("\\u001b[31m", "\\x1b[31m"), ("\\u2028", "\\u2028"), ("\\r", "\\r")]
)
def test_a_control_character_in_a_string(edit_config: EditConfig, escape: str, shown: str) -> None:
    config = edit_config(DEV, 'api_key = "sonic/dev/cartesia-api-key"', f'api_key = "sonic/dev{escape}key"')
    assert error_for(config).startswith(
        f"ecs.secrets.api_key = 'sonic/dev{shown}key': holds the control character"
    )


def test_a_newline_in_a_shell_command_is_kept(edit_config: EditConfig) -> None:
    config = edit_config(
        DEV, '"curl -sf http://localhost:5000/status || exit 1"', '"set -e\\ncurl -sf x\\texit 1"'
    )
    loads(config)
    config = edit_config(DEV, 'WORKER_REPLICAS = "1"', '"WORKER\\nREPLICAS" = "1"')  # but not in a name
    assert "holds the control character" in error_for(config)


def test_a_relative_container_path(edit_config: EditConfig) -> None:
    config = edit_config(
        DEV, 'licence_mode = "connected"', 'licence_mode = "connected"\nlicence_data_path = "data"'
    )
    assert error_for(config).startswith(
        "ecs.licence_data_path = 'data': not an absolute path inside the container"
    )
    config = edit_config(DEV, 'licence_data_path = "data"', 'licence_data_path = "/data/../etc"')
    assert error_for(config).startswith("ecs.licence_data_path = '/data/../etc'")


# ------------------------------------------------------------------------------- whole-file damage ----


def test_bytes_that_are_not_utf8(edit_config: EditConfig) -> None:
    config = edit_config(DEV, "", "")
    (config / DEV).write_bytes((config / DEV).read_bytes() + b'\nextra = "\xff\xfe"\n')
    message = error_for(config)
    assert message.startswith("(encoding) = '\\ufffd") or message.startswith("(encoding) = ")
    assert "not UTF-8 text: the bytes at line " in message


@pytest.mark.parametrize("nesting", [b"[" * 3000 + b"]" * 3000, b"{ a = " * 3000 + b"1" + b" }" * 3000])
def test_nesting_past_the_recursion_limit(edit_config: EditConfig, nesting: bytes) -> None:
    config = edit_config(DEV, "", "")
    (config / DEV).write_bytes((config / DEV).read_bytes() + b"\ndeep = " + nesting + b"\n")
    assert error_for(config).startswith("(syntax) = (missing): arrays or inline tables nested too deeply")


def test_a_key_with_a_newline_is_shown_escaped(edit_config: EditConfig) -> None:
    config = edit_config(DEV, "[sagemaker.alarms]\n", '[sagemaker.alarms]\n"bad\\nkey" = 1\n')
    message = error_for(config)
    assert message.startswith(
        'sagemaker.alarms."bad\\nkey" = 1: unknown key. Fix: remove or rename it; known keys '
    )
    assert "known keys here: capacity_minutes, email, errors_4xx_per_5min," in message


def test_a_huge_value_is_cut_short(edit_config: EditConfig) -> None:
    config = edit_config(DEV, 'api_key = "sonic/dev/cartesia-api-key"', f'api_key = "{"x" * 5000}"')
    assert len(error_for(config)) < 600
