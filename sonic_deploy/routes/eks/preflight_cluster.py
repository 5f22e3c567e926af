"""The EKS route's cluster checks (docs/eks.md, sections 2 and 7): the Kubernetes version's support dates for any
cluster; for an existing one (`[eks.cluster] existing`), what the stack assumes of it: ACTIVE at the configured
version, access entries allowed, a private endpoint, the configured VPC and cluster security group, and the
add-ons the route's pods need. Read-only: eks:DescribeClusterVersions, DescribeCluster, ListAddons,
DescribeAddon."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date, datetime
from typing import TYPE_CHECKING, Any, get_args

from botocore.exceptions import ClientError

from sonic_deploy.config import Settings
from sonic_deploy.preflight.results import CheckResult, aws_error, error_code, failed, passed, skipped
from sonic_deploy.routes.eks.config import KUBECTL_MINOR, EksConfig, KubernetesVersion
from sonic_deploy.routes.eks.manifests import ASSOCIATED, SERVICE_ACCOUNTS

if TYPE_CHECKING:
    from mypy_boto3_eks import EKSClient

# Standard support ending this close passes with a note to plan the upgrade (as the CDK bootstrap check passes
# below the lookup version with a note): an upgrade is a planned change, not a deploy blocker.
NEAR_END_DAYS = 90
# What the route's pods need of the cluster (docs/eks.md, section 2): the CNI, DNS, Services, and the agent
# behind the Pod Identity associations the stack makes.
REQUIRED_ADDONS = ("vpc-cni", "coredns", "kube-proxy", "eks-pod-identity-agent")
# Air-gapped, the licence proxy's volume (a cluster the stack makes gets it from the stack).
VOLUME_ADDON = "aws-ebs-csi-driver"
# The stack's kubectl Lambda grants itself cluster-admin with an access entry (docs/eks.md, section 2).
ACCESS_ENTRY_MODES = ("API", "API_AND_CONFIG_MAP")


def eks_table(settings: Settings) -> EksConfig:
    eks = settings.environment.eks
    assert eks is not None, "preflight asks a route's checks only when the environment deploys it"
    return eks


def _env_file(settings: Settings) -> str:
    return f"config/environments/{settings.environment_name}.toml"


def _day(value: Any) -> date | None:
    return value.date() if isinstance(value, datetime) else None


def check_version_support(eks: EKSClient, settings: Settings, today: date) -> CheckResult:
    """`eks.kubernetes_version` is offered in the Region and its standard support has not ended."""
    version, region = eks_table(settings).kubernetes_version, settings.environment.region
    check = f"Kubernetes {version} support"
    try:
        # includeAll: versions past standard support too, which the answer otherwise may leave out (UNVERIFIED).
        rows = eks.describe_cluster_versions(clusterVersions=[version], includeAll=True)["clusterVersions"]
    except ClientError as error:
        return aws_error(check, error, "eks:DescribeClusterVersions")
    row: Mapping[str, Any] | None = next((r for r in rows if r.get("clusterVersion") == version), None)
    existing = eks_table(settings).cluster.existing
    upgrade = (
        f"upgrade {existing} (aws eks update-cluster-version --name {existing} --region {region} "
        "--kubernetes-version <next>) and set eks.kubernetes_version to match"
        if existing
        else "set eks.kubernetes_version to a version in standard support"
    )
    if row is None:
        return failed(
            check,
            f"EKS lists no Kubernetes {version} in {region}",
            f"set eks.kubernetes_version in {_env_file(settings)} to one that "
            f"`aws eks describe-cluster-versions --region {region}` lists",
        )
    status = str(row.get("versionStatus") or row.get("status") or "?")
    standard, extended = _day(row.get("endOfStandardSupportDate")), _day(row.get("endOfExtendedSupportDate"))
    if status.upper() == "UNSUPPORTED" or (extended is not None and extended <= today):
        return failed(check, f"{status}: extended support ended {extended or '?'}", upgrade)
    if standard is not None and standard <= today:
        return failed(
            check,
            f"{status}: standard support ended {standard}; extended support (charged per cluster hour) until "
            f"{extended or '?'}",
            upgrade,
        )
    if standard is None:
        return passed(check, f"{status}: no end of standard support published")
    left = (standard - today).days
    note = f"; {left} days left: plan the upgrade" if left <= NEAR_END_DAYS else ""
    return passed(check, f"{status}: standard support until {standard}{note}")


def check_existing_cluster(eks: EKSClient, settings: Settings) -> tuple[list[CheckResult], bool]:
    """DescribeCluster's answer against the config, one result per aspect; and whether the cluster exists (the
    add-on checks need it)."""
    config = eks_table(settings)
    name, region = config.cluster.existing, settings.environment.region
    assert name is not None, "asked only for an existing cluster"
    check = f"cluster {name}"
    try:
        cluster: Mapping[str, Any] = eks.describe_cluster(name=name)["cluster"]
    except ClientError as error:
        if error_code(error) == "ResourceNotFoundException":
            result = failed(
                check,
                f"no EKS cluster named {name} in {region}",
                f"correct eks.cluster.existing in {_env_file(settings)} "
                f"(`aws eks list-clusters --region {region}` lists them), or the Region",
            )
        else:
            result = aws_error(check, error, "eks:DescribeCluster")
        return [result, skipped(f"cluster {name}'s settings and add-ons", "they need DescribeCluster")], False
    vpc = cluster.get("resourcesVpcConfig", {})
    return [
        _status(check, cluster, region),
        _version(check, cluster, settings),
        _authentication(check, cluster, region),
        _endpoint(check, cluster, region),
        _network(check, vpc, settings),
        _subnets(check, vpc, settings),
    ], True


def _status(check: str, cluster: Mapping[str, Any], region: str) -> CheckResult:
    status, name = str(cluster.get("status", "?")), cluster.get("name")
    if status == "ACTIVE":
        return passed(check, f"ACTIVE (platform {cluster.get('platformVersion', '?')})")
    issues = "; ".join(
        f"{i.get('code')}: {i.get('message')}" for i in cluster.get("health", {}).get("issues", [])
    )
    if status in ("CREATING", "UPDATING", "PENDING"):
        fix = f"wait until it is ACTIVE (aws eks wait cluster-active --name {name} --region {region}), then re-run"
    else:
        fix = (
            f"`aws eks describe-cluster --name {name} --region {region}` shows why; a deploy needs it ACTIVE"
        )
    return failed(check, status + (f" ({issues})" if issues else ""), fix)


def _version(check: str, cluster: Mapping[str, Any], settings: Settings) -> CheckResult:
    configured, actual = eks_table(settings).kubernetes_version, str(cluster.get("version"))
    check = f"{check} version"
    if actual == configured:
        return passed(check, f"Kubernetes {actual}, as eks.kubernetes_version")
    detail = f"the cluster runs Kubernetes {actual}; {_env_file(settings)} says eks.kubernetes_version = {configured!r}"
    if actual in get_args(KubernetesVersion):
        return failed(check, detail, f'set eks.kubernetes_version = "{actual}" in {_env_file(settings)}')
    return failed(
        check,
        detail,
        f"the stack (kubectl 1.{KUBECTL_MINOR}, Karpenter 1.14) manages {', '.join(get_args(KubernetesVersion))} "
        "only: upgrade "
        "the cluster to one of them, then set eks.kubernetes_version to it",
    )


def _authentication(check: str, cluster: Mapping[str, Any], region: str) -> CheckResult:
    mode = cluster.get("accessConfig", {}).get("authenticationMode", "CONFIG_MAP")
    check = f"{check} authentication mode"
    if mode in ACCESS_ENTRY_MODES:
        return passed(check, f"{mode}: access entries allowed")
    return failed(
        check,
        f"{mode}: no access entries, and the stack grants its kubectl Lambda's role access with one",
        f"aws eks update-cluster-config --name {cluster.get('name')} --region {region} --access-config "
        "authenticationMode=API_AND_CONFIG_MAP (one way: it cannot go back to CONFIG_MAP)",
    )


def _endpoint(check: str, cluster: Mapping[str, Any], region: str) -> CheckResult:
    check = f"{check} endpoint access"
    vpc = cluster.get("resourcesVpcConfig", {})
    public = "on" if vpc.get("endpointPublicAccess") else "off"
    if vpc.get("endpointPrivateAccess"):
        return passed(check, f"private on (public {public})")
    return failed(
        check,
        f"private off (public {public}): the stack's kubectl Lambda, in the VPC, reaches the API server through "
        "the private endpoint",
        f"aws eks update-cluster-config --name {cluster.get('name')} --region {region} --resources-vpc-config "
        "endpointPrivateAccess=true",
    )


def _network(check: str, vpc: Mapping[str, Any], settings: Settings) -> CheckResult:
    check = f"{check} VPC and security group"
    existing, cluster = settings.environment.network.existing_vpc, eks_table(settings).cluster
    vpc_id, group = vpc.get("vpcId"), vpc.get("clusterSecurityGroupId")
    problems, fixes = [], []
    configured_vpc = existing.vpc_id if existing else None
    if vpc_id != configured_vpc:
        problems.append(f"it is in {vpc_id}, network.existing_vpc.vpc_id is {configured_vpc}")
        fixes.append(
            f"set [network.existing_vpc] to the cluster's VPC {vpc_id} (its range and private subnets)"
        )
    if group != cluster.security_group_id:
        problems.append(
            f"its cluster security group is {group}, eks.cluster.security_group_id is {cluster.security_group_id}"
        )
        fixes.append(f'set eks.cluster.security_group_id = "{group}"')
    if problems:
        return failed(check, "; ".join(problems), f"in {_env_file(settings)}: {'; '.join(fixes)}")
    return passed(check, f"{vpc_id}, cluster security group {group}, as configured")


def _subnets(check: str, vpc: Mapping[str, Any], settings: Settings) -> CheckResult:
    """The configured subnet in the route's AZ among the cluster's: informs only. Nodes may run in any subnet of
    the cluster's VPC; which of the cluster's subnets is in the AZ would need ec2:DescribeSubnets."""
    check = f"{check} subnets"
    existing, zone = settings.environment.network.existing_vpc, eks_table(settings).availability_zone
    ours = (
        [
            s
            for s, z in zip(existing.private_subnet_ids, existing.availability_zones, strict=True)
            if z == zone
        ]
        if existing
        else []
    )
    theirs = [str(s) for s in vpc.get("subnetIds", [])]
    shared = [s for s in ours if s in theirs]
    if shared:
        return passed(
            check, f"{', '.join(shared)} ({zone}, from [network.existing_vpc]) is one of the cluster's"
        )
    return skipped(
        check,
        f"{', '.join(ours) or 'no configured subnet'} ({zone}, from [network.existing_vpc]) is not one of the "
        f"cluster's ({', '.join(theirs) or 'none'}): nodes may still run there, any subnet of the cluster's VPC "
        "reaches its private endpoint; the AZs of the cluster's subnets are not asked (ec2:DescribeSubnets)",
    )


def check_addons(eks: EKSClient, settings: Settings) -> list[CheckResult]:
    """Each of REQUIRED_ADDONS (and VOLUME_ADDON, air-gapped) installed as an EKS add-on and ACTIVE (an
    existing cluster's)."""
    name, region = eks_table(settings).cluster.existing, settings.environment.region
    assert name is not None, "add-ons are asked of an existing cluster only"
    try:
        installed = [
            a for page in eks.get_paginator("list_addons").paginate(clusterName=name) for a in page["addons"]
        ]
    except ClientError as error:
        return [aws_error(f"add-ons of cluster {name}", error, "eks:ListAddons")]
    results = []
    air_gapped = eks_table(settings).licence_mode == "air-gapped"
    for addon in (*REQUIRED_ADDONS, *((VOLUME_ADDON,) if air_gapped else ())):
        check = f"add-on {addon} on {name}"
        install = f"aws eks create-addon --cluster-name {name} --addon-name {addon} --region {region}"
        missing = failed(
            check,
            f"not installed as an EKS add-on (the cluster has {', '.join(installed) or 'none'})",
            f"{install} (a self-managed copy is not seen by the EKS API: adopt it with --resolve-conflicts "
            "OVERWRITE)",
        )
        if addon not in installed:
            results.append(missing)
            continue
        try:
            described: Mapping[str, Any] = eks.describe_addon(clusterName=name, addonName=addon)["addon"]
        except ClientError as error:
            gone = error_code(error) == "ResourceNotFoundException"
            results.append(missing if gone else aws_error(check, error, "eks:DescribeAddon"))
            continue
        status, version = str(described.get("status", "?")), described.get("addonVersion", "?")
        if status == "ACTIVE":
            results.append(passed(check, f"ACTIVE, {version}"))
            continue
        issues = "; ".join(
            f"{i.get('code')}: {i.get('message')}" for i in described.get("health", {}).get("issues", [])
        )
        results.append(
            failed(
                check,
                f"{status}, {version}" + (f" ({issues})" if issues else ""),
                f"`aws eks describe-addon --cluster-name {name} --addon-name {addon} --region {region}` shows its "
                "health; fix it (aws eks update-addon) until it is ACTIVE",
            )
        )
    return results


# The service accounts the stack gives a Pod Identity association (constructs/karpenter.py, add_ons.py;
# services.py in the route's namespace): on your cluster, one already there means a controller of yours that the
# stack's Helm release of the same name would take over (tests/preflight/test_preflight_eks.py holds the list to
# the template's).
CONTROLLER_ACCOUNTS = (
    ("kube-system", "karpenter"),
    ("kube-system", "aws-load-balancer-controller"),
    ("keda", "keda-operator"),
)
WORKLOAD_ACCOUNTS = tuple(SERVICE_ACCOUNTS[name] for name in ASSOCIATED)


def check_no_identity_clash(eks: EKSClient, settings: Settings) -> CheckResult:
    """No Pod Identity association on an existing cluster for a service account the stack associates: its
    CfnPodIdentityAssociation would fail, and a controller already there would meet the stack's release."""
    config = eks_table(settings)
    name = config.cluster.existing
    assert name is not None, "asked only for an existing cluster"
    check = f"Pod Identity associations on {name}"
    ours = {*CONTROLLER_ACCOUNTS, *((config.namespace, account) for account in WORKLOAD_ACCOUNTS)}
    try:
        pages = eks.get_paginator("list_pod_identity_associations").paginate(clusterName=name)
        there = {(a["namespace"], a["serviceAccount"]) for page in pages for a in page["associations"]}
    except ClientError as error:
        return aws_error(check, error, "eks:ListPodIdentityAssociations")
    clash = sorted(ours & there)
    if not clash:
        return passed(check, "none for the service accounts the stack's controllers and workloads use")
    shown = ", ".join(f"{namespace}/{account}" for namespace, account in clash)
    return failed(
        check,
        f"{shown} already {'has' if len(clash) == 1 else 'have'} one: a controller or workload of yours runs "
        "there, and the stack's Helm release of the same name would take it over (or its association fail)",
        "remove it from the cluster, or deploy the route to a cluster that does not run it "
        '(docs/eks.md, section 2, "An existing cluster")',
    )
