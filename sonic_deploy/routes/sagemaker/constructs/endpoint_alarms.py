"""Alarms of the SageMaker route on the endpoint's own metrics."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct

from sonic_deploy.config.loader import InstancePool
from sonic_deploy.constructs.alerting import Alerting
from sonic_deploy.routes.sagemaker.constructs.sonic_endpoint import ONE_MINUTE, SonicEndpoint

FIVE_MINUTES = Duration.minutes(5)


# Includes queued requests; a streaming request counts until its last byte (the scaling's metric, as a
# CloudWatch metric: AWS/SageMaker, dimensions EndpointName and VariantName; SageMaker Developer Guide,
# "Amazon SageMaker AI metrics in Amazon CloudWatch").
CONCURRENCY = "ConcurrentRequestsPerModel"


class EndpointAlarms(Construct):
    """5XX and 4XX errors (429 = no free capacity), ModelLatency p95, concurrency above what an instance
    serves, GPU utilisation pinned high; with instance pools, each of the last two for the busiest type,
    and FallbackInUse. None has actions of its own: the route's Page composite pages (SageMakerOperations);
    Errors4xx is in none of its composites."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        alerting: Alerting,
        endpoint: SonicEndpoint,
        errors_5xx_per_5min: int,
        errors_4xx_per_5min: int,
        model_latency_p95_ms: float,
        gpu_pinned_percent: float,
        gpu_pinned_minutes: int,
        pools: Sequence[InstancePool],
        capacity_minutes: int,
    ) -> None:
        """`pools`: the endpoint's instance types by priority (one unless it has instance pools)."""
        super().__init__(scope, construct_id)
        streams_per_instance, gpus_per_instance = pools[0].streams, pools[0].gpus
        self.errors_5xx = alerting.alarm(
            "Errors5xx",
            metric=endpoint.metric("Invocation5XXErrors", statistic="Sum", period=FIVE_MINUTES),
            threshold=errors_5xx_per_5min,
            description="Sonic endpoint returned 5XX errors: the model container failed requests.",
        )
        self.errors_4xx = alerting.alarm(
            "Errors4xx",
            metric=endpoint.metric("Invocation4XXErrors", statistic="Sum", period=FIVE_MINUTES),
            threshold=errors_4xx_per_5min,
            description="Sonic endpoint returned 4XX errors; 429 means no free capacity (raise max_instances "
            "or lower target_utilisation), 422 means bad input from a client. Does not page (in no composite: "
            "clients' bad requests would hold the page): 429s page through ConcurrencyAboveCapacity and the "
            "canary.",
        )
        self.model_latency = alerting.alarm(
            "ModelLatencyP95",
            # ModelLatency is reported in microseconds.
            metric=endpoint.metric("ModelLatency", statistic="p95", period=FIVE_MINUTES),
            threshold=model_latency_p95_ms * 1000,
            evaluation_periods=2,
            description=f"Sonic p95 model latency above {model_latency_p95_ms:g} ms for 10 minutes.",
        )
        # Read as concurrency per instance, as the scaling reads it (its target is streams_per_instance x
        # target_utilisation); above streams_per_instance the instances serve no more and requests queue.
        # UNVERIFIED: how "per model" averages over an instance-based variant's instances was not found in
        # SageMaker's documentation here.
        if len(pools) > 1:
            self._for_pools(
                alerting, endpoint, pools, gpu_pinned_percent, gpu_pinned_minutes, capacity_minutes
            )
            return
        self.fallback_in_use: cloudwatch.Alarm | None = None
        self.concurrency = alerting.alarm(
            "ConcurrencyAboveCapacity",
            metric=endpoint.metric(CONCURRENCY, statistic="Average"),
            threshold=streams_per_instance,
            evaluation_periods=capacity_minutes,
            comparison=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            description=f"Concurrent requests per instance above the {streams_per_instance} streams it serves for "
            f"{capacity_minutes} minutes: requests queue or get 429s (max_instances, the instance quota).",
        )
        self.gpu_pinned = alerting.alarm(
            "GpuPinned",
            # GPUUtilization is 0-100 per GPU, summed over the instance's GPUs.
            metric=endpoint.metric("GPUUtilization", instance_metric=True),
            threshold=gpu_pinned_percent * gpus_per_instance,
            evaluation_periods=gpu_pinned_minutes,
            comparison=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            description=f"GPU utilisation above {gpu_pinned_percent:g}% for {gpu_pinned_minutes} minutes: "
            "scaling is not keeping up (check max_instances and the instance quota).",
        )

    def _for_pools(
        self,
        alerting: Alerting,
        endpoint: SonicEndpoint,
        pools: Sequence[InstancePool],
        gpu_pinned_percent: float,
        gpu_pinned_minutes: int,
        capacity_minutes: int,
    ) -> None:
        """Per type, by the InstanceType dimension SageMaker adds for instance pools (SageMaker Developer
        Guide, "Deploy to multiple instance types with instance pools", Monitor instance pools)."""
        streams = busiest(endpoint, pools, CONCURRENCY, "c", lambda pool: pool.streams)
        self.concurrency = alerting.alarm(
            "ConcurrencyAboveCapacity",
            metric=streams,
            threshold=1,
            evaluation_periods=capacity_minutes,
            comparison=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            description="Concurrent requests per instance of some instance type above the streams it serves "
            f"for {capacity_minutes} minutes: requests queue or get 429s (max_instances, the quotas).",
        )
        gpu = busiest(endpoint, pools, "GPUUtilization", "g", lambda pool: pool.gpus, instance_metric=True)
        self.gpu_pinned = alerting.alarm(
            "GpuPinned",
            metric=gpu,
            threshold=gpu_pinned_percent,
            evaluation_periods=gpu_pinned_minutes,
            comparison=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            description=f"GPU utilisation of some instance type above {gpu_pinned_percent:g}% for "
            f"{gpu_pinned_minutes} minutes: scaling is not keeping up (max_instances, the quotas).",
        )
        fallbacks = {
            f"f{i}": endpoint.metric("Invocations", statistic="Sum", instance_type=pool.instance_type)
            for i, pool in enumerate(pools[1:], start=2)
        }
        # Pages through CapacityAtRisk, as the ECS route's fallback AZ does: callers are served, the first
        # type is short. FILL: a type with no instances has no data point.
        self.fallback_in_use = alerting.alarm(
            "FallbackInUse",
            metric=cloudwatch.MathExpression(
                expression=f"SUM([{', '.join(f'FILL({i}, 0)' for i in fallbacks)}])",
                using_metrics=fallbacks,
                label="invocations on fallback types",
                period=ONE_MINUTE,
            ),
            threshold=1,
            evaluation_periods=5,
            description=f"Instances of a fallback type ({', '.join(p.instance_type for p in pools[1:])}) serve "
            f"requests: SageMaker had no {pools[0].instance_type} capacity. Each type's share of the load is on "
            "the dashboard; `aws sagemaker describe-endpoint` lists the instances per type.",
        )


def busiest(
    endpoint: SonicEndpoint,
    pools: Sequence[InstancePool],
    metric_name: str,
    prefix: str,
    capacity: Callable[[InstancePool], int],
    *,
    instance_metric: bool = False,
) -> cloudwatch.MathExpression:
    """The busiest instance type's `metric_name` (Average per instance) over what one of its instances
    holds (`capacity`): 1.0 when that type runs full."""
    using = {
        f"{prefix}{i}": endpoint.metric(
            metric_name, instance_metric=instance_metric, instance_type=pool.instance_type
        )
        for i, pool in enumerate(pools, start=1)
    }
    # FILL: a type with no instances has no data point (harmless under MAX).
    ratios = ", ".join(f"FILL({i}, 0) / {capacity(pool)}" for i, pool in zip(using, pools, strict=True))
    return cloudwatch.MathExpression(
        expression=f"MAX([{ratios}])",
        using_metrics=using,
        label=f"busiest type: {metric_name}",
        period=ONE_MINUTE,
    )
