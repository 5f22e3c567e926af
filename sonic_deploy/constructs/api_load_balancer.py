"""The private entry point: an internal Network Load Balancer in the workers' AZ, TLS (or plain TCP in dev)
in front of the API server, its TLS connections logged to an S3 bucket of its own. Shared: a self-hosted route
hands it the API server's port, security group and targets (docs/eks.md, section 10)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from aws_cdk import Annotations, Aws, Duration
from aws_cdk import aws_acmpca as acmpca
from aws_cdk import aws_certificatemanager as acm
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_elasticloadbalancingv2 as elbv2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from sonic_deploy.constructs.encryption import encrypted_bucket
from sonic_deploy.constructs.findings import acknowledge, acknowledge_compliance, skip_checkov
from sonic_deploy.constructs.placement import SingleAzPlacement
from sonic_deploy.constructs.retention import KEEP_ONCE_CREATED

# AWS's recommendation for new TLS listeners ("Security policies for your Network Load Balancer"): TLS 1.3
# and 1.2 with forward-secret AEAD ciphers only, and hybrid post-quantum key exchange (ML-KEM) for clients
# that offer it. Without a policy, CloudFormation and CDK give a listener ELBSecurityPolicy-2016-08 (TLS 1.0).
# With a TLS 1.3 listener policy the NLB's own connections to targets would use ELBSecurityPolicy-TLS13-1-0-
# 2021-06, but the targets here are plain TCP: TLS ends at the load balancer, inside the VPC.
SSL_POLICY = elbv2.SslPolicy.TLS13_12_RES_PQ
# "The connection idle timeout for TLS listeners is 350 seconds and can't be modified" (Elastic Load
# Balancing, "Update the TCP idle timeout for your Network Load Balancer listener").
TLS_IDLE_TIMEOUT = Duration.seconds(350)
# The synth warning on a plain listener (acknowledgeable as annotation::<id>, were that ever wanted).
PLAINTEXT_WARNING = "sonic-deploy:plaintext-listener"
ACCESS_LOG_PREFIX = "api"


@dataclass(frozen=True)
class ApiCertificate:
    """Where the listener's certificate comes from: an ACM certificate you have (imported, or issued
    earlier), or one the stack has ACM issue from your AWS Private CA for `domain_name`."""

    domain_name: str
    certificate_arn: str | None = None
    private_ca_arn: str | None = None

    def __post_init__(self) -> None:
        if (self.certificate_arn is None) == (self.private_ca_arn is None):
            raise ValueError("give one of certificate_arn and private_ca_arn")


@dataclass(frozen=True)
class AccessLogs:
    """The NLB's access logs: kept this long, encrypted with this key."""

    retention: Duration
    key: kms.IKey


