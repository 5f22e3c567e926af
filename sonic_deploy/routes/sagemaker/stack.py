"""The managed route: Sonic's Marketplace model package as a private, autoscaled SageMaker endpoint."""

from __future__ import annotations

from typing import Any

from aws_cdk import CfnOutput, Duration, Fn
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from sonic_deploy.config import Settings
from sonic_deploy.constructs.alerting import Alerting
from sonic_deploy.constructs.encryption import EncryptionKey
from sonic_deploy.constructs.network import Network
from sonic_deploy.constructs.probe_canary import canary_for
from sonic_deploy.constructs.probe_task import TASK_ENDPOINTS, ProbeTask, invoke_endpoint, turn_hop_endpoints
from sonic_deploy.constructs.scaling import StreamScaling, TrackedMetric
from sonic_deploy.routes.sagemaker.constructs.endpoint_alarms import EndpointAlarms
from sonic_deploy.routes.sagemaker.constructs.operations import SageMakerOperations
from sonic_deploy.routes.sagemaker.constructs.sonic_endpoint import SonicEndpoint
from sonic_deploy.stacks.common import SonicStack, log_retention, network_props

# Includes queued requests; a streaming request counts until its last byte. High resolution (10 s).
CONCURRENCY_METRIC = "SageMakerVariantConcurrentRequestsPerModelHighResolution"


class SageMakerStack(SonicStack):
    def __init__(self, scope: Construct, construct_id: str, *, settings: Settings, **kwargs: Any) -> None:
        super().__init__(scope, construct_id, settings=settings, **kwargs)
        env = settings.environment
        sm = env.sagemaker
        instance = settings.sagemaker_instance
        assert settings.model_package_arn is not None  # the loader guarantees it for this route

        key = EncryptionKey(self, "Encryption", alias=f"alias/{settings.resource_prefix}-sagemaker").key
        # The runtime for callers; in a new VPC (no NAT) the probe task's image pulls, logs and canary metrics
        # too, and the turn probe's hops of `[probe] turn_hops`. An existing VPC provides those itself (docs/deploy.md): one that has them already with private
        # DNS would refuse a second ("conflicting DNS domain"), and they cost per AZ and hour.
        placement = network_props(self, settings, "sagemaker")
        task_endpoints = (
            [*TASK_ENDPOINTS, *turn_hop_endpoints(env.probe.turn_hops)]
            if "existing_vpc" not in placement
            else []
        )
        network = Network(
            self,
            "Network",
            key=key,
            flow_log_retention=log_retention(env.network.flow_log_retention_days),
            interface_services=[ec2.InterfaceVpcEndpointAwsService.SAGEMAKER_RUNTIME, *task_endpoints],
            endpoint_clients=env.network.client_cidrs,
            # The model package's data is in a bucket AWS Marketplace owns and does not name, fetched by
            # SageMaker without the execution role (which has no S3 rights), and whether that download
            # crosses this VPC at all is not documented: objects of any bucket may be read, none written.
            # SageMaker's own advice (Developer Guide, host-vpc, "Use a Custom Endpoint Policy to Restrict
            # Access to Amazon S3") names the buckets of your artifacts; a Marketplace package's are not.
            s3_reads=[f"arn:{self.partition}:s3:::*/*"],
            s3_lists=[f"arn:{self.partition}:s3:::*"],
            **placement,
        )

        endpoint = SonicEndpoint(
            self,
            "Sonic",
            model_package_arn=settings.model_package_arn,
            endpoint_name=settings.endpoint_name,
            instance_type=sm.instance_type,
            instance_count=sm.min_instances,
            vpc=network.vpc,
            subnets=network.private_subnets,
            log_key=key,
            log_retention=log_retention(env.log_retention_days),
            volume_key=None if instance.local_storage else key,
            startup_health_check_timeout=Duration.seconds(sm.startup_health_check_timeout_s),
            model_data_download_timeout=Duration.seconds(sm.model_data_download_timeout_s),
        )

        StreamScaling(
            self,
            "Scaling",
            service_namespace=appscaling.ServiceNamespace.SAGEMAKER,
            resource_id=f"endpoint/{endpoint.endpoint.attr_endpoint_name}/variant/{endpoint.variant_name}",
            scalable_dimension="sagemaker:variant:DesiredInstanceCount",
            min_capacity=sm.min_instances,
            max_capacity=sm.max_instances,
            streams=TrackedMetric.predefined_metric(CONCURRENCY_METRIC),
            streams_target=settings.sagemaker_streams_per_instance * sm.target_utilisation,
            gpu=TrackedMetric.single(endpoint.metric("GPUUtilization", instance_metric=True)),
            # GPUUtilization is 0-100 per GPU, summed over the instance's GPUs.
            gpu_target_percent=round(100 * sm.target_utilisation * instance.gpus, 1),
            scale_out_cooldown=Duration.seconds(sm.scale_out_cooldown_s),
            scale_in_cooldown=Duration.seconds(sm.scale_in_cooldown_s),
        )

        alarms = sm.alarms
        alerting = Alerting(self, "Alerting", key=key, emails=alarms.email)
        endpoint_alarms = EndpointAlarms(
            self,
            "Alarms",
            alerting=alerting,
            endpoint=endpoint,
            errors_5xx_per_5min=alarms.errors_5xx_per_5min,
            errors_4xx_per_5min=alarms.errors_4xx_per_5min,
            model_latency_p95_ms=alarms.model_latency_p95_ms,
            gpu_pinned_percent=alarms.gpu_pinned_percent,
            gpu_pinned_minutes=alarms.gpu_pinned_minutes,
            gpus_per_instance=instance.gpus,
            streams_per_instance=settings.sagemaker_streams_per_instance,
            capacity_minutes=alarms.capacity_minutes,
        )
        # The probe inside the VPC, through the runtime's VPC endpoint as callers are (docs/deploy.md).
        probe = ProbeTask(
            self,
            "Probe",
            network=network,
            vpc_cidr=settings.route_cidr("sagemaker"),
            subnets=ec2.SubnetSelection(subnets=network.private_subnets),
            key=key,
            log_retention=log_retention(env.log_retention_days),
            log_retention_days=env.log_retention_days,
            config=env.probe,
            task_statements=[invoke_endpoint(endpoint.endpoint.ref)],
        )
        target = [
            "probe",
            "sagemaker",
            "--endpoint",
            endpoint.endpoint.attr_endpoint_name,
            "--region",
            self.region,
        ]
        canary = canary_for(self, probe, target, settings)

        # Canary alarms, the composites that page, the dashboard (docs/operate.md).
        SageMakerOperations(
            self,
            "Operations",
            settings=settings,
            alerting=alerting,
            endpoint=endpoint,
            endpoint_alarms=endpoint_alarms,
            gpus_per_instance=instance.gpus,
            canary_schedule=canary,
        )

        runtime = network.endpoints["sagemaker.runtime"]
        CfnOutput(self, "EndpointName", value=endpoint.endpoint.attr_endpoint_name)
        CfnOutput(self, "VariantName", value=endpoint.variant_name)
        # DnsEntries are "hostedzoneid:dnsname"; the first is the Regional name.
        CfnOutput(
            self,
            "RuntimeVpcEndpointDns",
            value=Fn.select(1, Fn.split(":", Fn.select(0, runtime.vpc_endpoint_dns_entries))),
        )
        CfnOutput(self, "Region", value=self.region)
