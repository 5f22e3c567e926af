"""The probe task in both stacks (its image, roles, bucket, security group, subnets and outputs) and the
canary schedule that runs it; nothing of the canary when it is off."""

from __future__ import annotations

import fnmatch
import json
import re
import shutil
from pathlib import Path
from typing import Any

import botocore.session
import pytest
from aws_cdk import App, IgnoreStrategy, Stack
from aws_cdk import aws_kms as kms
from aws_cdk.assertions import Template
from aws_cdk.aws_cloudwatch import Metric
from botocore.validate import validate_parameters

from sonic_deploy import cli
from sonic_deploy.changes.classify import classify
from sonic_deploy.config import Settings
from sonic_deploy.config.schema import CanaryConfig
from sonic_deploy.constructs.probe_canary import CANARY_OUT, FAILED_START_METRICS, ProbeCanary, canary_command
from sonic_deploy.constructs.probe_image import (
    CONTEXT,
    COPY_MEMORY_MIB,
    DOCKERFILE,
    REPOSITORY_ROOT,
    ProbeImage,
)
from sonic_deploy.constructs.probe_task import RUNNER_WRITES, TASK_WRITES
from sonic_deploy.in_vpc import protocol
from sonic_deploy.in_vpc.outputs import PROBE_OUTPUTS
from sonic_deploy.probe.canary_metrics import NAMESPACE
from tests.cdk_context import cli_context
from tests.conftest import CONFIG_DIR, EditConfig, resources_of, synthesize_from

ROUTES = ("sagemaker", "ecs")
# The shipped dev config's values (config/environments/dev.toml).
DEV_VPC_CIDRS = {"ecs": "10.60.128.0/17"}


@pytest.fixture(scope="module")
def canary_stacks(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Stack]:
    """dev with `[canary] enabled = true` and a voice: both stacks."""
    config = tmp_path_factory.mktemp("canary") / "config"
    shutil.copytree(CONFIG_DIR, config)
    dev = config / "environments/dev.toml"
    text = dev.read_text()
    assert "# enabled = true" in text
    dev.write_text(text.replace("# enabled = true", 'enabled = true\nvoice_id = "a0e99841-438c-4a64-b679"'))
    return dict(synthesize_from(config))


@pytest.fixture(scope="module")
def canary_on(canary_stacks: dict[str, Stack]) -> dict[str, Template]:
    return {route: Template.from_stack(stack) for route, stack in canary_stacks.items()}


@pytest.fixture(scope="module")
def templates(sagemaker_template: Template, ecs_template: Template) -> dict[str, Template]:
    return {"sagemaker": sagemaker_template, "ecs": ecs_template}


def _one(template: Template, type_name: str, prefix: str) -> tuple[str, dict[str, Any]]:
    (found,) = ((i, r) for i, r in resources_of(template, type_name).items() if i.startswith(prefix))
    return found


def _statement_list(template: Template, role_prefix: str) -> list[dict[str, Any]]:
    """The statements of the default policy of the role whose logical id starts with `role_prefix`."""
    role_id, _ = _one(template, "AWS::IAM::Role", role_prefix)
    (policy,) = (
        p
        for p in resources_of(template, "AWS::IAM::Policy").values()
        if p["Properties"]["Roles"] == [{"Ref": role_id}]
    )
    statements: list[dict[str, Any]] = policy["Properties"]["PolicyDocument"]["Statement"]
    return statements


def _statements(template: Template, role_prefix: str) -> dict[str, dict[str, Any]]:
    """The same, by Sid (each has one)."""
    statements = _statement_list(template, role_prefix)
    by_sid = {s["Sid"]: s for s in statements}
    assert len(by_sid) == len(statements)
    return by_sid


def _without_sid(statement: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in statement.items() if k != "Sid"}


def _ref(template: Template, type_name: str, prefix: str) -> dict[str, str]:
    return {"Ref": _one(template, type_name, prefix)[0]}


def _arn(template: Template, type_name: str, prefix: str) -> dict[str, Any]:
    return {"Fn::GetAtt": [_one(template, type_name, prefix)[0], "Arn"]}


# The task definition


@pytest.mark.parametrize("route", ROUTES)
def test_the_task_definition_is_fargate_linux_x86_with_a_read_only_root_and_a_writable_tmp(
    templates: dict[str, Template], route: str, dev_settings: Settings
) -> None:
    template = templates[route]
    _, task = _one(template, "AWS::ECS::TaskDefinition", "ProbeTask")
    props = task["Properties"]
    probe = dev_settings.environment.probe
    assert (props["Cpu"], props["Memory"]) == (str(probe.cpu), str(probe.memory_mib))
    assert props["RequiresCompatibilities"] == ["FARGATE"]
    assert props["NetworkMode"] == "awsvpc"
    assert props["RuntimePlatform"] == {"CpuArchitecture": "X86_64", "OperatingSystemFamily": "LINUX"}
    assert props["Volumes"] == [{"Name": "tmp"}]
    (container,) = props["ContainerDefinitions"]
    assert container["Name"] == "probe"
    assert container["ReadonlyRootFilesystem"] is True
    # An init process as PID 1 passes StopTask's SIGTERM on (the probe has its own handler too).
    assert container["LinuxParameters"] == {"Capabilities": {}, "InitProcessEnabled": True}
    assert container["MountPoints"] == [{"ContainerPath": "/tmp", "ReadOnly": False, "SourceVolume": "tmp"}]
    assert "Command" not in container  # the runner's and the canary's overrides say what to run
    assert "Environment" not in container
    assert container["LogConfiguration"]["Options"]["awslogs-group"] == _ref(
        template, "AWS::Logs::LogGroup", "ProbeLogs"
    )
    assert props["TaskRoleArn"] == _arn(template, "AWS::IAM::Role", "ProbeTaskRole")
    assert props["ExecutionRoleArn"] == _arn(template, "AWS::IAM::Role", "ProbeExecutionRole")


def _dockerfile() -> list[tuple[str, str]]:
    """The probe's Dockerfile as (INSTRUCTION, arguments), continuation lines joined, comments dropped."""
    text = (REPOSITORY_ROOT / DOCKERFILE).read_text()
    lines = [line for line in text.replace("\\\n", " ").splitlines() if line.strip()]
    return [
        (word.upper(), rest.strip())
        for word, _, rest in (line.strip().partition(" ") for line in lines)
        if not word.startswith("#")
    ]


