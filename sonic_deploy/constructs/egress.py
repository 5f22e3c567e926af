"""Egress of the ECS route's security groups, in either licence mode: HTTPS, and the peers' own ports."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Aws, Duration, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import custom_resources as cr
from constructs import Construct

from sonic_deploy.constructs.findings import (
    acknowledge,
    acknowledge_custom_resource_handler,
    ignore_cfn_lint_on,
)
from sonic_deploy.constructs.retention import KEEP_ONCE_CREATED

HTTPS = ec2.Port.tcp(443)
# S3's AWS-managed prefix list in a Region (Amazon VPC User Guide, "AWS-managed prefix lists").
S3_PREFIX_LIST_NAME = f"com.amazonaws.{Aws.REGION}.s3"
PREFIX_LIST_ID_PATH = "PrefixLists.0.PrefixListId"


@dataclass(frozen=True)
class PrivateAws:
    """Where a group reaches AWS without the internet: the interface endpoints' group and S3's prefix list."""

    endpoints: ec2.ISecurityGroup
    s3_prefix_list_id: str


def https_only(security_group: ec2.SecurityGroup, private_aws: PrivateAws | None = None) -> None:
    """Allow HTTPS out of a group made with `allow_all_outbound=False`; its peers' ports come from
    `connections.allow_from/allow_to` (EFS's 2049, NATS's 4222, the services' ports), each to the peer's group.

    What calls out on 443: every task and GPU host calls the interface endpoints (ECR, logs, Secrets Manager,
    ECS, monitoring, EC2) and S3 through the gateway endpoint (image layers, the AL2023 repositories). In connected mode the internet, through NAT, is called by the licence proxy (Cartesia's
    cloud: the only service Cartesia says calls out, docs.cartesia.ai/self-hosted/architecture) and by the API
    server and workers (GCS: the API server syncs voice migrations and the workers LoRA checkpoints from the
    customer's bucket, docs.cartesia.ai/self-hosted/provisioned-resources). No container needs another port
    or protocol out, so none is open.

    Air-gapped, the isolated subnets route only the VPC and the S3 gateway, so 443 to 0.0.0.0/0 reaches exactly
    those. Connected, the private subnets route the rest to NAT: a group Cartesia documents no internet need for
    (NATS, the scraper, the GPU hosts) gets `private_aws` instead, 443 to the endpoints' group and to S3's
    prefix list only (docs/security.md, "The network"). DNS goes to the VPC resolver, which security groups do not
    filter. An existing VPC is routed as its owner routes it.
    """
    if private_aws is None:
        security_group.add_egress_rule(
            ec2.Peer.any_ipv4(),
            HTTPS,
            "HTTPS to the VPC's endpoints and S3's gateway (and, connected, the internet through NAT)",
        )
        return
    security_group.add_egress_rule(
        ec2.Peer.security_group_id(private_aws.endpoints.security_group_id),
        HTTPS,
        "HTTPS to the VPC's interface endpoints",
    )
    security_group.add_egress_rule(
        ec2.Peer.prefix_list(private_aws.s3_prefix_list_id), HTTPS, "HTTPS to S3 through its gateway endpoint"
    )


class S3PrefixList(Construct):
    """The Region's S3 prefix-list id, which no CloudFormation resource returns: EC2's
    DescribeManagedPrefixLists at deploy (a custom resource), by a role that may make only that call and write
    its own encrypted, expiring log group."""

    def __init__(
        self, scope: Construct, construct_id: str, *, key: kms.IKey, log_retention: logs.RetentionDays
    ) -> None:
        super().__init__(scope, construct_id)
        log_group = logs.LogGroup(
            self,
            "Logs",
            encryption_key=key,
            retention=log_retention,
            removal_policy=KEEP_ONCE_CREATED,
        )
        role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description="sonic-deploy: look up S3's prefix list for the security groups",
        )
        policy = iam.ManagedPolicy(
            self,
            "Policy",
            description="sonic-deploy: describe managed prefix lists, write the lookup's own logs",
            statements=[
                iam.PolicyStatement(
                    sid="DescribeManagedPrefixListsTakesNoResource",
                    actions=["ec2:DescribeManagedPrefixLists"],
                    resources=["*"],
                ),
                iam.PolicyStatement(
                    sid="WriteItsOwnLogs",
                    actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                    resources=[log_group.log_group_arn],
                ),
            ],
            roles=[role],
        )
        acknowledge(
            policy,
            "AwsSolutions-IAM5[Resource::*]",
            reason="ec2:DescribeManagedPrefixLists has no resource-level permission (Service Authorization "
            "Reference); the other statement names the lookup's own log group",
        )
        # The filter and the answer's shape: EC2 API Reference, DescribeManagedPrefixLists (`prefix-list-name`).
        sdk_call = cr.AwsSdkCall(
            service="EC2",
            action="describeManagedPrefixLists",
            parameters={"Filters": [{"Name": "prefix-list-name", "Values": [S3_PREFIX_LIST_NAME]}]},
            physical_resource_id=cr.PhysicalResourceId.of(S3_PREFIX_LIST_NAME),
            output_paths=[PREFIX_LIST_ID_PATH],
        )
        lookup = cr.AwsCustomResource(
            self,
            "Lookup",
            on_create=sdk_call,
            on_update=sdk_call,
            role=role.without_policy_updates(),
            install_latest_aws_sdk=False,
            log_group=log_group,
            timeout=Duration.minutes(2),
        )
        lookup.node.add_dependency(policy)
        self.prefix_list_id = lookup.get_response_field(PREFIX_LIST_ID_PATH)
        handler = Stack.of(self).node.try_find_child(
            f"AWS{cr.AwsCustomResource.PROVIDER_FUNCTION_UUID.replace('-', '')}"
        )
        assert isinstance(handler, lambda_.Function), "AwsCustomResource's singleton handler moved"
        acknowledge_custom_resource_handler(
            handler,
            outside_vpc="it calls only EC2's API, at deploy time; outside the VPC it has the Lambda service's "
            "network, never a path into the VPC",
        )
        ignore_cfn_lint_on(
            handler,
            "W3005",
            reason="AwsCustomResource writes a DependsOn on the role beside the GetAtt of it: the extra edge is "
            "CDK's and orders nothing differently",
        )
