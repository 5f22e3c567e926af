"""Target tracking on stream load and on GPU use, never CPU, with Cartesia's cooldowns."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aws_cdk import Duration
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct

SCALE_OUT_COOLDOWN = Duration.seconds(30)  # Cartesia's scale-up stabilisation
SCALE_IN_COOLDOWN = Duration.seconds(900)  # Cartesia's scale-down stabilisation

Spec = appscaling.CfnScalingPolicy.TargetTrackingScalingPolicyConfigurationProperty


@dataclass(frozen=True)
class TrackedMetric:
    """What a target-tracking policy follows: an Application Auto Scaling predefined metric, one CloudWatch
    metric, or a metric-math expression over several (the CDK L2 refuses math, so the L1 is used)."""

    predefined: str | None = None
    metric: cloudwatch.Metric | None = None
    expression: str | None = None
    using: Mapping[str, cloudwatch.Metric] | None = None

    @classmethod
    def predefined_metric(cls, metric_type: str) -> TrackedMetric:
        return cls(predefined=metric_type)

    @classmethod
    def single(cls, metric: cloudwatch.Metric) -> TrackedMetric:
        return cls(metric=metric)

    @classmethod
    def math(cls, expression: str, using: Mapping[str, cloudwatch.Metric]) -> TrackedMetric:
        return cls(expression=expression, using=using)

    def configuration(
        self, *, target: float, scale_out: Duration, scale_in: Duration, may_scale_in: bool = True
    ) -> Spec:
        common: dict[str, Any] = {
            "target_value": target,
            "scale_out_cooldown": scale_out.to_seconds(),
            "scale_in_cooldown": scale_in.to_seconds(),
            "disable_scale_in": not may_scale_in,
        }
        if self.predefined is not None:
            return Spec(
                predefined_metric_specification=appscaling.CfnScalingPolicy.PredefinedMetricSpecificationProperty(
                    predefined_metric_type=self.predefined
                ),
                **common,
            )
        if self.metric is not None:
            m = self.metric
            return Spec(
                customized_metric_specification=appscaling.CfnScalingPolicy.CustomizedMetricSpecificationProperty(
                    namespace=m.namespace,
                    metric_name=m.metric_name,
                    dimensions=_dimensions(m),
                    statistic=m.statistic,
                ),
                **common,
            )
        if self.expression is None or not self.using:
            raise ValueError(
                "TrackedMetric needs a predefined metric, a metric, or an expression with metrics"
            )
        queries = [
            appscaling.CfnScalingPolicy.TargetTrackingMetricDataQueryProperty(
                id=metric_id,
                return_data=False,
                metric_stat=appscaling.CfnScalingPolicy.TargetTrackingMetricStatProperty(
                    metric=appscaling.CfnScalingPolicy.TargetTrackingMetricProperty(
                        namespace=m.namespace,
                        metric_name=m.metric_name,
                        dimensions=[
                            appscaling.CfnScalingPolicy.TargetTrackingMetricDimensionProperty(
                                name=d.name, value=d.value
                            )
                            for d in _dimensions(m)
                        ],
                    ),
                    stat=m.statistic,
                ),
            )
            for metric_id, m in self.using.items()
        ]
        queries.append(
            appscaling.CfnScalingPolicy.TargetTrackingMetricDataQueryProperty(
                id="ratio", expression=self.expression, return_data=True, label="tracked ratio"
            )
        )
        return Spec(
            customized_metric_specification=appscaling.CfnScalingPolicy.CustomizedMetricSpecificationProperty(
                metrics=queries
            ),
            **common,
        )


def _dimensions(metric: cloudwatch.Metric) -> list[appscaling.CfnScalingPolicy.MetricDimensionProperty]:
    return [
        appscaling.CfnScalingPolicy.MetricDimensionProperty(name=name, value=str(value))
        for name, value in sorted((metric.dimensions or {}).items())
    ]


class StreamScaling(Construct):
    """A scalable target and two target-tracking policies on it: stream load (per-replica concurrency times
    the target ratio, or a load/capacity ratio) and GPU utilisation. Scale out fast, scale in slowly.

    Only the stream policy scales in. Application Auto Scaling "will scale in only if all of the target
    tracking policies (with the scale-in portion enabled) are ready to scale in", and a policy whose metric
    is missing is never ready ("Application Auto Scaling cannot scale your scalable target until new data
    points are found"; Application Auto Scaling User Guide, "Target tracking scaling policies"). A GPU policy
    with scale-in enabled would let a GPU metric that stops arriving hold the fleet at its size, paid for;
    with scale-in disabled it can only add capacity. The price: the GPU figure no longer vetoes a scale-in, so
    a fleet whose GPUs run hot at low stream load could shrink on streams and grow back on GPU; the 900 s
    scale-in cooldown bounds that to one step per cooldown, and Sonic's GPU use follows its streams. (Metric
    math such as FILL(gpu, 0) would keep the veto, but whether it yields any data point for a metric that
    never arrived, the case this guards against, is not documented.) If the stream metric itself goes missing, nothing
    scales either way (the fleet stays where it is, never below `min_capacity`), and the routes' alarms on
    that metric (missing data counts as breaching) say so.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        service_namespace: appscaling.ServiceNamespace,
        resource_id: str,
        scalable_dimension: str,
        min_capacity: int,
        max_capacity: int,
        streams: TrackedMetric,
        streams_target: float,
        gpu: TrackedMetric,
        gpu_target_percent: float,
        scale_out_cooldown: Duration = SCALE_OUT_COOLDOWN,
        scale_in_cooldown: Duration = SCALE_IN_COOLDOWN,
    ) -> None:
        super().__init__(scope, construct_id)
        self.target = appscaling.ScalableTarget(
            self,
            "Target",
            service_namespace=service_namespace,
            resource_id=resource_id,
            scalable_dimension=scalable_dimension,
            min_capacity=min_capacity,
            max_capacity=max_capacity,
        )
        self.stream_policy = self._policy(
            "StreamLoad", streams, streams_target, scale_out_cooldown, scale_in_cooldown
        )
        self.gpu_policy = self._policy(
            "GpuUtilisation",
            gpu,
            gpu_target_percent,
            scale_out_cooldown,
            scale_in_cooldown,
            may_scale_in=False,
        )

    def _policy(
        self,
        name: str,
        metric: TrackedMetric,
        value: float,
        scale_out: Duration,
        scale_in: Duration,
        *,
        may_scale_in: bool = True,
    ) -> appscaling.CfnScalingPolicy:
        return appscaling.CfnScalingPolicy(
            self,
            name,
            policy_name=name,
            policy_type="TargetTrackingScaling",
            scaling_target_id=self.target.scalable_target_id,
            target_tracking_scaling_policy_configuration=metric.configuration(
                target=value, scale_out=scale_out, scale_in=scale_in, may_scale_in=may_scale_in
            ),
        )