@pytest.mark.parametrize("route", ROUTES)
def test_every_mounted_path_is_a_volume_of_the_image_made_writable_for_its_user_first(
    templates: dict[str, Template], route: str
) -> None:
    """An ECS bind mount is root's and 0755 unless the image declares its path a VOLUME, whose owner and mode
    it then takes (ECS Developer Guide, "Bind mounts"): each mount point's path is a VOLUME, and a RUN before
    it gives the directory to the image's USER, or makes it world-writable."""
    instructions = _dockerfile()
    (user,) = [arguments for word, arguments in instructions if word == "USER"]
    assert user == "10001"
    user_at = [word for word, _ in instructions].index("USER")
    (container,) = _one(templates[route], "AWS::ECS::TaskDefinition", "ProbeTask")[1]["Properties"][
        "ContainerDefinitions"
    ]
    for mount in container["MountPoints"]:
        path = mount["ContainerPath"]
        volumes = [i for i, (word, arguments) in enumerate(instructions) if word == "VOLUME"]
        declared = [i for i in volumes if path in json.loads(instructions[i][1])]
        assert declared, f"{path} is mounted but not a VOLUME of {DOCKERFILE}"
        before = [arguments for word, arguments in instructions[: declared[0]] if word == "RUN"]
        owned = any(re.search(rf"\bchown {user}(:\S+)? {re.escape(path)}(\s|$)", run) for run in before)
        world = any(re.search(rf"\bchmod 1?777 {re.escape(path)}(\s|$)", run) for run in before)
        assert owned or world, f"{path} is not made writable for uid {user} before its VOLUME line"
        assert declared[0] < user_at  # made as root, before the image drops to its user


@pytest.mark.parametrize("route", ROUTES)
def test_the_probe_logs_are_encrypted_and_expire_with_the_environments_retention(
    templates: dict[str, Template], route: str, dev_settings: Settings
) -> None:
    _, group = _one(templates[route], "AWS::Logs::LogGroup", "ProbeLogs")
    assert group["Properties"]["RetentionInDays"] == dev_settings.environment.log_retention_days
    assert group["Properties"]["KmsKeyId"] == _arn(templates[route], "AWS::KMS::Key", "EncryptionKey")


def test_only_the_ecs_probe_gets_the_api_key_from_secrets_manager(templates: dict[str, Template]) -> None:
    (ecs_container,) = _one(templates["ecs"], "AWS::ECS::TaskDefinition", "ProbeTask")[1]["Properties"][
        "ContainerDefinitions"
    ]
    (secret,) = ecs_container["Secrets"]
    assert secret["Name"] == "CARTESIA_API_KEY"
    assert "secret:sonic/dev/cartesia-api-key" in json.dumps(secret["ValueFrom"])
    reads = _statement_list(templates["ecs"], "ProbeExecutionRole")
    assert any("secretsmanager:GetSecretValue" in s["Action"] for s in reads)
    (sm_container,) = _one(templates["sagemaker"], "AWS::ECS::TaskDefinition", "ProbeTask")[1]["Properties"][
        "ContainerDefinitions"
    ]
    assert "Secrets" not in sm_container


# The task role, statement by statement


@pytest.mark.parametrize("route", ROUTES)
def test_the_task_role_may_use_its_runs_prefix_and_the_canary_namespace_only(
    templates: dict[str, Template], route: str
) -> None:
    template = templates[route]
    bucket = _arn(template, "AWS::S3::Bucket", "ProbeBucket")
    statements = _statements(template, "ProbeTaskRole")
    expected: dict[str, dict[str, Any]] = {
        "ReadItsRuns": {
            "Action": "s3:GetObject",
            "Effect": "Allow",
            "Resource": {"Fn::Join": ["", [bucket, "/runs/*"]]},
        },
        # Create only (If-None-Match: *): no task overwrites another's or another run's objects.
        "WriteItsResults": {
            "Action": "s3:PutObject",
            "Condition": {"Null": {"s3:if-none-match": "false"}},
            "Effect": "Allow",
            "Resource": [
                {"Fn::Join": ["", [bucket, f"/runs/*/{pattern}"]]} for pattern in sorted(protocol.TASK_KEYS)
            ],
        },
        # No s3:prefix condition: S3 checks ListBucket for a GetObject of a missing key (404, not 403),
        # where there is no prefix to match.
        "ListItsBucket": {"Action": "s3:ListBucket", "Effect": "Allow", "Resource": bucket},
        "EncryptItsRunsWithTheBucketKey": {
            "Action": ["kms:Decrypt", "kms:GenerateDataKey"],
            "Condition": {"StringEquals": {"kms:ViaService": "s3.us-east-2.amazonaws.com"}},
            "Effect": "Allow",
            "Resource": _arn(template, "AWS::KMS::Key", "EncryptionKey"),
        },
        "PublishCanaryMetrics": {
            "Action": "cloudwatch:PutMetricData",
            "Condition": {"StringEquals": {"cloudwatch:namespace": NAMESPACE}},
            "Effect": "Allow",
            "Resource": "*",
        },
    }
    if route == "sagemaker":
        expected["InvokeTheEndpoint"] = {
            "Action": ["sagemaker:InvokeEndpoint", "sagemaker:InvokeEndpointWithResponseStream"],
            "Effect": "Allow",
            "Resource": {"Ref": _one(template, "AWS::SageMaker::Endpoint", "Sonic")[0]},
        }
    assert {sid: _without_sid(s) for sid, s in statements.items()} == expected


# Every key each side of the protocol writes (its key builders), as a run's object key.
_RUN = protocol.RUNS_PREFIX + "20260101-000000-abcd/"
TASK_OBJECTS = [
    _RUN + key
    for key in (
        protocol.ready_key(3),
        protocol.samples_key(2, 3),
        protocol.part_key(2, 3, 7),
        protocol.stats_key(2, 3),
        protocol.failed_key(3),
    )
]
RUNNER_OBJECTS = [
    _RUN + key for key in (protocol.RUN, protocol.command_key(2), protocol.STOP, protocol.TRANSCRIPTS)
]


def _matches(key: str, patterns: tuple[str, ...]) -> bool:
    """IAM's `*` matches '/' as fnmatch's does."""
    return any(fnmatch.fnmatchcase(key, pattern) for pattern in patterns)


def test_the_writes_are_the_protocols_keys_under_each_run() -> None:
    assert tuple(f"runs/*/{pattern}" for pattern in protocol.TASK_KEYS) == TASK_WRITES
    assert tuple(f"runs/*/{pattern}" for pattern in protocol.RUNNER_KEYS) == RUNNER_WRITES


@pytest.mark.parametrize("key", TASK_OBJECTS)
def test_a_task_may_write_each_key_the_protocol_has_it_write(key: str) -> None:
    assert _matches(key, TASK_WRITES)
    assert not _matches(key, RUNNER_WRITES)


