"""The VPC both routes run in: private subnets, interface endpoints, flow logs."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from constructs import Construct

from sonic_deploy.constructs.findings import acknowledge
from sonic_deploy.constructs.naming import id_from_name
from sonic_deploy.constructs.retention import KEEP_ONCE_CREATED

PRIVATE_SUBNET_MASK = 20  # 4,091 addresses per AZ: room for endpoint ENIs and many GPU tasks


class Network(Construct):
    """A new VPC across the named AZs (or an existing one), with interface endpoints so that traffic to AWS
    services, inference included, never leaves AWS's network, and flow logs to an encrypted log group.

    `egress=False` builds isolated private subnets only (no NAT, no internet gateway); `egress=True` adds
    public subnets and NAT for routes whose containers must call out (the ECS route's licence check).
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
                subnets.insert(
                    0, ec2.SubnetConfiguration(name="Public", subnet_type=ec2.SubnetType.PUBLIC, cidr_mask=24)
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

        # Model data (SageMaker) and image layers (ECR) come from S3: a gateway endpoint, free, keeps that
        # traffic private and is the only way to S3 from isolated subnets.
        self.s3_endpoint = ec2.GatewayVpcEndpoint(
            self,
            "S3Endpoint",
            vpc=self.vpc,
            service=ec2.GatewayVpcEndpointAwsService.S3,
            subnets=[ec2.SubnetSelection(subnets=self.private_subnets)],
        )

        self.endpoint_security_group = ec2.SecurityGroup(
            self,
            "EndpointSecurityGroup",
            vpc=self.vpc,
            description="Interface endpoints: HTTPS from inside the VPC only",
            allow_all_outbound=False,
        )
        self.endpoint_security_group.add_ingress_rule(
            ec2.Peer.ipv4(self.vpc.vpc_cidr_block), ec2.Port.tcp(443), "HTTPS from the VPC"
        )
        for cidr in endpoint_clients:
            self.endpoint_security_group.add_ingress_rule(
                ec2.Peer.ipv4(cidr), ec2.Port.tcp(443), f"HTTPS from client network {cidr}"
            )
        acknowledge(
            self.endpoint_security_group,
            "AwsSolutions-EC23",
            reason="ingress is HTTPS from this VPC's own CIDR (a token the rule cannot read), not 0.0.0.0/0",
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
