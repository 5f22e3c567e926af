"""The EKS route's preflight (sonic_deploy/routes/eks/preflight.py) against botocore's Stubber in the services'
own request and response shapes (botocore's EKS, EC2, Service Quotas, Secrets Manager and CloudFormation
models): config/environments/dev-eks.toml as shipped (the stack makes the cluster), and a copy naming an
existing cluster and its VPC."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from sonic_deploy.config import Settings, load_settings
from sonic_deploy.preflight.after_deploy import after_deploy as after_deploy_command
from sonic_deploy.preflight.results import CheckResult
from sonic_deploy.preflight.runner import run_preflight
from sonic_deploy.routes.eks.endpoints import AIR_GAPPED
from sonic_deploy.routes.eks.preflight import after_deploy, before_deploy, check_vpc_endpoints, checks
from tests.cdk_context import ROOT
from tests.conftest import EditConfig
from tests.preflight.deployed_aws import ACCOUNT, REGION, WHEN, Aws, identity, stubbed

CLUSTER, GROUP, VPC = "sonic-shared", "sg-0123456789abcdef0", "vpc-0123456789abcdef0"
SUBNET_A, SUBNET_B = "subnet-0123456789abcdef0", "subnet-0fedcba9876543210"
STACK = "sonic-dev-eks-eks"
TODAY = date(2026, 9, 1)
ADDONS = ("vpc-cni", "coredns", "kube-proxy", "eks-pod-identity-agent")
SECRETS = ("sonic/dev-eks/cartesia-api-key", "sonic/dev-eks/cartesia-registry")
SERVICES = ("sts", "ec2", "service_quotas", "eks", "secretsmanager", "cloudformation")


@pytest.fixture
def aws() -> Iterator[Aws]:
    with stubbed(SERVICES) as answered:
        yield answered


@pytest.fixture
def new_cluster() -> Settings:
    return load_settings(ROOT / "config", "dev-eks")


def existing_config(edit_config: EditConfig, more: str = "") -> Path:
    edit_config("environments/dev-eks.toml", '# existing = "my-cluster"', f'existing = "{CLUSTER}"{more}')
    edit_config(
        "environments/dev-eks.toml", f'# security_group_id = "{GROUP}"', f'security_group_id = "{GROUP}"'
    )
    return edit_config(
        "environments/dev-eks.toml",
        "# [network.existing_vpc]",
        f'[network.existing_vpc]\nvpc_id = "{VPC}"\nvpc_cidr = "10.40.0.0/16"\n'
        f'private_subnet_ids = ["{SUBNET_A}", "{SUBNET_B}"]\navailability_zones = ["us-east-2a", "us-east-2b"]\n'
        'private_route_table_ids = ["rtb-0123456789abcdef0", "rtb-0fedcba9876543210"]\n',
    )


@pytest.fixture
def existing(edit_config: EditConfig) -> Settings:
    return load_settings(existing_config(edit_config), "dev-eks")


# What the checks ask, in order, each answered as the service's model says.


def quota(aws: Aws, value: float = 64.0) -> None:
    aws.answer(
        "service_quotas",
        "get_service_quota",
        {
            "Quota": {
                "ServiceCode": "ec2",
                "QuotaCode": "L-DB2E81BA",
                "QuotaName": "Running On-Demand G and VT instances",
                "Value": value,
                "Unit": "None",
            }
        },
        {"ServiceCode": "ec2", "QuotaCode": "L-DB2E81BA"},
    )


def running(aws: Aws, *instances: tuple[str, str]) -> None:
    """DescribeInstances (pending or running): each instance (type, stack tag); DescribeInstanceTypes for the
    G ones outside the route's stack."""
    described = [
        {
            "InstanceId": f"i-0{n:016x}",
            "InstanceType": instance_type,
            "Tags": [{"Key": "aws:cloudformation:stack-name", "Value": stack}],
        }
        for n, (instance_type, stack) in enumerate(instances)
    ]
    aws.answer(
        "ec2",
        "describe_instances",
        {
            "Reservations": [{"ReservationId": "r-0123456789abcdef0", "Instances": described}]
            if described
            else []
        },
        {"Filters": [{"Name": "instance-state-name", "Values": ["pending", "running"]}]},
    )
    others = list(dict.fromkeys(t for t, stack in instances if t.startswith("g") and stack != STACK))
    if others:
        aws.answer(
            "ec2",
            "describe_instance_types",
            {"InstanceTypes": [{"InstanceType": t, "VCpuInfo": {"DefaultVCpus": 8}} for t in others]},
            {"InstanceTypes": others},
        )


