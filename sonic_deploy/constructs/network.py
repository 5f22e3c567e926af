"""The VPC both routes run in: private subnets, interface endpoints, flow logs."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Aws, CfnResource, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from constructs import Construct

from sonic_deploy.constructs.endpoint_policies import cloudformation_responses, interface_endpoint_policy
from sonic_deploy.constructs.findings import acknowledge_compliance, acknowledge_custom_resource_handler
from sonic_deploy.constructs.naming import id_from_name
from sonic_deploy.constructs.retention import KEEP_ONCE_CREATED

# Amazon Transcribe's streaming WebSocket API listens on 8443, not 443 (wss://transcribestreaming.REGION
# .amazonaws.com:8443: client/transcribe.py; Transcribe Developer Guide, "Using Amazon Transcribe streaming
# with WebSockets"), the probe task's turn hop.
TRANSCRIBE_STREAMING_PORT = 8443
# Interface endpoints whose service is called on a port besides 443, which their group admits from the VPC
# too. UNVERIFIED on AWS: that the transcribestreaming endpoint answers on 8443 as the public endpoint does;
# Transcribe's PrivateLink documentation names the service, not its ports.
OTHER_ENDPOINT_PORTS = {"transcribestreaming": TRANSCRIBE_STREAMING_PORT}
PRIVATE_SUBNET_MASK = 20  # 4,091 addresses per AZ: room for endpoint ENIs and many GPU tasks

# CDK's stack-wide provider behind `restrict_default_security_group` (aws-cdk-lib aws-ec2 lib/vpc.ts).
RESTRICT_DEFAULT_SG_PROVIDER = "Custom::VpcRestrictDefaultSGCustomResourceProvider"


class Network(Construct):
    """A new VPC across the named AZs (or an existing one), with interface endpoints so that traffic to AWS
    services, inference included, never leaves AWS's network, and flow logs to an encrypted log group.

    `egress=False` builds isolated private subnets only (no NAT, no internet gateway); `egress=True` adds
    public subnets and NAT for routes whose containers must call out (the ECS route's licence check).

    Every endpoint has a policy: the S3 gateway endpoint lets through reads of this account's buckets and of
    the objects in `s3_reads` (and lists of the buckets in `s3_lists`), writes of the objects named with
    `allow_s3_writes` (the probe's runs) and, with `allow_custom_resource_responses`, of CloudFormation's
    custom-resource answers, and nothing else; each interface endpoint lets through only this
    account's principals, on this account's resources where the
    service's actions have resources (`interface_endpoint_policy`).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        key: kms.IKey,
        flow_log_retention: logs.RetentionDays,
        availability_zones: Sequence[str],
        cidr: str,
        interface_services: Sequence[ec2.InterfaceVpcEndpointAwsService],
        egress: bool = False,
        nat_gateways: int = 1,
        existing_vpc: ec2.IVpc | None = None,
        endpoint_clients: Sequence[str] = (),
        endpoint_zones: Sequence[str] | None = None,
        s3_reads: Sequence[str] = (),
        s3_lists: Sequence[str] = (),
    ) -> None:
        super().__init__(scope, construct_id)
        private_type = ec2.SubnetType.PRIVATE_WITH_EGRESS if egress else ec2.SubnetType.PRIVATE_ISOLATED
        if existing_vpc is not None:
            self.vpc: ec2.IVpc = existing_vpc
        else:
            subnets = [
                ec2.SubnetConfiguration(
                    name="Private", subnet_type=private_type, cidr_mask=PRIVATE_SUBNET_MASK
                )
            ]
            if egress:
                # The public subnets hold the NAT gateways only (the load balancer is internal, in the
                # private subnets), and a NAT gateway has its own Elastic IP: nothing there needs one
                # assigned at launch.
                subnets.insert(
                    0,
                    ec2.SubnetConfiguration(
                        name="Public",
                        subnet_type=ec2.SubnetType.PUBLIC,
                        cidr_mask=24,
                        map_public_ip_on_launch=False,
                    ),
                )
            self.vpc = ec2.Vpc(
                self,
                "Vpc",
                ip_addresses=ec2.IpAddresses.cidr(cidr),
                availability_zones=list(availability_zones),
                subnet_configuration=subnets,
                nat_gateways=nat_gateways if egress else 0,
                restrict_default_security_group=True,
            )
            _acknowledge_public_routes(self.vpc)
            _skip_restrict_default_sg_provider(Stack.of(self))
        # An imported VPC lists its subnets as private whatever their routes; a new one by its real type.
        self.private_subnets: list[ec2.ISubnet] = (
            self.vpc.isolated_subnets if existing_vpc is None and not egress else self.vpc.private_subnets
        )

        flow_logs = logs.LogGroup(
            self,
            "FlowLogs",
            encryption_key=key,
            retention=flow_log_retention,
            removal_policy=KEEP_ONCE_CREATED,
        )
        self.flow_log = ec2.FlowLog(
            self,
            "FlowLog",
            resource_type=ec2.FlowLogResourceType.from_vpc(self.vpc),
            destination=ec2.FlowLogDestination.to_cloud_watch_logs(flow_logs),
            traffic_type=ec2.FlowLogTrafficType.ALL,
        )
        acknowledge_compliance(
            self.flow_log.node.find_child("IAMRole"),
            "IAMNoInlinePolicy",
            reason="the flow log's role (CDK's) may write only to its own log group, in an inline policy that "
            "lives and goes with the role",
        )

        # Model data (SageMaker) and image layers (ECR) come from S3: a gateway endpoint, free, keeps that
        # traffic private and is the only way to S3 from isolated subnets.
        self.s3_endpoint = ec2.GatewayVpcEndpoint(
            self,
            "S3Endpoint",
            vpc=self.vpc,
            service=ec2.GatewayVpcEndpointAwsService.S3,
            subnets=[ec2.SubnetSelection(subnets=self.private_subnets)],
        )
        self.s3_endpoint.add_to_policy(
            iam.PolicyStatement(
                sid="ReadThisAccountsBuckets",
                principals=[iam.AnyPrincipal()],
                actions=["s3:GetObject", "s3:ListBucket"],
                resources=["*"],
                conditions={"StringEquals": {"aws:ResourceAccount": Aws.ACCOUNT_ID}},
            )
        )
        if s3_reads:
            # Read with credentials that are not this account's (ECR's presigned layer URLs) or none (the
            # public AL2023 repositories): by object, not by principal.
            self.s3_endpoint.add_to_policy(
                iam.PolicyStatement(
                    sid="ReadAwsOwnedObjects",
                    principals=[iam.AnyPrincipal()],
                    actions=["s3:GetObject"],
                    resources=list(s3_reads),
                )
            )
        if s3_lists:
            # Listing the buckets of those reads (a download of a prefix lists it first).
            self.s3_endpoint.add_to_policy(
                iam.PolicyStatement(
                    sid="ListAwsOwnedBuckets",
                    principals=[iam.AnyPrincipal()],
                    actions=["s3:ListBucket"],
                    resources=list(s3_lists),
                )
            )

        self.endpoint_security_group = ec2.SecurityGroup(
            self,
            "EndpointSecurityGroup",
            vpc=self.vpc,
            description="Interface endpoints: HTTPS from inside the VPC only",
            allow_all_outbound=False,
        )
        # The VPC's range as config states it (the imported VPC's too), not the VPC's CidrBlock attribute: the
        # rules that read ingress ranges (cdk-nag's EC2RestrictedCommonPorts and EC23) cannot read a token.
        # No egress rule: an endpoint only answers, and a security group lets replies out by itself.
        self.endpoint_security_group.add_ingress_rule(
            ec2.Peer.ipv4(cidr), ec2.Port.tcp(443), "HTTPS from the VPC"
        )
        for service in interface_services:
            if service.short_name in OTHER_ENDPOINT_PORTS:
                port = OTHER_ENDPOINT_PORTS[service.short_name]
                self.endpoint_security_group.add_ingress_rule(
                    ec2.Peer.ipv4(cidr), ec2.Port.tcp(port), f"{service.short_name} on {port} from the VPC"
                )
        for client in endpoint_clients:
            self.endpoint_security_group.add_ingress_rule(
                ec2.Peer.ipv4(client), ec2.Port.tcp(443), f"HTTPS from client network {client}"
            )
        # An interface endpoint costs per AZ and hour: only in the AZs that use it.
        endpoint_subnets = [
            subnet
            for subnet in self.private_subnets
            if endpoint_zones is None or subnet.availability_zone in endpoint_zones
        ]
        self.endpoints: dict[str, ec2.InterfaceVpcEndpoint] = {}
        for service in interface_services:
            endpoint_id = id_from_name(service.short_name)
            self.endpoints[service.short_name] = ec2.InterfaceVpcEndpoint(
                self,
                f"{endpoint_id}Endpoint",
                vpc=self.vpc,
                service=service,
                subnets=ec2.SubnetSelection(subnets=endpoint_subnets),
                security_groups=[self.endpoint_security_group],
                private_dns_enabled=True,
                # Not CDK's own ingress from the VPC's CidrBlock attribute: the group's rules above say who.
                open=False,
            )
            for statement in interface_endpoint_policy(self, service.short_name):
                self.endpoints[service.short_name].add_to_policy(statement)

    def allow_custom_resource_responses(self) -> None:
        """Let custom resource handlers in the VPC answer CloudFormation through the S3 gateway endpoint: a PUT
        to a URL CloudFormation presigned (its credentials, not this account's), so by object, not principal."""
        self.s3_endpoint.add_to_policy(
            iam.PolicyStatement(
                sid="AnswerCloudFormation",
                principals=[iam.AnyPrincipal()],
                actions=["s3:PutObject"],
                resources=[cloudformation_responses(self)],
            )
        )

    def allow_s3_writes(self, sid: str, objects: Sequence[str]) -> None:
        """Let this account's principals write `objects` (ARNs, e.g. a bucket's prefix) through the S3 gateway
        endpoint, which lets through only reads otherwise."""
        self.s3_endpoint.add_to_policy(
            iam.PolicyStatement(
                sid=sid,
                principals=[iam.AnyPrincipal()],
                actions=["s3:PutObject"],
                resources=list(objects),
                conditions={"StringEquals": {"aws:PrincipalAccount": Aws.ACCOUNT_ID}},
            )
        )


def import_vpc(
    scope: Construct,
    construct_id: str,
    *,
    vpc_id: str,
    vpc_cidr: str,
    availability_zones: Sequence[str],
    private_subnet_ids: Sequence[str],
    private_route_table_ids: Sequence[str] = (),
) -> ec2.IVpc:
    """An existing VPC named in config, without a context lookup (synth stays offline)."""
    return ec2.Vpc.from_vpc_attributes(
        scope,
        construct_id,
        vpc_id=vpc_id,
        vpc_cidr_block=vpc_cidr,
        availability_zones=list(availability_zones),
        private_subnet_ids=list(private_subnet_ids),
        private_subnet_route_table_ids=list(private_route_table_ids) or None,
    )


def _acknowledge_public_routes(vpc: ec2.Vpc) -> None:
    """The public subnets' 0.0.0.0/0 route to the internet gateway: the NAT gateways there reach the
    internet by it, and nothing else is in those subnets."""
    for subnet in vpc.public_subnets:
        route = subnet.node.try_find_child("DefaultRoute")
        if route is not None:
            acknowledge_compliance(
                route,
                "VPCNoUnrestrictedRouteToIGW",
                reason="the public subnet's default route to the internet gateway is how its NAT gateway "
                "reaches the internet for the private subnets; the public subnets hold only NAT gateways",
            )


def _skip_restrict_default_sg_provider(stack: Stack) -> None:
    """The Lambda function behind CDK's `restrict_default_security_group`: CloudFormation cannot take rules
    off a VPC's default security group (it can only add them, with AWS::EC2::SecurityGroupIngress), so CDK
    revokes them with a custom resource, one provider per stack."""
    provider = stack.node.try_find_child(RESTRICT_DEFAULT_SG_PROVIDER)
    handler = provider.node.try_find_child("Handler") if provider is not None else None
    role = provider.node.try_find_child("Role") if provider is not None else None
    if not isinstance(handler, CfnResource):
        return
    if isinstance(role, CfnResource):
        # CDK's explicit DependsOn repeats what the function's GetAtt of the role already orders
        # (cfn-lint W3005).
        handler.remove_dependency(role)
    acknowledge_custom_resource_handler(
        handler,
        outside_vpc="it calls only EC2's API (RevokeSecurityGroupIngress/Egress) from the Lambda service's "
        "network and needs nothing in the VPC; in an isolated VPC it would need an EC2 endpoint to work at all",
    )