@pytest.mark.parametrize("key", RUNNER_OBJECTS)
def test_a_task_may_write_none_of_the_runners_keys(key: str) -> None:
    """A task that could write commands/ or stop.json could command or stop the others."""
    assert not _matches(key, TASK_WRITES)
    assert _matches(key, RUNNER_WRITES)


@pytest.mark.parametrize("route", ROUTES)
def test_the_s3_gateway_lets_through_the_tasks_and_the_runners_writes_to_the_probe_bucket(
    templates: dict[str, Template], route: str
) -> None:
    """An operator who runs --in-vpc from inside the VPC (a bastion, a CI runner) writes run.json, commands/,
    stop.json and transcripts.txt through the gateway too; the task role still writes only the task's."""
    template = templates[route]
    bucket = _arn(template, "AWS::S3::Bucket", "ProbeBucket")
    _, endpoint = _one(template, "AWS::EC2::VPCEndpoint", "NetworkS3Endpoint")
    statements = endpoint["Properties"]["PolicyDocument"]["Statement"]
    writes = [s for s in statements if "s3:PutObject" in json.dumps(s["Action"])]
    keys = [*protocol.TASK_KEYS, *protocol.RUNNER_KEYS]
    assert writes == [
        {
            "Action": "s3:PutObject",
            "Condition": {"StringEquals": {"aws:PrincipalAccount": {"Ref": "AWS::AccountId"}}},
            "Effect": "Allow",
            "Principal": {"AWS": "*"},
            "Resource": [{"Fn::Join": ["", [bucket, f"/runs/*/{pattern}"]]} for pattern in sorted(keys)],
            "Sid": "WriteTheProbeBucket",
        }
    ]
    for key in [*TASK_OBJECTS, *RUNNER_OBJECTS]:
        assert _matches(key, (*TASK_WRITES, *RUNNER_WRITES)), key


@pytest.mark.parametrize("route", ROUTES)
def test_the_execution_role_pulls_only_the_probe_repository_and_writes_only_its_logs(
    templates: dict[str, Template], route: str
) -> None:
    template = templates[route]
    statements = _statement_list(template, "ProbeExecutionRole")
    pulls = [s for s in statements if "ecr:BatchGetImage" in s["Action"]]
    assert [s["Resource"] for s in pulls] == [_arn(template, "AWS::ECR::Repository", "ProbeImageRepository")]
    logs = [s for s in statements if "logs:PutLogEvents" in s["Action"]]
    assert [s["Resource"] for s in logs] == [_arn(template, "AWS::Logs::LogGroup", "ProbeLogs")]
    wildcard = [s["Action"] for s in statements if s["Resource"] == "*"]
    assert wildcard == ["ecr:GetAuthorizationToken"]


# The image


@pytest.mark.parametrize("route", ROUTES)
def test_the_image_is_copied_into_a_repository_of_the_stacks_before_the_task_definition_names_it(
    templates: dict[str, Template], route: str
) -> None:
    template = templates[route]
    repository_id, repository = _one(template, "AWS::ECR::Repository", "ProbeImageRepository")
    props = repository["Properties"]
    # Mutable: a rolled-back deploy copies an existing tag again (cdklabs/cdk-ecr-deployment#207).
    assert props["ImageTagMutability"] == "MUTABLE"
    assert props["ImageScanningConfiguration"] == {"ScanOnPush": True}
    assert props["EncryptionConfiguration"]["KmsKey"] == _arn(template, "AWS::KMS::Key", "EncryptionKey")
    assert props["EmptyOnDelete"] is True
    assert repository["DeletionPolicy"] == "Delete"
    assert "LifecyclePolicyText" in props["LifecyclePolicy"]
    copy_id, copy = _one(template, "Custom::CDKECRDeployment", "ProbeImageCopy")
    source = json.dumps(copy["Properties"]["SrcImage"])
    assert "cdk-hnb659fds-container-assets-" in source  # the asset, as `cdk deploy` pushed it
    tag = source.rsplit(":", 1)[1].split('"')[0]
    assert len(tag) == 64  # the asset's hash
    destination = json.dumps(copy["Properties"]["DestImage"])
    assert f'{{"Ref": "{repository_id}"}}' in destination and destination.endswith(f':{tag}"]]}}')
    _, task = _one(template, "AWS::ECS::TaskDefinition", "ProbeTask")
    image = json.dumps(task["Properties"]["ContainerDefinitions"][0]["Image"])
    assert f'{{"Ref": "{repository_id}"}}' in image and tag in image  # never the asset repository
    assert "container-assets" not in image
    assert copy_id in task["DependsOn"]


@pytest.mark.parametrize("route", ROUTES)
def test_the_copy_may_pull_only_the_asset_and_push_only_into_the_probe_repository(
    templates: dict[str, Template], route: str
) -> None:
    template = templates[route]
    _, policy = _one(template, "AWS::IAM::Policy", "ProbeImageCopyPolicy")
    statements = {s["Sid"]: s for s in policy["Properties"]["PolicyDocument"]["Statement"]}
    assert set(statements) == {
        "PullTheBuiltAsset",
        "PushIntoTheProbeRepository",
        "WriteItsOwnLogs",
        "EcrLoginHasNoResourceLevelPermission",
    }
    assert "cdk-hnb659fds-container-assets-" in json.dumps(statements["PullTheBuiltAsset"]["Resource"])
    assert statements["PushIntoTheProbeRepository"]["Resource"] == _arn(
        template, "AWS::ECR::Repository", "ProbeImageRepository"
    )
    assert statements["EcrLoginHasNoResourceLevelPermission"]["Action"] == "ecr:GetAuthorizationToken"
    role_id, _ = _one(template, "AWS::IAM::Role", "ProbeImageCopyRole")
    # The library's own `*` statements are dropped: the role has only this policy.
    attached = [
        i
        for i, p in resources_of(template, "AWS::IAM::Policy").items()
        if {"Ref": role_id} in p["Properties"]["Roles"]
    ]
    assert attached == [_one(template, "AWS::IAM::Policy", "ProbeImageCopyPolicy")[0]]


def test_the_docker_context_holds_the_package_and_its_metadata_only(tmp_path: Path) -> None:
    """What `cdk deploy` would send to Docker: the staged asset folder of a synth."""
    app = App(outdir=str(tmp_path), context=cli_context())
    stack = Stack(app, "Context")
    ProbeImage(stack, "Image", key=kms.Key(stack, "Key"), copy_log_retention_days=30)
    assembly = Path(app.synth().directory)
    (staged,) = (p for p in assembly.glob("asset.*") if (p / "docker").is_dir())
    listed = {str(p.relative_to(staged)) for p in staged.rglob("*")}
    assert {"pyproject.toml", "README.md", "docker/probe/Dockerfile", "sonic_deploy/cli.py"} <= listed
    assert "sonic_deploy/turn/utterances" in listed  # the package data `pip install` ships
    tops = {name.split("/")[0] for name in listed}
    assert tops == {"pyproject.toml", "README.md", "docker", "sonic_deploy"}
    assert not [name for name in listed if "__pycache__" in name or name.endswith(".pyc")]
    assert {name for name in listed if name.startswith("docker/")} == {
        "docker/probe",
        "docker/probe/Dockerfile",
    }