def offered(
    aws: Aws, g6e: tuple[str, ...] = ("us-east-2a", "us-east-2b"), g6: tuple[str, ...] = ("us-east-2a",)
) -> None:
    offers = [
        {"InstanceType": t, "LocationType": "availability-zone", "Location": zone}
        for t, zones in (("g6e.xlarge", g6e), ("g6.2xlarge", g6))
        for zone in zones
    ]
    aws.answer(
        "ec2",
        "describe_instance_type_offerings",
        {"InstanceTypeOfferings": offers},
        {
            "LocationType": "availability-zone",
            "Filters": [{"Name": "instance-type", "Values": ["g6e.xlarge", "g6.2xlarge"]}],
        },
    )


def cluster(aws: Aws, **changed: Any) -> None:
    vpc = {
        "subnetIds": [SUBNET_A, SUBNET_B],
        "securityGroupIds": [],
        "clusterSecurityGroupId": GROUP,
        "vpcId": VPC,
        "endpointPublicAccess": False,
        "endpointPrivateAccess": True,
        "publicAccessCidrs": [],
    }
    vpc.update(changed.pop("vpc", {}))
    described = {
        "name": CLUSTER,
        "arn": f"arn:aws:eks:{REGION}:{ACCOUNT}:cluster/{CLUSTER}",
        "createdAt": WHEN,
        "version": "1.36",
        "endpoint": "https://0123456789ABCDEF0123456789ABCDEF.gr7.us-east-2.eks.amazonaws.com",
        "roleArn": f"arn:aws:iam::{ACCOUNT}:role/{CLUSTER}-cluster",
        "resourcesVpcConfig": vpc,
        "kubernetesNetworkConfig": {"serviceIpv4Cidr": "172.20.0.0/16", "ipFamily": "ipv4"},
        "status": "ACTIVE",
        "platformVersion": "eks.3",
        "accessConfig": {
            "bootstrapClusterCreatorAdminPermissions": True,
            "authenticationMode": "API_AND_CONFIG_MAP",
        },
        "upgradePolicy": {"supportType": "EXTENDED"},
        "health": {"issues": []},
        **changed,
    }
    aws.answer("eks", "describe_cluster", {"cluster": described}, {"name": CLUSTER})


def versions(aws: Aws, standard: date | None = date(2027, 7, 28), status: str = "STANDARD_SUPPORT") -> None:
    row: dict[str, Any] = {
        "clusterVersion": "1.36",
        "clusterType": "eks",
        "defaultPlatformVersion": "eks.3",
        "defaultVersion": False,
        "releaseDate": WHEN,
        "status": status.lower().replace("_", "-"),
        "versionStatus": status,
        "kubernetesPatchVersion": "1.36.2",
    }
    if standard is not None:
        row["endOfStandardSupportDate"] = datetime(standard.year, standard.month, standard.day, tzinfo=UTC)
        row["endOfExtendedSupportDate"] = datetime(
            standard.year + 1, standard.month, standard.day, tzinfo=UTC
        )
    aws.answer(
        "eks",
        "describe_cluster_versions",
        {"clusterVersions": [row]},
        {"clusterVersions": ["1.36"], "includeAll": True},
    )


def addons(aws: Aws, installed: tuple[str, ...] = ADDONS, status: dict[str, str] | None = None) -> None:
    aws.answer("eks", "list_addons", {"addons": list(installed)}, {"clusterName": CLUSTER})
    for name in ADDONS:
        if name not in installed:
            continue
        state = (status or {}).get(name, "ACTIVE")
        addon = {
            "addonName": name,
            "clusterName": CLUSTER,
            "status": state,
            "addonVersion": "v1.0.0-eksbuild.1",
            "health": {
                "issues": []
                if state == "ACTIVE"
                else [{"code": "InsufficientNumberOfReplicas", "message": "0/2 ready"}]
            },
            "addonArn": f"arn:aws:eks:{REGION}:{ACCOUNT}:addon/{CLUSTER}/{name}/0a1b2c3d",
            "createdAt": WHEN,
            "modifiedAt": WHEN,
        }
        aws.answer("eks", "describe_addon", {"addon": addon}, {"clusterName": CLUSTER, "addonName": name})


