"""The SageMaker route's dashboard rows, for OperationsDashboard (sonic_deploy/constructs/dashboard.py, which
draws the widgets both routes share; docs/operate.md, "Dashboard")."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import aws_cloudwatch as cloudwatch

from sonic_deploy.config import Settings
from sonic_deploy.config.loader import InstancePool
from sonic_deploy.constructs.canary_alarms import CanaryMetrics
from sonic_deploy.constructs.dashboard import alarm_states, canary_widgets, graph, note
from sonic_deploy.routes.sagemaker.constructs.endpoint_alarms import CONCURRENCY
from sonic_deploy.routes.sagemaker.constructs.sonic_endpoint import SonicEndpoint


def sagemaker_rows(
    *,
    settings: Settings,
    canary: CanaryMetrics | None,
    endpoint: SonicEndpoint,
    gpus_per_instance: int,
    alarms: Sequence[cloudwatch.IAlarm],
) -> list[list[cloudwatch.IWidget]]:
    """The SageMaker dashboard: canary, latency, alarms; concurrency, errors, GPUs, the instance note."""
    streams = settings.sagemaker_streams_per_instance
    target = streams * settings.environment.sagemaker.target_utilisation
    # AWS/SageMaker Invocations and Invocation4XX/5XXErrors, /aws/sagemaker/Endpoints GPUUtilization and
    # GPUMemoryUtilization, dimensions EndpointName and VariantName (SageMaker Developer Guide, "Amazon
    # SageMaker AI metrics in Amazon CloudWatch"; SonicEndpoint.metric).
    errors: list[cloudwatch.IMetric] = [
        endpoint.metric(name, statistic="Sum").with_(label=name)
        for name in ("Invocation4XXErrors", "Invocation5XXErrors")
    ]
    if canary is not None:
        errors.append(canary.runs()["Throttled"])
    name = settings.endpoint_name
    rows: list[list[cloudwatch.IWidget]] = [
        [
            *canary_widgets(
                canary,
                budget_ms=settings.environment.canary.ttfa_p95_ms,
                environment=settings.environment_name,
                width=6,
            ),
            graph(
                "Endpoint: model and overhead latency (ms)",
                [
                    endpoint.latency_ms(metric, statistic)
                    for metric in ("ModelLatency", "OverheadLatency")
                    for statistic in ("p50", "p95")
                ],
                width=6,
                left_label="ms",
            ),
            alarm_states(alarms, width=6),
        ],
        [
            graph(
                "Active streams per instance vs capacity",
                [endpoint.metric(CONCURRENCY, statistic="Average").with_(label="concurrent requests")],
                width=6,
                budget=(streams, f"capacity {streams} per instance"),
            ),
            graph(
                "Requests and errors (429 is a 4XX)",
                [endpoint.metric("Invocations", statistic="Sum").with_(label="Invocations")],
                right=errors,
                width=6,
            ),
            graph(
                f"GPUs (%, summed over {gpus_per_instance} per instance)",
                [
                    endpoint.metric(metric, instance_metric=True).with_(label=metric)
                    for metric in ("GPUUtilization", "GPUMemoryUtilization")
                ],
                width=6,
                left_label="%",
            ),
            note(
                "### Instances and scaling\n"
                "SageMaker publishes no instance count to CloudWatch (its endpoint metrics are "
                "invocations, latency and utilisation). Current and desired counts: "
                f"`aws sagemaker describe-endpoint --endpoint-name {name}` "
                "(`ProductionVariants[].CurrentInstanceCount`, `DesiredInstanceCount`); scaling activity: "
                "`aws application-autoscaling describe-scaling-activities --service-namespace sagemaker`. "
                f"Scaling aims at {target:g} concurrent requests per instance.",
                width=6,
            ),
        ],
    ]
    pools = settings.sagemaker_pools
    if len(pools) > 1:
        rows.append(_pool_row(endpoint, pools, name, settings.environment.sagemaker.target_utilisation))
    return rows


def _pool_row(
    endpoint: SonicEndpoint, pools: Sequence[InstancePool], name: str, target_utilisation: float
) -> list[cloudwatch.IWidget]:
    """Instance pools: each type's load and traffic (the InstanceType dimension), and where the counts are."""
    return [
        graph(
            "Concurrent requests per instance, by type",
            [
                endpoint.metric(CONCURRENCY, statistic="Average", instance_type=pool.instance_type).with_(
                    label=f"{pool.instance_type} (serves {pool.streams})"
                )
                for pool in pools
            ],
            width=9,
        ),
        graph(
            "Invocations by type (a fallback type here: the first had no capacity)",
            [
                endpoint.metric("Invocations", statistic="Sum", instance_type=pool.instance_type).with_(
                    label=pool.instance_type
                )
                for pool in pools
            ],
            width=9,
        ),
        note(
            "### Instances per type\n"
            f"Priority: {' > '.join(pool.instance_type for pool in pools)}. SageMaker documents no instance count "
            "per type in CloudWatch: "
            f"`aws sagemaker describe-endpoint --endpoint-name {name}` lists them "
            "(`ProductionVariants[].InstancePools[].CurrentInstanceCount`). Scaling keeps the busiest type at "
            f"{target_utilisation:g} of what its instances serve.",
            width=6,
        ),
    ]