@pytest.mark.parametrize(
    ("path", "staged"),
    [
        ("sonic_deploy/cli.py", True),
        ("sonic_deploy/turn/utterances/book-16k.wav", True),
        ("pyproject.toml", True),
        ("docker/probe/Dockerfile", True),
        ("sonic_deploy/probe/__pycache__/cli.cpython-311.pyc", False),
        ("sonic_deploy/stray.pyc", False),
        (".venv/lib/python3.11/site-packages/x.py", False),
        ("node_modules/aws-cdk/package.json", False),
        ("cdk.out/manifest.json", False),
        ("tests/conftest.py", False),
        (".git/HEAD", False),
        ("docker/other/Dockerfile", False),
    ],
)
def test_the_context_rules_stage_sources_only(path: str, staged: bool) -> None:
    """Paths that need not exist here (bytecode, a virtualenv), judged by CDK's own Docker ignore strategy."""
    strategy = IgnoreStrategy.docker(str(REPOSITORY_ROOT), CONTEXT)
    assert strategy.ignores(str(REPOSITORY_ROOT / path)) is not staged


def test_a_registry_copy_of_the_probe_copys_memory_size_is_refused(tmp_path: Path) -> None:
    """cdk-ecr-deployment shares one Lambda per memory size: the probe's copy would run with the registry
    copy's role, which may not pull the asset."""
    config = tmp_path / "config"
    shutil.copytree(CONFIG_DIR, config)
    dev = config / "environments/dev.toml"
    dev.write_text(
        dev.read_text().replace("[ecs]\n", f"[ecs]\nimage_copy_memory_mib = {COPY_MEMORY_MIB}\n", 1)
    )
    with pytest.raises(
        ValueError, match=f"ecs.image_copy_memory_mib = {COPY_MEMORY_MIB} is the probe image copy's"
    ):
        synthesize_from(config)


# The bucket


@pytest.mark.parametrize("route", ROUTES)
def test_the_bucket_is_encrypted_private_tls_only_and_expires_its_runs(
    templates: dict[str, Template], route: str, dev_settings: Settings
) -> None:
    template = templates[route]
    bucket_id, bucket = _one(template, "AWS::S3::Bucket", "ProbeBucket")
    props = bucket["Properties"]
    (encryption,) = props["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert encryption["ServerSideEncryptionByDefault"] == {
        "KMSMasterKeyID": _arn(template, "AWS::KMS::Key", "EncryptionKey"),
        "SSEAlgorithm": "aws:kms",
    }
    assert props["PublicAccessBlockConfiguration"] == dict.fromkeys(
        ("BlockPublicAcls", "BlockPublicPolicy", "IgnorePublicAcls", "RestrictPublicBuckets"), True
    )
    assert props["VersioningConfiguration"] == {"Status": "Enabled"}
    rule, markers = props["LifecycleConfiguration"]["Rules"]
    assert rule == {
        "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1},
        "ExpirationInDays": dev_settings.environment.probe.results_retention_days,
        "Id": "Runs",
        "NoncurrentVersionExpiration": {"NoncurrentDays": 1},
        "Prefix": "runs/",
        "Status": "Enabled",
    }
    # Versioned: an expired current version leaves a delete marker, removed once it is alone.
    assert markers == {
        "ExpiredObjectDeleteMarker": True,
        "Id": "RunsDeleteMarkers",
        "Prefix": "runs/",
        "Status": "Enabled",
    }
    assert bucket["DeletionPolicy"] == "Delete"
    # Emptied when the stack goes (CDK's auto-delete custom resource), else the delete would fail.
    _one(template, "Custom::S3AutoDeleteObjects", "ProbeBucketAutoDeleteObjects")
    _, policy = _one(template, "AWS::S3::BucketPolicy", "ProbeBucketPolicy")
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    deny_plain = [s for s in statements if s["Effect"] == "Deny" and "aws:SecureTransport" in json.dumps(s)]
    assert deny_plain and policy["Properties"]["Bucket"] == {"Ref": bucket_id}


# The network


def test_the_ecs_probe_calls_https_and_the_api_listener_in_the_vpc_only(
    templates: dict[str, Template], dev_settings: Settings
) -> None:
    _, group = _one(templates["ecs"], "AWS::EC2::SecurityGroup", "ProbeSecurityGroup")
    egress = {(r["CidrIp"], r["FromPort"], r["ToPort"]) for r in group["Properties"]["SecurityGroupEgress"]}
    port = dev_settings.ecs_listener_port
    assert egress == {("0.0.0.0/0", 443, 443), (DEV_VPC_CIDRS["ecs"], port, port)}
    assert "SecurityGroupIngress" not in group["Properties"]


def test_the_sagemaker_probe_calls_https_only(templates: dict[str, Template]) -> None:
    _, group = _one(templates["sagemaker"], "AWS::EC2::SecurityGroup", "ProbeSecurityGroup")
    egress = [(r["CidrIp"], r["FromPort"], r["ToPort"]) for r in group["Properties"]["SecurityGroupEgress"]]
    assert egress == [("0.0.0.0/0", 443, 443)]


def test_the_probe_runs_in_the_workloads_subnets(templates: dict[str, Template]) -> None:
    ecs_outputs = templates["ecs"].to_json()["Outputs"]
    # ECS: the one subnet of the workers' AZ (SingleAzPlacement), as the API's load balancer.
    (in_zone,) = (
        i
        for i, subnet in resources_of(templates["ecs"], "AWS::EC2::Subnet").items()
        if i.startswith("NetworkVpcPrivate")
        and subnet["Properties"]["AvailabilityZone"] == ecs_outputs["AvailabilityZone"]["Value"]
    )
    assert ecs_outputs["ProbeSubnets"]["Value"] == {"Ref": in_zone}
    sagemaker = templates["sagemaker"].to_json()
    private = sorted(
        i
        for i in resources_of(templates["sagemaker"], "AWS::EC2::Subnet")
        if i.startswith("NetworkVpcPrivate")
    )
    joined = sagemaker["Outputs"]["ProbeSubnets"]["Value"]["Fn::Join"]
    assert joined[0] == ""
    assert [part["Ref"] for part in joined[1] if isinstance(part, dict)] == private