def associations(aws: Aws, *pairs: tuple[str, str]) -> None:
    """ListPodIdentityAssociations' answer: one association per (namespace, service account)."""
    found = [
        {
            "clusterName": CLUSTER,
            "namespace": namespace,
            "serviceAccount": account,
            "associationArn": f"arn:aws:eks:{REGION}:{ACCOUNT}:podidentityassociation/{CLUSTER}/a-{index}",
            "associationId": f"a-{index}",
        }
        for index, (namespace, account) in enumerate(pairs)
    ]
    aws.answer("eks", "list_pod_identity_associations", {"associations": found}, {"clusterName": CLUSTER})


def secrets(aws: Aws, missing: tuple[str, ...] = (), names: tuple[str, ...] = SECRETS) -> None:
    for name in names:
        if name in missing:
            aws.stubs["secretsmanager"].add_client_error(
                "describe_secret",
                service_error_code="ResourceNotFoundException",
                service_message="Secrets Manager can't find the specified secret.",
                http_status_code=400,
                expected_params={"SecretId": name},
            )
            continue
        aws.answer(
            "secretsmanager",
            "describe_secret",
            {"ARN": f"arn:aws:secretsmanager:{REGION}:{ACCOUNT}:secret:{name}-AbCdEf", "Name": name},
            {"SecretId": name},
        )


def healthy(aws: Aws, **cluster_changes: Any) -> None:
    """Everything an existing cluster's run asks, answered as a healthy account would (the cluster changed by
    `cluster_changes`)."""
    quota(aws)
    running(aws)
    offered(aws)
    cluster(aws, **cluster_changes)
    versions(aws)
    addons(aws)
    associations(aws, ("kube-system", "coredns"))
    secrets(aws)


def by_check(results: list[CheckResult]) -> dict[str, CheckResult]:
    return {result.check: result for result in results}


# A new cluster: no question about it.


def test_a_new_cluster_asks_only_for_its_version(aws: Aws, new_cluster: Settings) -> None:
    quota(aws)
    running(aws, ("g6e.xlarge", STACK), ("m7i.xlarge", "another-team"))
    offered(aws)
    versions(aws)
    secrets(aws)
    results = checks(aws.clients, new_cluster, ACCOUNT, today=TODAY)  # a DescribeCluster would be unstubbed
    assert [(r.check, r.status, r.detail) for r in results] == [
        (
            "quota: Running On-Demand G and VT instances",
            "pass",
            "64 vCPUs (applied); needs 56: 7 nodes (max_workers 6 + 1 replacing) x 8 vCPUs of g6.2xlarge (the "
            "largest of g6e.xlarge, g6.2xlarge), + 0 vCPUs on 0 G/VT instances outside sonic-dev-eks-eks",
        ),
        ("g6e.xlarge offered in us-east-2a", "pass", "offered (also in us-east-2b)"),
        ("g6.2xlarge offered in us-east-2a", "pass", "offered (also in no other AZ)"),
        ("Kubernetes 1.36 support", "pass", "STANDARD_SUPPORT: standard support until 2027-07-28"),
        ("secret sonic/dev-eks/cartesia-api-key", "pass", "exists"),
        ("secret sonic/dev-eks/cartesia-registry", "pass", "exists"),
    ]


def test_the_runner_asks_the_route_with_its_eks_client(aws: Aws, new_cluster: Settings) -> None:
    identity(aws)
    quota(aws)
    running(aws)
    offered(aws)
    versions(aws, standard=None)  # no dates: the answer does not depend on the day the test runs
    secrets(aws)
    aws.answer(
        "cloudformation",
        "describe_stacks",
        {
            "Stacks": [
                {
                    "StackName": "CDKToolkit",
                    "CreationTime": WHEN,
                    "StackStatus": "UPDATE_COMPLETE",
                    "Outputs": [{"OutputKey": "BootstrapVersion", "OutputValue": "30"}],
                }
            ]
        },
        {"StackName": "CDKToolkit"},
    )
    results = run_preflight(aws.clients, new_cluster)
    assert [r.check for r in results if r.status != "pass"] == ["SageMaker checks", "ECS checks"]
    assert by_check(results)["Kubernetes 1.36 support"].detail == (
        "STANDARD_SUPPORT: no end of standard support published"
    )


