"""The parts SageMakerStack composes: the network, the endpoint with its scaling, and what operates it.

Plain functions, not Constructs: each builds its children straight under the stack, with the ids they have
always had, so their construct paths (and so their logical IDs) do not change. Called in the stack's order."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from aws_cdk import Duration, Stack
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs

from sonic_deploy.config import Settings
from sonic_deploy.config.catalogue import InstanceType
from sonic_deploy.config.loader import InstancePool
from sonic_deploy.config.schema import TurnHop
from sonic_deploy.constructs.alerting import Alerting
from sonic_deploy.constructs.network import Network
from sonic_deploy.constructs.probe_task import TASK_ENDPOINTS, invoke_endpoint, turn_hop_endpoints
from sonic_deploy.constructs.scaling import StreamScaling, TrackedMetric
from sonic_deploy.routes.sagemaker.config import SageMakerConfig
from sonic_deploy.routes.sagemaker.constructs.endpoint_alarms import EndpointAlarms, busiest
from sonic_deploy.routes.sagemaker.constructs.operations import SageMakerOperations
from sonic_deploy.routes.sagemaker.constructs.sonic_endpoint import SonicEndpoint
from sonic_deploy.stacks.common import probe_and_canary

# Includes queued requests; a streaming request counts until its last byte. High resolution (10 s).
CONCURRENCY_METRIC = "SageMakerVariantConcurrentRequestsPerModelHighResolution"


def endpoint_network(
    stack: Stack,
    *,
    key: kms.IKey,
    flow_log_retention: logs.RetentionDays,
    turn_hops: Sequence[TurnHop],
    client_cidrs: Sequence[str],
    placement: Mapping[str, Any],
) -> Network:
    """Builds Network: the runtime's endpoint for callers, in the VPC `placement` names (`network_props`)."""
    # The runtime for callers; in a new VPC (no NAT) the probe task's image pulls, logs and canary metrics
    # too, and the turn probe's hops of `[probe] turn_hops`. An existing VPC provides those itself (docs/deploy.md): one that has them already with private
    # DNS would refuse a second ("conflicting DNS domain"), and they cost per AZ and hour.
    task_endpoints = (
        [*TASK_ENDPOINTS, *turn_hop_endpoints(turn_hops)] if "existing_vpc" not in placement else []
    )
    return Network(
        stack,
        "Network",
        key=key,
        flow_log_retention=flow_log_retention,
        interface_services=[ec2.InterfaceVpcEndpointAwsService.SAGEMAKER_RUNTIME, *task_endpoints],
        endpoint_clients=client_cidrs,
        # The model package's data is in a bucket AWS Marketplace owns and does not name, fetched by
        # SageMaker without the execution role (which has no S3 rights), and whether that download
        # crosses this VPC at all is not documented: objects of any bucket may be read, none written.
        # SageMaker's own advice (Developer Guide, host-vpc, "Use a Custom Endpoint Policy to Restrict
        # Access to Amazon S3") names the buckets of your artifacts; a Marketplace package's are not.
        s3_reads=[f"arn:{stack.partition}:s3:::*/*"],
        s3_lists=[f"arn:{stack.partition}:s3:::*"],
        **placement,
    )


