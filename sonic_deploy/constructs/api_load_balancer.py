"""The private entry point: an internal Network Load Balancer in the workers' AZ, TCP to the API server."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_elasticloadbalancingv2 as elbv2
from constructs import Construct

from sonic_deploy.constructs.findings import acknowledge
from sonic_deploy.constructs.placement import SingleAzPlacement
from sonic_deploy.constructs.sonic_service import SonicService


class ApiLoadBalancer(Construct):
    """TCP passes WebSocket and streamed HTTP through untouched; an ALB would need a second AZ. The idle
    timeout outlasts pauses within a stream, and deregistration waits for in-flight streams to finish."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        vpc: ec2.IVpc,
        placement: SingleAzPlacement,
        api: SonicService,
        listener_port: int,
        idle_timeout: Duration,
        deregistration_delay: Duration,
        client_cidrs: Sequence[str] = (),
        health_check_path: str = "/status",
    ) -> None:
        super().__init__(scope, construct_id)
        self.security_group = ec2.SecurityGroup(
            self,
            "SecurityGroup",
            vpc=vpc,
            description="Sonic API load balancer: clients inside the VPC only",
            allow_all_outbound=False,
        )
        self.security_group.add_ingress_rule(
            ec2.Peer.ipv4(vpc.vpc_cidr_block), ec2.Port.tcp(listener_port), "Sonic API from inside the VPC"
        )
        for cidr in client_cidrs:
            self.security_group.add_ingress_rule(
                ec2.Peer.ipv4(cidr), ec2.Port.tcp(listener_port), f"Sonic API from client network {cidr}"
            )
        self.security_group.add_egress_rule(api.security_group, ec2.Port.tcp(api.port), "to the API server")
        api.allow_from(self.security_group, "from the load balancer")

        self.load_balancer = elbv2.NetworkLoadBalancer(
            self,
            "LoadBalancer",
            vpc=vpc,
            internet_facing=False,
            vpc_subnets=placement.subnets,
            security_groups=[self.security_group],
            cross_zone_enabled=False,
        )
        acknowledge(
            self.security_group,
            "AwsSolutions-EC23",
            reason="ingress is the listener port from this VPC's own CIDR (a token), not 0.0.0.0/0",
        )
        acknowledge(
            self.load_balancer,
            "AwsSolutions-ELB2",
            reason="NLB access logs cover TLS listeners only; this listener is TCP (streams pass through)",
        )
        self.target_group = elbv2.NetworkTargetGroup(
            self,
            "ApiTargets",
            vpc=vpc,
            port=api.port,
            protocol=elbv2.Protocol.TCP,
            target_type=elbv2.TargetType.IP,
            deregistration_delay=deregistration_delay,
            health_check=elbv2.HealthCheck(
                protocol=elbv2.Protocol.HTTP,
                path=health_check_path,
                port=str(api.port),
                interval=Duration.seconds(10),
                healthy_threshold_count=2,
                unhealthy_threshold_count=2,
            ),
        )
        self.listener = self.load_balancer.add_listener(
            "Listener",
            port=listener_port,
            protocol=elbv2.Protocol.TCP,
            tcp_idle_timeout=idle_timeout,
            default_target_groups=[self.target_group],
        )
        api.service.attach_to_network_target_group(self.target_group)

    def unhealthy_targets(self) -> cloudwatch.Metric:
        return self.target_group.metrics.un_healthy_host_count(
            statistic="Maximum", period=Duration.minutes(1)
        )