# An existing cluster.


def test_a_healthy_existing_cluster_passes_every_check(aws: Aws, existing: Settings) -> None:
    healthy(aws)
    results = checks(aws.clients, existing, ACCOUNT, today=TODAY)
    assert [(r.check, r.status) for r in results] == [
        ("quota: Running On-Demand G and VT instances", "pass"),
        ("g6e.xlarge offered in us-east-2a", "pass"),
        ("g6.2xlarge offered in us-east-2a", "pass"),
        (f"cluster {CLUSTER}", "pass"),
        (f"cluster {CLUSTER} version", "pass"),
        (f"cluster {CLUSTER} authentication mode", "pass"),
        (f"cluster {CLUSTER} endpoint access", "pass"),
        (f"cluster {CLUSTER} VPC and security group", "pass"),
        (f"cluster {CLUSTER} subnets", "pass"),
        ("Kubernetes 1.36 support", "pass"),
        *((f"add-on {name} on {CLUSTER}", "pass") for name in ADDONS),
        (f"Pod Identity associations on {CLUSTER}", "pass"),
        ("secret sonic/dev-eks/cartesia-api-key", "pass"),
        ("secret sonic/dev-eks/cartesia-registry", "pass"),
    ]
    found = by_check(results)
    assert found[f"cluster {CLUSTER}"].detail == "ACTIVE (platform eks.3)"
    assert found[f"cluster {CLUSTER} endpoint access"].detail == "private on (public off)"
    assert found[f"cluster {CLUSTER} subnets"].detail == (
        f"{SUBNET_A} (us-east-2a, from [network.existing_vpc]) is one of the cluster's"
    )
    assert found[f"add-on coredns on {CLUSTER}"].detail == "ACTIVE, v1.0.0-eksbuild.1"


@pytest.mark.parametrize(
    ("changes", "check", "detail", "fix"),
    [
        (
            {"version": "1.35"},
            "version",
            "the cluster runs Kubernetes 1.35; config/environments/dev-eks.toml says eks.kubernetes_version = '1.36'",
            'set eks.kubernetes_version = "1.35" in config/environments/dev-eks.toml',
        ),
        (
            {"version": "1.32"},
            "version",
            "the cluster runs Kubernetes 1.32; config/environments/dev-eks.toml says eks.kubernetes_version = '1.36'",
            "the stack (kubectl 1.36, Karpenter 1.14) manages 1.35, 1.36 only: upgrade the cluster to one of them, "
            "then set "
            "eks.kubernetes_version to it",
        ),
        (
            {"accessConfig": {"authenticationMode": "CONFIG_MAP"}},
            "authentication mode",
            "CONFIG_MAP: no access entries, and the stack grants its kubectl Lambda's role access with one",
            f"aws eks update-cluster-config --name {CLUSTER} --region us-east-2 --access-config "
            "authenticationMode=API_AND_CONFIG_MAP (one way: it cannot go back to CONFIG_MAP)",
        ),
        (
            {
                "vpc": {
                    "endpointPublicAccess": True,
                    "endpointPrivateAccess": False,
                    "publicAccessCidrs": ["0.0.0.0/0"],
                }
            },
            "endpoint access",
            "private off (public on): the stack's kubectl Lambda, in the VPC, reaches the API server through the "
            "private endpoint",
            f"aws eks update-cluster-config --name {CLUSTER} --region us-east-2 --resources-vpc-config "
            "endpointPrivateAccess=true",
        ),
        (
            {"vpc": {"vpcId": "vpc-0aaaaaaaaaaaaaaaa"}},
            "VPC and security group",
            f"it is in vpc-0aaaaaaaaaaaaaaaa, network.existing_vpc.vpc_id is {VPC}",
            "in config/environments/dev-eks.toml: set [network.existing_vpc] to the cluster's VPC "
            "vpc-0aaaaaaaaaaaaaaaa (its range and private subnets)",
        ),
        (
            {"vpc": {"clusterSecurityGroupId": "sg-0bbbbbbbbbbbbbbbb"}},
            "VPC and security group",
            f"its cluster security group is sg-0bbbbbbbbbbbbbbbb, eks.cluster.security_group_id is {GROUP}",
            'in config/environments/dev-eks.toml: set eks.cluster.security_group_id = "sg-0bbbbbbbbbbbbbbbb"',
        ),
        (
            {"status": "UPDATING"},
            "",
            "UPDATING",
            f"wait until it is ACTIVE (aws eks wait cluster-active --name {CLUSTER} --region us-east-2), then re-run",
        ),
    ],
    ids=[
        "older-version",
        "unmanageable-version",
        "config-map",
        "public-only",
        "wrong-vpc",
        "wrong-group",
        "updating",
    ],
)
def test_each_cluster_problem_fails_naming_its_fix(
    aws: Aws, existing: Settings, changes: dict[str, Any], check: str, detail: str, fix: str
) -> None:
    healthy(aws, **changes)
    results = checks(aws.clients, existing, ACCOUNT, today=TODAY)
    assert [r.check for r in results if r.status != "pass"] == [f"cluster {CLUSTER} {check}".strip()]
    result = by_check(results)[f"cluster {CLUSTER} {check}".strip()]
    assert (result.status, result.detail, result.fix) == ("fail", detail, fix)