def scaled_endpoint(
    stack: Stack,
    sm: SageMakerConfig,
    *,
    model_package_arn: str,
    endpoint_name: str,
    instance: InstanceType,
    pools: Sequence[InstancePool],
    network: Network,
    key: kms.IKey,
    log_retention: logs.RetentionDays,
) -> SonicEndpoint:
    """Builds Sonic, the endpoint in the network's private subnets, and Scaling, its instance count."""
    capacity = sm.capacity
    endpoint = SonicEndpoint(
        stack,
        "Sonic",
        model_package_arn=model_package_arn,
        endpoint_name=endpoint_name,
        instance_type=sm.instance_type,
        instance_count=sm.min_instances,
        vpc=network.vpc,
        subnets=network.private_subnets,
        log_key=key,
        log_retention=log_retention,
        volume_key=None if instance.local_storage else key,
        startup_health_check_timeout=Duration.seconds(sm.startup_health_check_timeout_s),
        model_data_download_timeout=Duration.seconds(sm.model_data_download_timeout_s),
        fallback_types=capacity.fallback_types,
        provision_timeout=None
        if capacity.provision_timeout_s is None
        else Duration.seconds(capacity.provision_timeout_s),
        ml_reservation_arn=capacity.ml_reservation_arn,
    )
    streams, gpu = _tracked(endpoint, pools)
    StreamScaling(
        stack,
        "Scaling",
        service_namespace=appscaling.ServiceNamespace.SAGEMAKER,
        resource_id=f"endpoint/{endpoint.endpoint.attr_endpoint_name}/variant/{endpoint.variant_name}",
        scalable_dimension="sagemaker:variant:DesiredInstanceCount",
        min_capacity=sm.min_instances,
        max_capacity=sm.max_instances,
        streams=streams,
        streams_target=sm.target_utilisation * (pools[0].streams if len(pools) == 1 else 1),
        gpu=gpu,
        # GPUUtilization is 0-100 per GPU, summed over the instance's GPUs.
        gpu_target_percent=round(100 * sm.target_utilisation * (instance.gpus if len(pools) == 1 else 1), 1),
        scale_out_cooldown=Duration.seconds(sm.scale_out_cooldown_s),
        scale_in_cooldown=Duration.seconds(sm.scale_in_cooldown_s),
    )
    return endpoint


def _tracked(endpoint: SonicEndpoint, pools: Sequence[InstancePool]) -> tuple[TrackedMetric, TrackedMetric]:
    """What the stream and GPU policies follow: the variant's concurrency and GPU use per instance, or, with
    instance pools, the busiest type's share of what its instances serve (so that no type runs past the
    target; docs/capacity.md, "Scaling a mix of types")."""
    if len(pools) == 1:
        return TrackedMetric.predefined_metric(CONCURRENCY_METRIC), TrackedMetric.single(
            endpoint.metric("GPUUtilization", instance_metric=True)
        )
    streams = busiest(endpoint, pools, "ConcurrentRequestsPerModel", "c", lambda pool: pool.streams)
    gpu = busiest(endpoint, pools, "GPUUtilization", "g", lambda pool: pool.gpus, instance_metric=True)
    return (
        TrackedMetric.math(streams.expression, streams.using_metrics),  # type: ignore[arg-type]
        TrackedMetric.math(gpu.expression, gpu.using_metrics),  # type: ignore[arg-type]
    )


def operate(
    stack: Stack, settings: Settings, *, endpoint: SonicEndpoint, network: Network, key: kms.IKey
) -> None:
    """Builds Alerting and the endpoint's Alarms, the probe and its canary (`probe_and_canary`), then
    Operations: the canary's alarms, the composites that page, the dashboard (docs/operate.md)."""
    alarms = settings.environment.sagemaker.alarms
    gpus = settings.sagemaker_instance.gpus
    alerting = Alerting(stack, "Alerting", key=key, emails=alarms.email)
    endpoint_alarms = EndpointAlarms(
        stack,
        "Alarms",
        alerting=alerting,
        endpoint=endpoint,
        errors_5xx_per_5min=alarms.errors_5xx_per_5min,
        errors_4xx_per_5min=alarms.errors_4xx_per_5min,
        model_latency_p95_ms=alarms.model_latency_p95_ms,
        gpu_pinned_percent=alarms.gpu_pinned_percent,
        gpu_pinned_minutes=alarms.gpu_pinned_minutes,
        pools=settings.sagemaker_pools,
        capacity_minutes=alarms.capacity_minutes,
    )
    # The probe calls through the runtime's VPC endpoint, as callers do.
    endpoint_name = endpoint.endpoint.attr_endpoint_name
    canary = probe_and_canary(
        stack,
        settings,
        "sagemaker",
        network=network,
        subnets=ec2.SubnetSelection(subnets=network.private_subnets),
        key=key,
        target=["probe", "sagemaker", "--endpoint", endpoint_name, "--region", stack.region],
        task_statements=[invoke_endpoint(endpoint.endpoint.ref)],
    )
    SageMakerOperations(
        stack,
        "Operations",
        settings=settings,
        alerting=alerting,
        endpoint=endpoint,
        endpoint_alarms=endpoint_alarms,
        gpus_per_instance=gpus,
        canary_schedule=canary,
    )
