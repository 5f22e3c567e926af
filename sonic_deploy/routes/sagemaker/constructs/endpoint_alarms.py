"""Alarms of the SageMaker route on the endpoint's own metrics."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct

from sonic_deploy.constructs.alerting import Alerting
from sonic_deploy.routes.sagemaker.constructs.sonic_endpoint import SonicEndpoint

FIVE_MINUTES = Duration.minutes(5)


# Includes queued requests; a streaming request counts until its last byte (the scaling's metric, as a
# CloudWatch metric: AWS/SageMaker, dimensions EndpointName and VariantName; SageMaker Developer Guide,
# "Amazon SageMaker AI metrics in Amazon CloudWatch").
CONCURRENCY = "ConcurrentRequestsPerModel"


class EndpointAlarms(Construct):
    """5XX and 4XX errors (429 = no free capacity), ModelLatency p95, concurrency above what an instance
    serves, GPU utilisation pinned high. None has actions of its own: the route's Page composite pages
    (SageMakerOperations); Errors4xx is in none of its composites."""

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
        gpus_per_instance: int,
        streams_per_instance: int,
        capacity_minutes: int,
    ) -> None:
        super().__init__(scope, construct_id)
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