def test_a_subnet_outside_the_clusters_is_noted_not_failed(aws: Aws, existing: Settings) -> None:
    healthy(aws, vpc={"subnetIds": ["subnet-0cccccccccccccccc", "subnet-0dddddddddddddddd"]})
    result = by_check(checks(aws.clients, existing, ACCOUNT, today=TODAY))[f"cluster {CLUSTER} subnets"]
    assert result.status == "skipped"
    assert result.detail.startswith(
        f"{SUBNET_A} (us-east-2a, from [network.existing_vpc]) is not one of the cluster's"
    )


def test_a_missing_or_unhealthy_add_on_fails_naming_its_fix(aws: Aws, existing: Settings) -> None:
    quota(aws)
    running(aws)
    offered(aws)
    cluster(aws)
    versions(aws)
    addons(aws, installed=("vpc-cni", "coredns", "kube-proxy"), status={"coredns": "DEGRADED"})
    associations(aws)
    secrets(aws)
    found = by_check(checks(aws.clients, existing, ACCOUNT, today=TODAY))
    missing = found[f"add-on eks-pod-identity-agent on {CLUSTER}"]
    assert (missing.status, missing.detail) == (
        "fail",
        "not installed as an EKS add-on (the cluster has vpc-cni, coredns, kube-proxy)",
    )
    assert missing.fix.startswith(
        f"aws eks create-addon --cluster-name {CLUSTER} --addon-name eks-pod-identity-agent --region us-east-2"
    )
    degraded = found[f"add-on coredns on {CLUSTER}"]
    assert (degraded.status, degraded.detail) == (
        "fail",
        "DEGRADED, v1.0.0-eksbuild.1 (InsufficientNumberOfReplicas: 0/2 ready)",
    )
    assert degraded.fix.startswith(f"`aws eks describe-addon --cluster-name {CLUSTER} --addon-name coredns")
    assert found[f"add-on vpc-cni on {CLUSTER}"].status == "pass"


def test_no_such_cluster_fails_and_skips_what_needs_it(aws: Aws, existing: Settings) -> None:
    quota(aws)
    running(aws)
    offered(aws)
    aws.refuse(
        "eks", "describe_cluster", "ResourceNotFoundException", f"No cluster found for name: {CLUSTER}."
    )
    versions(aws)
    secrets(aws)
    results = checks(aws.clients, existing, ACCOUNT, today=TODAY)
    assert [(r.check, r.status) for r in results[3:5]] == [
        (f"cluster {CLUSTER}", "fail"),
        (f"cluster {CLUSTER}'s settings and add-ons", "skipped"),
    ]
    assert results[3].fix.startswith("correct eks.cluster.existing in config/environments/dev-eks.toml")


