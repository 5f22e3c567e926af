"""Sonic from its AWS Marketplace model package, as a private SageMaker real-time endpoint."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from sonic_deploy.constructs.encryption import allow_use_through
from sonic_deploy.constructs.findings import acknowledge, acknowledge_compliance

VARIANT_NAME = "AllTraffic"
INVOCATION_NAMESPACE = "AWS/SageMaker"
INSTANCE_NAMESPACE = "/aws/sagemaker/Endpoints"
ONE_MINUTE = Duration.minutes(1)


def _as_nag_prints(stack: Stack, arn: str) -> str:
    """An ARN of `stack` as cdk-nag prints it in a finding's id: a pseudo parameter CDK has not resolved (an
    environment-agnostic stack's) as <AWS::Name>."""
    resolved = stack.resolve(arn)
    if isinstance(resolved, str):
        return resolved
    parts = resolved["Fn::Join"][1]
    return "".join(p if isinstance(p, str) else f"<{p['Ref']}>" for p in parts)


class SonicEndpoint(Construct):
    """Model (network-isolated, in the VPC) -> endpoint config (one variant, least-outstanding-requests
    routing) -> endpoint, with an execution role that can do only what the endpoint needs.

    `volume_key`: the key for the instance's storage volume. Leave it out for instance types with local NVMe
    storage (g5, g6, g6e; `local_storage` in config/instance_types.toml): SageMaker refuses a KmsKeyId for
    them, and their local volumes are encrypted by the instance's hardware module (CreateEndpointConfig,
    KmsKeyId: "If you specify a value for KmsKeyId when using any nitro-based instances with local storage,
    the call to CreateEndpointConfig fails").
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        model_package_arn: str,
        endpoint_name: str,
        instance_type: str,
        instance_count: int,
        vpc: ec2.IVpc,
        subnets: Sequence[ec2.ISubnet],
        log_key: kms.IKey,
        log_retention: logs.RetentionDays,
        volume_key: kms.IKey | None,
        startup_health_check_timeout: Duration,
        model_data_download_timeout: Duration,
        fallback_types: Sequence[str] = (),
        provision_timeout: Duration | None = None,
        ml_reservation_arn: str | None = None,
    ) -> None:
        """`fallback_types`: instance pools after `instance_type`, by priority (docs/capacity.md, SageMaker);
        `ml_reservation_arn`: a training plan the instances come from, and only from."""
        super().__init__(scope, construct_id)
        self.endpoint_name = endpoint_name
        self.variant_name = VARIANT_NAME
        self.instance_types = (instance_type, *fallback_types)

        self.security_group = ec2.SecurityGroup(
            self,
            "SecurityGroup",
            vpc=vpc,
            description="Sonic endpoint ENIs: no ingress; HTTPS out for model data from S3",
            allow_all_outbound=False,
        )
        # The subnets route nowhere but the VPC and the S3 gateway endpoint, and the container itself is
        # network-isolated: HTTPS egress lets SageMaker fetch the model data through the gateway.
        self.security_group.add_egress_rule(ec2.Peer.any_ipv4(), ec2.Port.tcp(443), "model data from S3")
        # SageMaker writes to this group; made here so it is encrypted and expires. Named, so not retained:
        # a retained group would block the next deploy of the same endpoint name. SageMaker also creates it
        # itself when an endpoint logs, so one may be left from an earlier endpoint: preflight
        # (check_endpoint_log_group) finds it before a create fails on "already exists".
        self.log_group = logs.LogGroup(
            self,
            "Logs",
            log_group_name=f"{INSTANCE_NAMESPACE}/{endpoint_name}",
            encryption_key=log_key,
            retention=log_retention,
            removal_policy=RemovalPolicy.DESTROY,
        )
        self.role = self._execution_role(vpc, subnets, volume_key)

        self.model = sagemaker.CfnModel(
            self,
            "Model",
            execution_role_arn=self.role.role_arn,
            primary_container=sagemaker.CfnModel.ContainerDefinitionProperty(
                model_package_name=model_package_arn
            ),
            # Marketplace model packages require it, and CloudFormation does not set it for you.
            enable_network_isolation=True,
            vpc_config=sagemaker.CfnModel.VpcConfigProperty(
                security_group_ids=[self.security_group.security_group_id],
                subnets=[subnet.subnet_id for subnet in subnets],
            ),
        )
        # CreateModel checks that the role can create ENIs: wait for the role's policy (the role itself it
        # already waits for, by its ARN).
        policy = self.role.node.try_find_child("DefaultPolicy")
        assert policy is not None  # _execution_role adds statements
        self.model.node.add_dependency(policy, self.log_group)

        self.endpoint_config = sagemaker.CfnEndpointConfig(
            self,
            "EndpointConfig",
            kms_key_id=volume_key.key_arn if volume_key else None,
            production_variants=[
                sagemaker.CfnEndpointConfig.ProductionVariantProperty(
                    variant_name=VARIANT_NAME,
                    model_name=self.model.attr_model_name,
                    instance_type=None if fallback_types else instance_type,
                    instance_pools=[
                        sagemaker.CfnEndpointConfig.InstancePoolProperty(
                            instance_type=pool, priority=priority
                        )
                        for priority, pool in enumerate(self.instance_types, start=1)
                    ]
                    if fallback_types
                    else None,
                    variant_instance_provision_timeout_in_seconds=None
                    if provision_timeout is None
                    else int(provision_timeout.to_seconds()),
                    capacity_reservation_config=None
                    if ml_reservation_arn is None
                    else sagemaker.CfnEndpointConfig.CapacityReservationConfigProperty(
                        capacity_reservation_preference="capacity-reservations-only",
                        ml_reservation_arn=ml_reservation_arn,
                    ),
                    initial_instance_count=instance_count,
                    initial_variant_weight=1.0,
                    container_startup_health_check_timeout_in_seconds=int(
                        startup_health_check_timeout.to_seconds()
                    ),
                    model_data_download_timeout_in_seconds=int(model_data_download_timeout.to_seconds()),
                    routing_config=sagemaker.CfnEndpointConfig.RoutingConfigProperty(
                        routing_strategy="LEAST_OUTSTANDING_REQUESTS"
                    ),
                )
            ],
        )
        if volume_key is None:
            acknowledge_compliance(
                self.endpoint_config,
                "SageMakerEndpointConfigurationKMSKeyConfigured",
                reason=f"{instance_type} has local NVMe instance storage: SageMaker refuses a KmsKeyId for it "
                "(CreateEndpointConfig fails), and the instance's hardware module encrypts that storage",
            )
        self.endpoint = sagemaker.CfnEndpoint(
            self,
            "Endpoint",
            endpoint_name=endpoint_name,
            endpoint_config_name=self.endpoint_config.attr_endpoint_config_name,
            # Keep the instance count autoscaling chose when a new endpoint config is rolled out.
            retain_all_variant_properties=True,
        )

    def _execution_role(
        self, vpc: ec2.IVpc, subnets: Sequence[ec2.ISubnet], volume_key: kms.IKey | None
    ) -> iam.Role:
        role = iam.Role(
            self,
            "ExecutionRole",
            assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"),
            description="Sonic endpoint: VPC ENIs, its own log group, metrics; nothing else",
        )
        stack = Stack.of(self)
        enis = stack.format_arn(service="ec2", resource="network-interface", resource_name="*")
        subnet_arns = [
            stack.format_arn(service="ec2", resource="subnet", resource_name=s.subnet_id) for s in subnets
        ]
        # SageMaker creates the instances' ENIs in the model's subnets with its security group, lets its own
        # account attach them, and deletes them (SageMaker Developer Guide, "Give SageMaker Hosted Endpoints
        # Access to Resources in Your Amazon VPC"). Resources and conditions per the Service Authorization
        # Reference (Amazon EC2): CreateNetworkInterface is on the network interface, the subnet and the
        # security group; the permission and delete actions are on the network interface, with its subnet
        # and VPC as condition keys (ec2:Subnet, ec2:Vpc).
        role.add_to_policy(
            iam.PolicyStatement(
                sid="CreateEnisInTheModelsSubnets",
                actions=["ec2:CreateNetworkInterface"],
                resources=[
                    enis,
                    *subnet_arns,
                    stack.format_arn(
                        service="ec2",
                        resource="security-group",
                        resource_name=self.security_group.security_group_id,
                    ),
                ],
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                sid="ManageEnisInTheModelsSubnets",
                actions=[
                    "ec2:CreateNetworkInterfacePermission",
                    "ec2:DeleteNetworkInterface",
                    "ec2:DeleteNetworkInterfacePermission",
                ],
                resources=[enis],
                conditions={"ArnEquals": {"ec2:Vpc": vpc.vpc_arn, "ec2:Subnet": subnet_arns}},
            )
        )
        # The Describe calls have no resource type and no condition but the Region (Service Authorization
        # Reference, Amazon EC2); DescribeVpcEndpoints is in the developer guide's list of what SageMaker needs.
        role.add_to_policy(
            iam.PolicyStatement(
                sid="DescribeTheVpcNoResourceLevelPermissions",
                actions=[
                    "ec2:DescribeNetworkInterfaces",
                    "ec2:DescribeVpcs",
                    "ec2:DescribeVpcEndpoints",
                    "ec2:DescribeDhcpOptions",
                    "ec2:DescribeSubnets",
                    "ec2:DescribeSecurityGroups",
                ],
                resources=["*"],
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                sid="WriteItsOwnLogGroup",
                actions=["logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"],
                resources=[self.log_group.log_group_arn],
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                sid="PutMetricsInSageMakerNamespacesOnly",
                actions=["cloudwatch:PutMetricData"],
                resources=["*"],
                conditions={
                    "StringEquals": {"cloudwatch:namespace": [INVOCATION_NAMESPACE, INSTANCE_NAMESPACE]}
                },
            )
        )
        acknowledge(
            role,
            "AwsSolutions-IAM5[Resource::*]",
            reason="DescribeTheVpcNoResourceLevelPermissions: EC2's Describe actions take no resource; "
            "PutMetricsInSageMakerNamespacesOnly: PutMetricData takes no resource and is limited to "
            "SageMaker's two namespaces by its condition",
        )
        acknowledge(
            role,
            f"AwsSolutions-IAM5[Resource::{_as_nag_prints(stack, enis)}]",
            reason="CreateEnisInTheModelsSubnets, ManageEnisInTheModelsSubnets: SageMaker names its ENIs only "
            "when it creates them; creation is bound to the model's subnets and security group, the rest "
            "to ENIs in those subnets of this VPC (ec2:Subnet, ec2:Vpc)",
        )
        if volume_key is not None:
            # "The KMS key policy must grant permission to the IAM role" (SageMaker API Reference,
            # CreateEndpointConfig, KmsKeyId): named there, and through SageMaker for the endpoint's caller.
            # What grant_encrypt_decrypt gives, named (no key-pair actions: an EBS volume takes none).
            actions = [
                "kms:CreateGrant",
                "kms:DescribeKey",
                "kms:Encrypt",
                "kms:Decrypt",
                "kms:ReEncryptFrom",
                "kms:ReEncryptTo",
                "kms:GenerateDataKey",
                "kms:GenerateDataKeyWithoutPlaintext",
            ]
            volume_key.add_to_resource_policy(
                iam.PolicyStatement(
                    sid="TheEndpointRoleForItsVolume", principals=[role], actions=actions, resources=["*"]
                )
            )
            allow_use_through(volume_key, "sagemaker")
            volume_key.grant(role, *actions)
        acknowledge_compliance(
            role,
            "IAMNoInlinePolicy",
            reason="the endpoint's execution role holds the grants of this endpoint alone (ENIs in its subnets, "
            "its log group, metrics, the model's volume key), in an inline policy that lives and goes with it",
        )
        return role

    def metric(
        self,
        name: str,
        *,
        statistic: str = "Average",
        period: Duration = ONE_MINUTE,
        instance_metric: bool = False,
        instance_type: str | None = None,
    ) -> cloudwatch.Metric:
        """A metric of this endpoint's variant: invocation metrics (AWS/SageMaker) or, with
        `instance_metric`, per-instance ones such as GPUUtilization (/aws/sagemaker/Endpoints); with
        `instance_type`, that type's instances only (the InstanceType dimension of instance pools)."""
        dimensions = {"EndpointName": self.endpoint.attr_endpoint_name, "VariantName": VARIANT_NAME}
        if instance_type is not None:
            dimensions["InstanceType"] = instance_type
        return cloudwatch.Metric(
            namespace=INSTANCE_NAMESPACE if instance_metric else INVOCATION_NAMESPACE,
            metric_name=name,
            dimensions_map=dimensions,
            statistic=statistic,
            period=period,
        )

    def latency_ms(self, name: str, statistic: str) -> cloudwatch.MathExpression:
        """ModelLatency or OverheadLatency in milliseconds: SageMaker publishes both in microseconds (SageMaker
        Developer Guide, "Amazon SageMaker AI metrics in Amazon CloudWatch")."""
        metric_id = f"{name.lower()}_{statistic}"  # unique in a graph that shows several
        return cloudwatch.MathExpression(
            expression=f"{metric_id} / 1000",
            using_metrics={metric_id: self.metric(name, statistic=statistic)},
            label=f"{name} {statistic} (ms)",
            period=ONE_MINUTE,
        )
