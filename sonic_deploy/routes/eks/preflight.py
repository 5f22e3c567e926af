"""Checks for the EKS route (docs/eks.md, section 7): the G and VT vCPU quota and each GPU type in the route's
AZ (shared with the ECS route: sonic_deploy/preflight/), then the cluster (preflight_cluster.py), the charts
and images in [eks.mirror] (preflight_mirror.py) and the secrets the stack imports. `before_deploy`: those
secrets; `after_deploy`: the deployed stack."""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import TYPE_CHECKING

from botocore.exceptions import ClientError

from sonic_deploy.config import Settings
from sonic_deploy.preflight.deployed_stack import check_route_stack
from sonic_deploy.preflight.gpu_quota import GpuGroup, check_g_and_vt_quota
from sonic_deploy.preflight.offerings import Placement, check_types_offered
from sonic_deploy.preflight.results import CheckResult, aws_error, failed, passed, skipped
from sonic_deploy.preflight.secrets import check_named_secrets
from sonic_deploy.routes.eks import outputs
from sonic_deploy.routes.eks.endpoints import AIR_GAPPED
from sonic_deploy.routes.eks.preflight_cluster import (
    check_addons,
    check_existing_cluster,
    check_no_identity_clash,
    check_version_support,
    eks_table,
)
from sonic_deploy.routes.eks.preflight_mirror import check_mirror

if TYPE_CHECKING:
    from mypy_boto3_ec2 import EC2Client
    from mypy_boto3_secretsmanager import SecretsManagerClient
    from mypy_boto3_service_quotas import ServiceQuotasClient

    from sonic_deploy.preflight.runner import AwsClients

ROUTE = "eks"


def check_gpu_vcpu_quota(quotas: ServiceQuotasClient, ec2: EC2Client, settings: Settings) -> CheckResult:
    """`max_workers + 1` GPU nodes of the largest of the route's types: Karpenter launches one node per worker,
    and one more while a node is replaced. Karpenter's nodes carry no CloudFormation stack tag, so once the
    route runs, its own GPU nodes are counted with the account's others (an overstatement, never short)."""
    eks = eks_table(settings)
    nodes = eks.max_workers + 1
    group = GpuGroup(
        f"{nodes} nodes (max_workers {eks.max_workers} + 1 replacing)", nodes, eks.instance_types
    )
    return check_g_and_vt_quota(quotas, ec2, settings, settings.stack_name(ROUTE), [group])


def check_instance_offered(ec2: EC2Client, settings: Settings) -> list[CheckResult]:
    """Each GPU type (a NodePool each) offered in `eks.availability_zone`, the AZ of every node."""
    eks = eks_table(settings)
    placement = Placement(
        eks.availability_zone,
        eks.instance_types,
        "eks.availability_zone",
        "eks.instance_type / eks.capacity.instance_types",
    )
    return check_types_offered(ec2, [placement])


def check_vpc_endpoints(ec2: EC2Client, settings: Settings) -> list[CheckResult]:
    """Air-gapped in an existing VPC: each interface endpoint the route needs (endpoints.py) is the VPC's own,
    available (the stack makes none there: a second with private DNS would be refused)."""
    eks, vpc = eks_table(settings), settings.environment.network.existing_vpc
    if vpc is None or eks.licence_mode != "air-gapped":
        return []
    region = settings.environment.region
    try:
        pages = ec2.get_paginator("describe_vpc_endpoints").paginate(
            Filters=[{"Name": "vpc-id", "Values": [vpc.vpc_id]}]
        )
        found = {
            str(e.get("ServiceName"))
            for page in pages
            for e in page["VpcEndpoints"]
            if str(e.get("State", "")).lower() == "available"
        }
    except ClientError as error:
        return [aws_error(f"VPC endpoints of {vpc.vpc_id}", error, "ec2:DescribeVpcEndpoints")]
    results = []
    for name in AIR_GAPPED:
        service, check = f"com.amazonaws.{region}.{name}", f"endpoint {name} in {vpc.vpc_id}"
        if service in found:
            results.append(passed(check, "available"))
        else:
            results.append(
                failed(
                    check,
                    f"none available: air-gapped, the cluster's nodes and controllers reach {name} only through it",
                    f"aws ec2 create-vpc-endpoint --vpc-id {vpc.vpc_id} --vpc-endpoint-type Interface "
                    f"--service-name {service} --private-dns-enabled --subnet-ids <a subnet in "
                    f"{eks.availability_zone}> --security-group-ids <a group open to the VPC on 443>",
                )
            )
    return results


def secret_names(settings: Settings) -> list[str]:
    """The secrets the stack imports: none when it creates them (`secrets.create = true`); air-gapped, the
    licence's always (`sonic-deploy licence upload` makes it before the first deploy)."""
    eks = eks_table(settings)
    secrets = eks.secrets
    offline = [settings.licence_secret_name(secrets)] if eks.licence_mode == "air-gapped" else []
    return ([] if secrets.create else [secrets.api_key, secrets.registry_credentials]) + offline


def checks(
    clients: AwsClients, settings: Settings, account: str, *, today: date | None = None
) -> list[CheckResult]:
    """The EKS route's part of `sonic-deploy preflight`, in the order a newcomer would fix them. `today`
    (default: the UTC date) is what the Kubernetes version's support dates are compared with."""
    eks = eks_table(settings)
    results = [check_gpu_vcpu_quota(clients.service_quotas, clients.ec2, settings)]
    results.extend(check_instance_offered(clients.ec2, settings))
    results.extend(check_vpc_endpoints(clients.ec2, settings))
    existing, found = eks.cluster.existing, False
    if existing is not None:  # a new cluster: the stack makes it as configured, nothing of it to ask
        cluster_results, found = check_existing_cluster(clients.eks, settings)
        results.extend(cluster_results)
    results.append(check_version_support(clients.eks, settings, today or datetime.now(UTC).date()))
    if found:
        results.extend(check_addons(clients.eks, settings))
        results.append(check_no_identity_clash(clients.eks, settings))
    results.extend(check_mirror(clients.ecr, settings, account))
    if eks.secrets.create:
        results.append(
            skipped("secrets", "secrets.create = true: the stack creates them (replace the placeholders)")
        )
    results.extend(check_named_secrets(clients.secretsmanager, secret_names(settings)))
    return results


def before_deploy(settings: Settings, secretsmanager: SecretsManagerClient) -> list[CheckResult]:
    """Every secret the stack imports: a pod whose secret is missing never starts, tens of minutes in."""
    eks = settings.environment.eks
    if eks is None:  # --before-deploy eks for an environment without the route: nothing of it to check
        return []
    results = []
    if eks.secrets.create:
        results.append(skipped("secrets", "secrets.create = true: the stack creates them"))
    results.extend(check_named_secrets(secretsmanager, secret_names(settings)))
    return results


def after_deploy(clients: AwsClients, settings: Settings) -> list[CheckResult]:
    """The stack is deployed, not failed, with the outputs `connect` and the probe read; what runs in the
    cluster (nodes, pods, the scaler) is Kubernetes', not asked here."""
    result, stack = check_route_stack(
        clients.cloudformation, settings, ROUTE, (*outputs.FOR_CONNECT, outputs.CLUSTER_NAME)
    )
    if stack is None:
        return [result]
    found = passed(
        result.check,
        f"{stack.status}: cluster {stack.outputs[outputs.CLUSTER_NAME]}, API {stack.outputs[outputs.API_URL]}",
    )
    return [
        found,
        skipped(
            "the cluster's workloads",
            "nodes, pods and the scaler are Kubernetes' to show (kubectl), not AWS APIs': not checked here",
        ),
    ]