@pytest.mark.parametrize(
    ("refused", "check", "action"),
    [
        ("describe_cluster", f"cluster {CLUSTER}", "eks:DescribeCluster"),
        ("describe_cluster_versions", "Kubernetes 1.36 support", "eks:DescribeClusterVersions"),
        ("list_addons", f"add-ons of cluster {CLUSTER}", "eks:ListAddons"),
        ("get_service_quota", "quota: Running On-Demand G and VT instances", "servicequotas:GetServiceQuota"),
        (
            "describe_instance_type_offerings",
            "g6e.xlarge, g6.2xlarge offered",
            "ec2:DescribeInstanceTypeOfferings",
        ),
    ],
)
def test_a_denied_call_fails_its_check_and_names_the_permission(
    aws: Aws, existing: Settings, refused: str, check: str, action: str
) -> None:
    service = {"get_service_quota": "service_quotas", "describe_instance_type_offerings": "ec2"}.get(
        refused, "eks"
    )
    message = f"User: arn:aws:iam::{ACCOUNT}:user/ops is not authorized to perform: {action}"
    code = "UnauthorizedOperation" if service == "ec2" else "AccessDeniedException"
    if refused == "get_service_quota":
        aws.refuse(service, refused, code, message)
    else:
        quota(aws)
        running(aws)
    if refused == "describe_instance_type_offerings":
        aws.refuse(service, refused, code, message)
    else:
        offered(aws)
    if refused == "describe_cluster":
        aws.refuse(service, refused, code, message)
    else:
        cluster(aws)
    if refused == "describe_cluster_versions":
        aws.refuse(service, refused, code, message)
    else:
        versions(aws)
    if refused == "list_addons":
        aws.refuse(service, refused, code, message)
    elif refused != "describe_cluster":
        addons(aws)
    if refused != "describe_cluster":
        associations(aws)
    secrets(aws)
    result = by_check(checks(aws.clients, existing, ACCOUNT, today=TODAY))[check]
    assert (result.status, result.detail) == ("fail", f"not allowed to call {action}: {message}")
    assert (
        result.fix == f"grant the credentials {action} (read-only), or run preflight with a role that has it"
    )


def test_a_quota_short_of_the_nodes_fails_with_the_increase(aws: Aws, new_cluster: Settings) -> None:
    quota(aws, 60.0)
    running(aws, ("g5.2xlarge", "another-team"))  # 8 vCPUs elsewhere: 56 + 8 = 64
    offered(aws)
    versions(aws)
    secrets(aws)
    result = by_check(checks(aws.clients, new_cluster, ACCOUNT, today=TODAY))[
        "quota: Running On-Demand G and VT instances"
    ]
    assert result.status == "fail"
    assert result.detail.startswith("60 vCPUs (applied); needs 64: 7 nodes")
    assert result.detail.endswith("+ 8 vCPUs on 1 G/VT instances outside sonic-dev-eks-eks")
    assert result.fix == (
        "request 64: aws service-quotas request-service-quota-increase --region us-east-2 --service-code ec2 "
        "--quota-code L-DB2E81BA --desired-value 64"
    )


def test_a_type_not_offered_in_the_zone_fails_naming_where_it_is(aws: Aws, new_cluster: Settings) -> None:
    quota(aws)
    running(aws)
    offered(aws, g6=("us-east-2b", "us-east-2c"))
    versions(aws)
    secrets(aws)
    result = by_check(checks(aws.clients, new_cluster, ACCOUNT, today=TODAY))[
        "g6.2xlarge offered in us-east-2a"
    ]
    assert (result.status, result.detail) == (
        "fail",
        "not offered in us-east-2a; offered in us-east-2b, us-east-2c",
    )
    assert result.fix == (
        "set eks.availability_zone to one of us-east-2b, us-east-2c, or drop g6.2xlarge from "
        "eks.instance_type / eks.capacity.instance_types"
    )


@pytest.mark.parametrize(
    ("standard", "status", "outcome", "detail"),
    [
        (
            TODAY + timedelta(days=30),
            "STANDARD_SUPPORT",
            "pass",
            "STANDARD_SUPPORT: standard support until 2026-10-01; 30 days left: plan the upgrade",
        ),
        (
            TODAY - timedelta(days=1),
            "EXTENDED_SUPPORT",
            "fail",
            "EXTENDED_SUPPORT: standard support ended 2026-08-31; extended support (charged per cluster hour) until 2027-08-31",
        ),
        (
            TODAY - timedelta(days=400),
            "UNSUPPORTED",
            "fail",
            "UNSUPPORTED: extended support ended 2026-07-28",
        ),
    ],
    ids=["near", "extended", "unsupported"],
)
def test_the_end_of_standard_support_against_today(
    aws: Aws, new_cluster: Settings, standard: date, status: str, outcome: str, detail: str
) -> None:
    versions(aws, standard, status)
    from sonic_deploy.routes.eks.preflight_cluster import check_version_support

    result = check_version_support(aws.clients.eks, new_cluster, TODAY)
    assert (result.status, result.detail) == (outcome, detail)
    if outcome == "fail":
        assert result.fix == "set eks.kubernetes_version to a version in standard support"