def test_the_ecs_probe_runs_in_the_routes_cluster_and_sagemaker_gets_an_empty_one_of_its_own(
    templates: dict[str, Template],
) -> None:
    ecs_outputs = templates["ecs"].to_json()["Outputs"]
    assert ecs_outputs["ProbeCluster"]["Value"] == ecs_outputs["ClusterName"]["Value"]
    clusters = resources_of(templates["sagemaker"], "AWS::ECS::Cluster")
    assert [i for i in clusters if i.startswith("ProbeCluster")] == list(clusters)
    assert not resources_of(templates["sagemaker"], "AWS::ECS::Service")


# What a Fargate task needs without NAT, as CDK names the services' endpoints (com.amazonaws.<region>.<name>).
TASK_SERVICES = {"ecr.api", "ecr.dkr", "logs", "monitoring"}


def _interface_endpoints(template: Template) -> dict[str, dict[str, Any]]:
    """The interface endpoints' properties by service (the part of ServiceName after the Region)."""
    endpoints = {}
    for endpoint in resources_of(template, "AWS::EC2::VPCEndpoint").values():
        props = endpoint["Properties"]
        if props.get("VpcEndpointType") == "Interface":
            name = props["ServiceName"]
            assert isinstance(name, str), name  # com.amazonaws.us-east-2.<service>: a Region of the config's
            endpoints[name.removeprefix("com.amazonaws.us-east-2.")] = props
    return endpoints


def test_the_isolated_vpcs_have_the_endpoints_a_fargate_task_needs(
    sagemaker_template: Template, air_gapped: Template
) -> None:
    """No NAT in either: the image's pull (ECR api and dkr, S3's gateway), its logs and the canary's metrics go
    through endpoints, with private DNS, in the subnets the probe runs in."""
    for template in (sagemaker_template, air_gapped):
        endpoints = _interface_endpoints(template)
        assert set(endpoints) >= TASK_SERVICES
        probe_subnets = template.to_json()["Outputs"]["ProbeSubnets"]["Value"]
        in_subnets = (
            [p for p in probe_subnets["Fn::Join"][1] if isinstance(p, dict)]
            if "Fn::Join" in probe_subnets
            else [probe_subnets]
        )
        for service in TASK_SERVICES:
            assert endpoints[service]["PrivateDnsEnabled"] is True, service
            assert all(subnet in endpoints[service]["SubnetIds"] for subnet in in_subnets), service
    assert set(_interface_endpoints(sagemaker_template)) == {"sagemaker.runtime", *TASK_SERVICES}


def test_an_existing_vpc_gets_no_task_endpoints_from_the_sagemaker_stack(edit_config: EditConfig) -> None:
    """An existing VPC brings its own (docs/deploy.md): a second endpoint with private DNS would be refused."""
    existing = (
        '\n[network.existing_vpc]\nvpc_id = "vpc-0123456789abcdef0"\nvpc_cidr = "10.0.0.0/16"\n'
        'availability_zones = ["us-east-2a", "us-east-2b"]\n'
        'private_subnet_ids = ["subnet-0aaaaaaaaaaaaaaa0", "subnet-0bbbbbbbbbbbbbbb0"]\n'
        'private_route_table_ids = ["rtb-0aaaaaaaaaaaaaaa0", "rtb-0bbbbbbbbbbbbbbb0"]\n'
    )
    config = edit_config(
        "environments/dev.toml", "flow_log_retention_days = 30\n", "flow_log_retention_days = 30\n" + existing
    )
    template = Template.from_stack(synthesize_from(config, routes=["sagemaker"])["sagemaker"])
    endpoints = _interface_endpoints(template)
    assert set(endpoints) == {"sagemaker.runtime"}
    assert endpoints["sagemaker.runtime"]["SubnetIds"] == [
        "subnet-0aaaaaaaaaaaaaaa0",
        "subnet-0bbbbbbbbbbbbbbb0",
    ]
    _one(template, "AWS::ECS::TaskDefinition", "ProbeTask")


@pytest.mark.parametrize("route", ROUTES)
def test_the_outputs_are_the_runners_contract(templates: dict[str, Template], route: str) -> None:
    template = templates[route]
    outputs = template.to_json()["Outputs"]
    assert set(PROBE_OUTPUTS) <= set(outputs)
    assert outputs["ProbeContainer"]["Value"] == "probe"
    assert outputs["ProbeTaskDefinition"]["Value"] == _ref(template, "AWS::ECS::TaskDefinition", "ProbeTask")
    assert outputs["ProbeBucket"]["Value"] == _ref(template, "AWS::S3::Bucket", "ProbeBucket")
    assert outputs["ProbeSecurityGroup"]["Value"] == {
        "Fn::GetAtt": [_one(template, "AWS::EC2::SecurityGroup", "ProbeSecurityGroup")[0], "GroupId"]
    }


# The canary


@pytest.mark.parametrize("route", ROUTES)
def test_nothing_of_the_canary_when_it_is_off(templates: dict[str, Template], route: str) -> None:
    assert not resources_of(templates[route], "AWS::Scheduler::Schedule")
    roles = json.dumps(resources_of(templates[route], "AWS::IAM::Role"))
    assert "scheduler.amazonaws.com" not in roles