class ApiLoadBalancer(Construct):
    """TLS ends here and TCP carries the stream on to the API server (WebSocket and streamed HTTP pass
    through untouched); an ALB would need a second AZ. Deregistration waits for in-flight streams to finish.
    Without a certificate the listener is plain TCP, whose idle timeout outlasts pauses within a stream.

    The API server listens on `api_port` behind `api_security_group`; `api_targets` register into
    `target_group` here (an ECS service), or none, for a route whose controller registers them by its ARN."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        vpc: ec2.IVpc,
        vpc_cidr: str,
        placement: SingleAzPlacement,
        api_port: int,
        api_security_group: ec2.ISecurityGroup,
        api_targets: Sequence[elbv2.INetworkLoadBalancerTarget],
        config_table: str,
        listener_port: int,
        idle_timeout: Duration,
        deregistration_delay: Duration,
        certificate: ApiCertificate | None,
        access_logs: AccessLogs | None,
        deletion_protection: bool,
        client_cidrs: Sequence[str] = (),
        health_check_path: str = "/status",
        plaintext_accepted_by: str | None = None,
    ) -> None:
        """`plaintext_accepted_by`: with no certificate, the setting that accepts a plain listener; only then
        is the compliance packs' certificate finding acknowledged (else it stands, and the gate fails).
        `config_table`: the route's config table the warning and the findings' reasons name (`ecs.api`)."""
        super().__init__(scope, construct_id)
        self.security_group = ec2.SecurityGroup(
            self,
            "SecurityGroup",
            vpc=vpc,
            description="Sonic API load balancer: clients inside the VPC only",
            allow_all_outbound=False,
        )
        # The VPC's range as config gives it, not vpc.vpc_cidr_block: cdk-nag's EC2RestrictedCommonPorts and
        # EC2RestrictedSSH cannot evaluate a token CIDR and throw instead of checking the rule.
        self.security_group.add_ingress_rule(
            ec2.Peer.ipv4(vpc_cidr), ec2.Port.tcp(listener_port), "Sonic API from inside the VPC"
        )
        for cidr in client_cidrs:
            self.security_group.add_ingress_rule(
                ec2.Peer.ipv4(cidr), ec2.Port.tcp(listener_port), f"Sonic API from client network {cidr}"
            )
        self.security_group.add_egress_rule(api_security_group, ec2.Port.tcp(api_port), "to the API server")
        api_security_group.connections.allow_from(
            self.security_group, ec2.Port.tcp(api_port), "from the load balancer"
        )

        self.load_balancer = elbv2.NetworkLoadBalancer(
            self,
            "LoadBalancer",
            vpc=vpc,
            internet_facing=False,
            vpc_subnets=placement.subnets,
            security_groups=[self.security_group],
            cross_zone_enabled=False,
            deletion_protection=deletion_protection,
        )
        if not deletion_protection:
            acknowledge_compliance(
                self.load_balancer,
                "ELBDeletionProtectionEnabled",
                reason=f"{config_table}.deletion_protection is off for this environment: dev's default (it is "
                "torn down and rebuilt), or turned off in its config; it is on by default everywhere else",
            )
        self.access_log_bucket = None if access_logs is None else self._log_access(access_logs)
        if self.access_log_bucket is None:
            no_logs = f"access logs turned off in config ({config_table}.access_logs = false)"
            acknowledge(self.load_balancer, "AwsSolutions-ELB2", reason=no_logs)
            acknowledge_compliance(self.load_balancer, "ELBLoggingEnabled", reason=no_logs)
            skip_checkov(self.load_balancer, "CKV_AWS_91", reason=no_logs)

        self.target_group = elbv2.NetworkTargetGroup(
            self,
            "ApiTargets",
            vpc=vpc,
            port=api_port,
            protocol=elbv2.Protocol.TCP,
            target_type=elbv2.TargetType.IP,
            deregistration_delay=deregistration_delay,
            health_check=elbv2.HealthCheck(
                protocol=elbv2.Protocol.HTTP,
                path=health_check_path,
                port=str(api_port),
                interval=Duration.seconds(10),
                healthy_threshold_count=2,
                unhealthy_threshold_count=2,
            ),
        )
        self.tls = certificate is not None
        self.idle_timeout = TLS_IDLE_TIMEOUT if self.tls else idle_timeout
        if certificate is None:
            self.listener = self.load_balancer.add_listener(
                "Listener",
                port=listener_port,
                protocol=elbv2.Protocol.TCP,
                tcp_idle_timeout=idle_timeout,
                default_target_groups=[self.target_group],
            )
            Annotations.of(self.listener).add_warning_v2(
                PLAINTEXT_WARNING,
                f"plain TCP listener on port {listener_port}: ws://, the API key, transcripts and audio cross "
                f"the VPC in clear ({config_table}.tls)",
            )
            if plaintext_accepted_by is not None:
                acknowledge_compliance(
                    self.listener,
                    "ELBv2ACMCertificateRequired",
                    reason=f"plain text accepted by {plaintext_accepted_by}: ws:// crosses the VPC in clear; "
                    "outside dev TLS is the default and plain text needs that setting",
                )
        else:
            self.listener = self.load_balancer.add_listener(
                "Listener",
                port=listener_port,
                protocol=elbv2.Protocol.TLS,
                certificates=[elbv2.ListenerCertificate.from_arn(self._certificate_arn(certificate))],
                ssl_policy=SSL_POLICY,
                default_target_groups=[self.target_group],
            )
        self.target_group.add_target(*api_targets)
        # What agents dial: the certificate's name with TLS (a private DNS record points it here), else the
        # load balancer's own DNS name.
        host = self.load_balancer.load_balancer_dns_name if certificate is None else certificate.domain_name
        self.websocket_url = f"{'wss' if self.tls else 'ws'}://{host}:{listener_port}/tts/websocket"

    def _certificate_arn(self, certificate: ApiCertificate) -> str:
        if certificate.certificate_arn is not None:
            return certificate.certificate_arn
        assert certificate.private_ca_arn is not None
        # ACM issues it from the private CA and renews it before it expires; the CA must let ACM do so
        # (its permissions for acm.amazonaws.com in the same account, a resource policy across accounts).
        self.certificate = acm.PrivateCertificate(
            self,
            "Certificate",
            domain_name=certificate.domain_name,
            certificate_authority=acmpca.CertificateAuthority.from_certificate_authority_arn(
                self, "PrivateCa", certificate.private_ca_arn
            ),
        )
        return self.certificate.certificate_arn

    def _log_access(self, logs: AccessLogs) -> s3.Bucket:
        """ELB writes access logs for TLS listeners only ("Access logs are created only if the load balancer
        has a TLS listener": Elastic Load Balancing, "Access logs for your Network Load Balancer"); with
        plain TCP the bucket stays empty. Log delivery takes SSE-S3 or SSE-KMS with a customer managed key
        (same page), so the stack's key encrypts them."""
        bucket = encrypted_bucket(
            self,
            "AccessLogs",
            key=logs.key,
            rule_id="Retention",
            expiration=logs.retention,
            removal_policy=KEEP_ONCE_CREATED,
        )
        # The log delivery service encrypts each file with the bucket's key: the key policy must let it,
        # for this account's load balancers only (the conditions of the bucket policy the NLB access-log
        # page shows). kms:GenerateDataKey* for each object, kms:Decrypt because of the S3 Bucket Key (the
        # pair AWS documents for the same delivery service's SSE-KMS log buckets, CloudFront standard logs).
        logs.key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="AllowElbAccessLogDelivery",
                principals=[iam.ServicePrincipal("delivery.logs.amazonaws.com")],
                actions=["kms:GenerateDataKey*", "kms:Decrypt"],
                resources=["*"],
                conditions={
                    "StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID},
                    "ArnLike": {"aws:SourceArn": f"arn:{Aws.PARTITION}:logs:{Aws.REGION}:{Aws.ACCOUNT_ID}:*"},
                },
            )
        )
        self.load_balancer.log_access_logs(bucket, prefix=ACCESS_LOG_PREFIX)
        not_logged = (
            "it holds only the load balancer's access logs, written by the log delivery service; who reads "
            "them is in CloudTrail, and logging reads of a log bucket into another bucket would repeat the "
            "question for that one"
        )
        acknowledge(bucket, "AwsSolutions-S1", reason=not_logged)
        acknowledge_compliance(bucket, "S3BucketLoggingEnabled", reason=not_logged)
        skip_checkov(bucket, "CKV_AWS_18", reason=not_logged)
        not_replicated = (
            "access logs of one Regional load balancer: losing them with the Region loses nothing the "
            "service needs; versioning and the lifecycle rule keep them for their retention"
        )
        acknowledge_compliance(bucket, "S3BucketReplicationEnabled", reason=not_replicated)
        return bucket

    def unhealthy_targets(self) -> cloudwatch.Metric:
        return self.target_group.metrics.un_healthy_host_count(
            statistic="Maximum", period=Duration.minutes(1)
        )

    def healthy_targets(self) -> cloudwatch.Metric:
        """AWS/NetworkELB HealthyHostCount of the API targets (dimensions LoadBalancer, TargetGroup; Elastic
        Load Balancing User Guide for Network Load Balancers, "CloudWatch metrics")."""
        return self.target_group.metrics.healthy_host_count(statistic="Minimum", period=Duration.minutes(1))