def test_a_version_eks_does_not_list_fails(aws: Aws, new_cluster: Settings) -> None:
    aws.answer(
        "eks",
        "describe_cluster_versions",
        {"clusterVersions": []},
        {"clusterVersions": ["1.36"], "includeAll": True},
    )
    from sonic_deploy.routes.eks.preflight_cluster import check_version_support

    result = check_version_support(aws.clients.eks, new_cluster, TODAY)
    assert (result.status, result.detail) == ("fail", "EKS lists no Kubernetes 1.36 in us-east-2")


# Before and after a deploy.


def test_before_deploy_checks_each_imported_secret(aws: Aws, new_cluster: Settings) -> None:
    secrets(aws, missing=(SECRETS[1],))
    results = before_deploy(new_cluster, aws.clients.secretsmanager)
    assert [(r.check, r.status) for r in results] == [
        (f"secret {SECRETS[0]}", "pass"),
        (f"secret {SECRETS[1]}", "fail"),
    ]
    assert results[1].fix.startswith(f"create it: aws secretsmanager create-secret --name {SECRETS[1]}")


def test_air_gapped_before_deploy_wants_the_licence_secret_too(aws: Aws, edit_config: EditConfig) -> None:
    """The proxy's pod mounts it: missing, the pod never starts (`sonic-deploy licence upload` makes it)."""
    edit_config("environments/dev-eks.toml", 'licence_mode = "connected" ', 'licence_mode = "air-gapped" ')
    edit_config("environments/dev-eks.toml", "nat_gateways = 1", "nat_gateways = 0")
    edit_config("environments/dev-eks.toml", "# [eks.mirror]\n# charts", "[eks.mirror]\ncharts")
    config = edit_config("environments/dev-eks.toml", '# images = "', 'images = "')
    licence = "sonic/dev-eks/cartesia-licence"
    secrets(aws, missing=(licence,), names=(*SECRETS, licence))
    results = before_deploy(load_settings(config, "dev-eks"), aws.clients.secretsmanager)
    assert [(r.check, r.status) for r in results][-1] == (f"secret {licence}", "fail")


def test_before_deploy_asks_nothing_when_the_stack_creates_the_secrets(
    aws: Aws, edit_config: EditConfig
) -> None:
    edit_config("environments/dev-eks.toml", "nats_replicas = 3", "nats_replicas = 3\ncopy_images = false")
    config = edit_config(
        "environments/dev-eks.toml",
        'registry_credentials = "sonic/dev-eks/cartesia-registry"',
        'registry_credentials = "sonic/dev-eks/cartesia-registry"\ncreate = true',
    )
    results = before_deploy(load_settings(config, "dev-eks"), aws.clients.secretsmanager)
    assert [(r.check, r.status) for r in results] == [("secrets", "skipped")]


def deployed(aws: Aws, status: str = "UPDATE_COMPLETE", outputs: bool = True) -> None:
    stack: dict[str, Any] = {
        "StackName": STACK,
        "StackId": f"arn:aws:cloudformation:{REGION}:{ACCOUNT}:stack/{STACK}/0f1e2d3c",
        "CreationTime": WHEN,
        "StackStatus": status,
    }
    if outputs:
        values = {
            "ApiUrl": "ws://internal-sonic.elb.us-east-2.amazonaws.com",
            "ModelId": "sonic-3",
            "CartesiaVersion": "2025-04-16",
            "ApiKeySecret": SECRETS[0],
            "Region": REGION,
            "ClusterName": CLUSTER,
        }
        stack["Outputs"] = [{"OutputKey": k, "OutputValue": v} for k, v in values.items()]
    aws.answer("cloudformation", "describe_stacks", {"Stacks": [stack]}, {"StackName": STACK})


def test_after_deploy_finds_the_stack_deployed(aws: Aws, new_cluster: Settings) -> None:
    identity(aws)
    deployed(aws)
    results = after_deploy_command(aws.clients, new_cluster, "eks")
    assert [(r.check, r.status) for r in results] == [
        ("credentials and account", "pass"),
        (f"stack {STACK}", "pass"),
        ("the cluster's workloads", "skipped"),
    ]
    assert results[1].detail == (
        f"UPDATE_COMPLETE: cluster {CLUSTER}, API ws://internal-sonic.elb.us-east-2.amazonaws.com"
    )