def _model_names(value: Any) -> Any:
    """A universal target's Input (PascalCase keys) in the API model's member names (botocore's), after
    checking that every key is PascalCase."""
    if isinstance(value, dict):
        assert all(key[:1].isupper() for key in value), sorted(value)
        return {key[:1].lower() + key[1:]: _model_names(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_model_names(item) for item in value]
    return value


def _input(schedule: dict[str, Any]) -> Any:
    """The schedule's Input with each CloudFormation reference rendered as <LogicalId.Attribute>, in the
    RunTask API's member names."""
    joined = schedule["Properties"]["Target"]["Input"]["Fn::Join"][1]
    text = "".join(
        part
        if isinstance(part, str)
        else "<{}>".format(".".join(part["Fn::GetAtt"]) if "Fn::GetAtt" in part else part["Ref"])
        for part in joined
    )
    return _model_names(json.loads(text))


def _command(schedule: dict[str, Any]) -> list[str]:
    (override,) = _input(schedule)["overrides"]["containerOverrides"]
    assert override["name"] == "probe"
    command: list[str] = override["command"]
    return command


@pytest.mark.parametrize("route", ROUTES)
def test_the_schedules_input_is_a_valid_run_task_request(canary_on: dict[str, Template], route: str) -> None:
    """The universal target sends Input as RunTask's request (PascalCase keys): botocore's own model of the
    request accepts it, member for member."""
    _, schedule = _one(canary_on[route], "AWS::Scheduler::Schedule", "CanarySchedule")
    request = _input(schedule)
    shape = botocore.session.get_session().get_service_model("ecs").operation_model("RunTask").input_shape
    assert shape is not None
    validate_parameters(request, shape)  # raises ParamValidationError, naming the member, if not
    assert set(request) == {
        "cluster",
        "taskDefinition",
        "launchType",
        "count",
        "startedBy",
        "networkConfiguration",
        "overrides",
    }


def _parsed(command: list[str], out: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """`command` through sonic_deploy's own parser and the probe's check (SystemExit 2 on a problem), with
    the stack's references as values of their kind and --out in a fresh folder."""
    monkeypatch.setenv("CARTESIA_API_KEY", "sk_car_" + "x" * 24)  # the ECS task's, from Secrets Manager
    argv = [re.sub(r"<[^>]+\.DNSName>", "internal-sonic-api.elb.us-east-2.amazonaws.com", a) for a in command]
    argv = [re.sub(r"<[^>]+>", "sonic-dev", a) for a in argv]
    assert argv[argv.index("--out") + 1] == CANARY_OUT
    argv[argv.index("--out") + 1] = str(out)
    return cli.parse(argv)


def test_the_sagemaker_canary_runs_the_contracts_command(
    canary_on: dict[str, Template], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    template = canary_on["sagemaker"]
    _, schedule = _one(template, "AWS::Scheduler::Schedule", "CanarySchedule")
    endpoint_id, _ = _one(template, "AWS::SageMaker::Endpoint", "Sonic")
    command = _command(schedule)
    assert command == [
        *("probe", "sagemaker", "--endpoint", f"<{endpoint_id}.EndpointName>", "--region", "us-east-2"),
        *("--concurrency", "1", "--requests", "3", "--warmup", "1"),
        *("--transcript", "Thanks for calling. How can I help you today?"),
        *("--voice-id", "a0e99841-438c-4a64-b679"),
        *("--no-report", "--quiet", "--out", "/tmp/canary", "--publish-metrics", "dev"),
    ]
    args = _parsed(command, tmp_path / "canary", monkeypatch)
    assert (args.probe_command, args.endpoint, args.region) == ("sagemaker", "sonic-dev", "us-east-2")
    assert (args.requests, args.warmup, args.publish_metrics, args.no_report) == (3, 1, "dev", True)


def test_the_ecs_canary_runs_the_contracts_command_against_the_internal_nlb(
    canary_on: dict[str, Template], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    template = canary_on["ecs"]
    _, schedule = _one(template, "AWS::Scheduler::Schedule", "CanarySchedule")
    load_balancer, _ = _one(template, "AWS::ElasticLoadBalancingV2::LoadBalancer", "Api")
    command = _command(schedule)
    assert command[:3] == ["probe", "ws", "--url"]
    assert f"<{load_balancer}.DNSName>" in command[3] and command[3].startswith("ws://")
    assert command[4:8] == ["--model-id", "sonic-3", "--cartesia-version", "2025-04-16"]
    assert command[8:] == [
        *("--concurrency", "1", "--requests", "3", "--warmup", "1"),
        *("--transcript", "Thanks for calling. How can I help you today?"),
        *("--voice-id", "a0e99841-438c-4a64-b679"),
        *("--no-report", "--quiet", "--out", "/tmp/canary", "--publish-metrics", "dev"),
    ]
    assert not [arg for arg in command if "key" in arg.lower() and arg != "--publish-metrics"]
    args = _parsed(command, tmp_path / "canary", monkeypatch)
    assert args.probe_command == "ws" and args.url.startswith("ws://internal-sonic-api.elb.")
    assert (args.requests, args.warmup, args.publish_metrics, args.no_report) == (3, 1, "dev", True)


@pytest.mark.parametrize("route", ROUTES)
def test_the_schedule_starts_one_fargate_task_every_n_minutes_and_never_retries(
    canary_on: dict[str, Template], route: str
) -> None:
    template = canary_on[route]
    _, schedule = _one(template, "AWS::Scheduler::Schedule", "CanarySchedule")
    props = schedule["Properties"]
    assert props["ScheduleExpression"] == "rate(5 minutes)"
    assert props["FlexibleTimeWindow"] == {"Mode": "OFF"}
    assert props["State"] == "ENABLED"
    assert props["GroupName"] == _ref(template, "AWS::Scheduler::ScheduleGroup", "CanaryGroup")
    target = props["Target"]
    outputs = template.to_json()["Outputs"]
    # Scheduler's universal target for ECS RunTask, not the templated ECS target (EcsParameters).
    assert target["Arn"] == {
        "Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":scheduler:::aws-sdk:ecs:runTask"]]
    }
    assert "EcsParameters" not in target
    assert target["RetryPolicy"] == {"MaximumEventAgeInSeconds": 60, "MaximumRetryAttempts": 0}
    request = _input(schedule)
    cluster = outputs["ProbeCluster"]["Value"]["Ref"]
    assert request["cluster"] == f"<{cluster}.Arn>"
    assert request["taskDefinition"] == "<{}>".format(outputs["ProbeTaskDefinition"]["Value"]["Ref"])
    assert (request["launchType"], request["count"], request["startedBy"]) == (
        "FARGATE",
        1,
        "sonic-deploy-canary",
    )
    network = request["networkConfiguration"]["awsvpcConfiguration"]
    assert network["assignPublicIp"] == "DISABLED"
    group = outputs["ProbeSecurityGroup"]["Value"]["Fn::GetAtt"]
    assert network["securityGroups"] == ["<{}>".format(".".join(group))]
    subnets = outputs["ProbeSubnets"]["Value"]
    listed = (
        [p for p in subnets["Fn::Join"][1] if isinstance(p, dict)] if "Fn::Join" in subnets else [subnets]
    )
    assert network["subnets"] == ["<{}>".format(p["Ref"]) for p in listed]


@pytest.mark.parametrize("route", ROUTES)
def test_the_schedules_role_may_only_run_the_probe_task_and_pass_its_two_roles(
    canary_on: dict[str, Template], route: str
) -> None:
    template = canary_on[route]
    role_id, role = _one(template, "AWS::IAM::Role", "CanaryRole")
    (trust,) = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Principal"] == {"Service": "scheduler.amazonaws.com"}
    group = _ref(template, "AWS::Scheduler::ScheduleGroup", "CanaryGroup")
    assert trust["Condition"] == {
        "StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}},
        # Only the schedules of the canary's own group.
        "ArnLike": {
            "aws:SourceArn": {
                "Fn::Join": [
                    "",
                    ["arn:aws:scheduler:us-east-2:", {"Ref": "AWS::AccountId"}, ":schedule/", group, "/*"],
                ]
            }
        },
    }
    cluster = template.to_json()["Outputs"]["ProbeCluster"]["Value"]["Ref"]
    statements = {sid: _without_sid(s) for sid, s in _statements(template, "CanaryRole").items()}
    assert statements == {
        "RunTheProbeTask": {
            "Action": "ecs:RunTask",
            "Condition": {"ArnEquals": {"ecs:cluster": {"Fn::GetAtt": [cluster, "Arn"]}}},
            "Effect": "Allow",
            "Resource": _ref(template, "AWS::ECS::TaskDefinition", "ProbeTask"),
        },
        "PassTheProbeRoles": {
            "Action": "iam:PassRole",
            "Condition": {"StringEquals": {"iam:PassedToService": "ecs-tasks.amazonaws.com"}},
            "Effect": "Allow",
            "Resource": [
                _arn(template, "AWS::IAM::Role", "ProbeExecutionRole"),
                _arn(template, "AWS::IAM::Role", "ProbeTaskRole"),
            ],
        },
    }
    assert _one(template, "AWS::Scheduler::Schedule", "CanarySchedule")[1]["Properties"]["Target"][
        "RoleArn"
    ] == {"Fn::GetAtt": [role_id, "Arn"]}


def test_the_canary_command_leaves_out_the_voice_unless_configured() -> None:
    command = canary_command(["probe", "ws", "--url", "ws://x"], CanaryConfig(), "prod")
    assert "--voice-id" not in command
    assert command[-2:] == ["--publish-metrics", "prod"]
    voiced = canary_command(["probe", "ws"], CanaryConfig(voice_id="v1"), "prod")
    assert voiced[voiced.index("--voice-id") + 1] == "v1"


@pytest.mark.parametrize("route", ROUTES)
def test_a_code_change_is_a_new_task_definition_revision_and_nothing_dangerous(
    canary_on: dict[str, Template], route: str
) -> None:
    """The image's tag is the hash of its sources: `make diff` after a change under sonic_deploy/ shows the
    copy and the schedule changed and the task definition replaced (a new revision), none of it dangerous."""
    before = canary_on[route].to_json()
    _, copy = _one(canary_on[route], "Custom::CDKECRDeployment", "ProbeImageCopy")
    tag = json.dumps(copy["Properties"]["DestImage"]).rsplit(":", 1)[1][:64]
    after = json.loads(json.dumps(before).replace(tag, "f" * 64))
    changes = classify(before, after, stack=route)
    kinds = {(c.resource_type, c.kind.value) for c in changes.changes}
    assert kinds == {
        ("Custom::CDKECRDeployment", "changed"),  # the tag it copies
        ("AWS::ECS::TaskDefinition", "replaced"),  # a new revision: ContainerDefinitions is create-only
        ("AWS::Scheduler::Schedule", "changed"),  # it starts the new revision
        ("AWS::IAM::Policy", "changed"),  # the schedule role's RunTask names the new revision
    }
    assert changes.dangerous == ()


def test_the_canary_exposes_its_failed_starts_by_its_own_schedule_group(
    canary_stacks: dict[str, Stack],
) -> None:
    """AWS/Scheduler's TargetErrorCount and InvocationDroppedCount, dimension ScheduleGroup (its only one), of
    the canary's own group: a run that RunTask refused, or that was dropped, counts there."""
    for stack in canary_stacks.values():
        canary = stack.node.find_child("Canary")
        assert isinstance(canary, ProbeCanary)
        failed = canary.failed_starts()
        assert failed.expression == "FILL(errors, 0) + FILL(dropped, 0)"
        metrics = failed.using_metrics
        names = [m.metric_name for m in (metrics["errors"], metrics["dropped"]) if isinstance(m, Metric)]
        assert names == list(FAILED_START_METRICS)
        for metric in metrics.values():
            assert isinstance(metric, Metric)
            assert (metric.namespace, metric.statistic) == ("AWS/Scheduler", "Sum")
            assert metric.period.to_minutes() == CanaryConfig().every_minutes
            assert stack.resolve(metric.dimensions) == {
                "ScheduleGroup": {"Ref": stack.get_logical_id(canary.group)}
            }


# The turn probe's hops ([probe] turn_hops): a grant each, and an endpoint each where the VPC has no NAT

HOP_SERVICES = {"transcribe": "transcribestreaming", "bedrock": "bedrock-runtime"}
TURN_HOPS_LINE = '# turn_hops = ["transcribe", "bedrock"]'


def _with_hops(tmp_path_factory: pytest.TempPathFactory, hops: str, *edits: tuple[str, str]) -> Path:
    config = tmp_path_factory.mktemp("hops") / "config"
    shutil.copytree(CONFIG_DIR, config)
    dev = config / "environments/dev.toml"
    text = dev.read_text()
    for old, new in [(TURN_HOPS_LINE, f"turn_hops = {hops}"), *edits]:
        assert old in text, old
        text = text.replace(old, new, 1)
    dev.write_text(text)
    return config


@pytest.fixture(scope="module")
def both_hops(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Template]:
    """dev with turn_hops = ["transcribe", "bedrock"]: the SageMaker stack (new VPC, no NAT), ECS connected."""
    config = _with_hops(tmp_path_factory, '["transcribe", "bedrock"]')
    return {route: Template.from_stack(stack) for route, stack in synthesize_from(config).items()}


@pytest.fixture(scope="module")
def bedrock_only(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Template]:
    config = _with_hops(tmp_path_factory, '["bedrock"]')
    return {route: Template.from_stack(stack) for route, stack in synthesize_from(config).items()}


@pytest.fixture(scope="module")
def air_gapped_hops(tmp_path_factory: pytest.TempPathFactory) -> Template:
    config = _with_hops(
        tmp_path_factory,
        '["transcribe", "bedrock"]',
        ('licence_mode = "connected"', 'licence_mode = "air-gapped"'),
        ("nat_gateways = 1", "nat_gateways = 0"),
    )
    return Template.from_stack(synthesize_from(config, routes=["ecs"])["ecs"])


def _hop_statements(template: Template) -> dict[str, dict[str, Any]]:
    hop_sids = {"TranscribeTheCallersSpeech", "StreamTheModelsReply"}
    return {
        sid: _without_sid(s) for sid, s in _statements(template, "ProbeTaskRole").items() if sid in hop_sids
    }


TRANSCRIBE_GRANT = {
    "Action": "transcribe:StartStreamTranscriptionWebSocket",
    "Effect": "Allow",
    "Resource": "*",
}
BEDROCK_GRANT = {
    "Action": "bedrock:InvokeModelWithResponseStream",
    "Effect": "Allow",
    "Resource": [
        "arn:aws:bedrock:*::foundation-model/*",
        {"Fn::Join": ["", ["arn:aws:bedrock:us-east-2:", {"Ref": "AWS::AccountId"}, ":inference-profile/*"]]},
    ],
}


@pytest.mark.parametrize("route", ROUTES)
def test_no_turn_hop_is_granted_or_reached_by_default(
    templates: dict[str, Template], air_gapped: Template, route: str
) -> None:
    assert "turn_hops = [" not in (CONFIG_DIR / "environments/dev.toml").read_text().replace(
        TURN_HOPS_LINE, ""
    )
    policies = json.dumps(resources_of(templates[route], "AWS::IAM::Policy"))
    assert "transcribe:" not in policies and "bedrock:" not in policies
    for template in (templates[route], air_gapped):
        assert not set(HOP_SERVICES.values()) & set(_interface_endpoints(template))


@pytest.mark.parametrize("route", ROUTES)
def test_each_listed_hop_grants_the_task_role_exactly_its_clients_call(
    both_hops: dict[str, Template], bedrock_only: dict[str, Template], route: str
) -> None:
    """Transcribe: the WebSocket's StartStreamTranscriptionWebSocket, which has no resource; Bedrock:
    ConverseStream's InvokeModelWithResponseStream on foundation models (any Region: a cross-Region inference
    profile's destinations) and this account's inference profiles in the stack's Region."""
    assert _hop_statements(both_hops[route]) == {
        "TranscribeTheCallersSpeech": TRANSCRIBE_GRANT,
        "StreamTheModelsReply": BEDROCK_GRANT,
    }
    assert _hop_statements(bedrock_only[route]) == {"StreamTheModelsReply": BEDROCK_GRANT}
    # The rest of the role is as without hops.
    assert set(_statements(both_hops[route], "ProbeTaskRole")) - set(_hop_statements(both_hops[route])) == {
        "ReadItsRuns",
        "WriteItsResults",
        "ListItsBucket",
        "EncryptItsRunsWithTheBucketKey",
        "PublishCanaryMetrics",
        *(["InvokeTheEndpoint"] if route == "sagemaker" else []),
    }


def test_transcribe_opens_its_websocket_port_on_the_probe_and_the_endpoints_groups(
    both_hops: dict[str, Template], bedrock_only: dict[str, Template], air_gapped_hops: Template
) -> None:
    """Transcribe streams on 8443: out of the probe's group (to its endpoint, or through NAT), and into the
    endpoints' group where the VPC has the endpoint. Bedrock is on 443, as every other endpoint."""
    for template in (both_hops["sagemaker"], both_hops["ecs"], air_gapped_hops):
        _, group = _one(template, "AWS::EC2::SecurityGroup", "ProbeSecurityGroup")
        egress = {(r["CidrIp"], r["FromPort"]) for r in group["Properties"]["SecurityGroupEgress"]}
        assert ("0.0.0.0/0", 8443) in egress
    for template in bedrock_only.values():
        _, group = _one(template, "AWS::EC2::SecurityGroup", "ProbeSecurityGroup")
        assert 8443 not in {r["FromPort"] for r in group["Properties"]["SecurityGroupEgress"]}
    for template, reaches in (
        (both_hops["sagemaker"], True),
        (air_gapped_hops, True),
        (both_hops["ecs"], False),
    ):
        _, group = _one(template, "AWS::EC2::SecurityGroup", "NetworkEndpointSecurityGroup")
        ingress = {r["FromPort"] for r in group["Properties"]["SecurityGroupIngress"]}
        assert (8443 in ingress) is reaches


def test_the_hops_endpoints_are_made_where_the_vpc_has_no_nat(
    both_hops: dict[str, Template], bedrock_only: dict[str, Template], air_gapped_hops: Template
) -> None:
    """SageMaker's new VPC and air-gapped ECS have no NAT: each listed hop's endpoint, with private DNS, in
    the probe's subnets. Connected ECS reaches the services through NAT: none."""
    hops = set(HOP_SERVICES.values())
    for template in (both_hops["sagemaker"], air_gapped_hops):
        endpoints = _interface_endpoints(template)
        assert hops <= set(endpoints)
        for service in hops:
            assert endpoints[service]["PrivateDnsEnabled"] is True
            assert endpoints[service]["SubnetIds"] == endpoints["ecr.api"]["SubnetIds"]
    assert not hops & set(_interface_endpoints(both_hops["ecs"]))
    assert hops & set(_interface_endpoints(bedrock_only["sagemaker"])) == {"bedrock-runtime"}


def test_an_existing_vpc_gets_no_hop_endpoints_from_the_sagemaker_stack(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """An existing VPC provides them itself, as it does the task's others (docs/deploy.md); the grant stays."""
    existing = (
        '\n[network.existing_vpc]\nvpc_id = "vpc-0123456789abcdef0"\nvpc_cidr = "10.0.0.0/16"\n'
        'availability_zones = ["us-east-2a", "us-east-2b"]\n'
        'private_subnet_ids = ["subnet-0aaaaaaaaaaaaaaa0", "subnet-0bbbbbbbbbbbbbbb0"]\n'
        'private_route_table_ids = ["rtb-0aaaaaaaaaaaaaaa0", "rtb-0bbbbbbbbbbbbbbb0"]\n'
    )
    config = _with_hops(
        tmp_path_factory,
        '["transcribe", "bedrock"]',
        ("flow_log_retention_days = 30\n", "flow_log_retention_days = 30\n" + existing),
    )
    template = Template.from_stack(synthesize_from(config, routes=["sagemaker"])["sagemaker"])
    assert set(_interface_endpoints(template)) == {"sagemaker.runtime"}
    assert set(_hop_statements(template)) == {"TranscribeTheCallersSpeech", "StreamTheModelsReply"}


def test_the_hops_endpoints_let_through_only_their_one_call_of_this_accounts_principals(
    both_hops: dict[str, Template],
) -> None:
    endpoints = _interface_endpoints(both_hops["sagemaker"])
    this_account = {"StringEquals": {"aws:PrincipalAccount": {"Ref": "AWS::AccountId"}}}
    assert endpoints["transcribestreaming"]["PolicyDocument"]["Statement"] == [
        {
            **TRANSCRIBE_GRANT,
            "Condition": this_account,
            "Principal": {"AWS": "*"},
            "Sid": "StreamTranscriptionNoResource",
        }
    ]
    assert endpoints["bedrock-runtime"]["PolicyDocument"]["Statement"] == [
        {
            **BEDROCK_GRANT,
            "Condition": this_account,
            "Principal": {"AWS": "*"},
            "Sid": "StreamFromModelsAndThisAccountsInferenceProfiles",
        }
    ]