@pytest.mark.parametrize(
    ("status", "outputs", "detail"),
    [
        ("UPDATE_ROLLBACK_FAILED", True, "UPDATE_ROLLBACK_FAILED"),
        (
            "CREATE_IN_PROGRESS",
            False,
            "CREATE_IN_PROGRESS, without the output ApiUrl, ModelId, CartesiaVersion, ApiKeySecret, Region, ClusterName",
        ),
    ],
)
def test_after_deploy_fails_a_failed_or_unfinished_stack(
    aws: Aws, new_cluster: Settings, status: str, outputs: bool, detail: str
) -> None:
    deployed(aws, status, outputs)
    (result,) = after_deploy(aws.clients, new_cluster)
    assert (result.check, result.status, result.detail) == (f"stack {STACK}", "fail", detail)


def test_after_deploy_fails_an_undeployed_stack(aws: Aws, new_cluster: Settings) -> None:
    aws.refuse(
        "cloudformation", "describe_stacks", "ValidationError", f"Stack with id {STACK} does not exist"
    )
    (result,) = after_deploy(aws.clients, new_cluster)
    assert (result.status, result.detail) == ("fail", "not deployed in us-east-2")
    assert result.fix == "make deploy ENV=dev-eks ROUTE=eks, send it traffic, then run this again"


def test_a_controller_already_on_the_cluster_is_refused(aws: Aws, existing: Settings) -> None:
    from sonic_deploy.routes.eks.preflight_cluster import check_no_identity_clash

    associations(aws, ("kube-system", "karpenter"), ("sonic", "api-server"), ("apps", "web"))
    result = check_no_identity_clash(aws.clients.eks, existing)
    assert result.status == "fail"
    assert result.detail.startswith("kube-system/karpenter, sonic/api-server already have one")
    assert "docs/eks.md" in result.fix


def test_air_gapped_in_an_existing_vpc_wants_the_vpcs_own_endpoints(
    aws: Aws, edit_config: EditConfig
) -> None:
    """The stack makes no endpoint in a VPC it did not make: each one air-gapped mode needs must be there."""
    existing_config(edit_config)
    edit_config("environments/dev-eks.toml", 'licence_mode = "connected" ', 'licence_mode = "air-gapped" ')
    edit_config("environments/dev-eks.toml", "nat_gateways = 1", "nat_gateways = 0")
    edit_config("environments/dev-eks.toml", "# [eks.mirror]\n# charts", "[eks.mirror]\ncharts")
    config = edit_config("environments/dev-eks.toml", '# images = "', 'images = "')
    present = [name for name in AIR_GAPPED if name not in ("sqs", "lambda")]
    endpoints = [
        {"VpcEndpointId": f"vpce-{i:017x}", "VpcId": VPC, "ServiceName": f"com.amazonaws.{REGION}.{name}",
         "State": "available"}
        for i, name in enumerate(present)
    ] + [{"VpcEndpointId": "vpce-0fffffffffffffff0", "VpcId": VPC,
          "ServiceName": f"com.amazonaws.{REGION}.lambda", "State": "pending"}]  # fmt: skip
    aws.answer(
        "ec2",
        "describe_vpc_endpoints",
        {"VpcEndpoints": endpoints},
        {"Filters": [{"Name": "vpc-id", "Values": [VPC]}]},
    )
    results = check_vpc_endpoints(aws.clients.ec2, load_settings(config, "dev-eks"))
    failing = {r.check: r for r in results if r.status == "fail"}
    assert set(failing) == {f"endpoint sqs in {VPC}", f"endpoint lambda in {VPC}"}
    assert failing[f"endpoint sqs in {VPC}"].fix.startswith(
        f"aws ec2 create-vpc-endpoint --vpc-id {VPC} --vpc-endpoint-type Interface "
        f"--service-name com.amazonaws.{REGION}.sqs"
    )
    assert len(results) == len(AIR_GAPPED)


def test_connected_or_a_stack_made_vpc_asks_nothing_of_endpoints(aws: Aws, new_cluster: Settings) -> None:
    assert check_vpc_endpoints(aws.clients.ec2, new_cluster) == []
