"""The EKS route's operations: the alarms on the workers' metrics (the CloudWatch agent's, `Sonic/EKS`) and on
the load balancer, the canary's, the composites that page and the dashboard. sonic_deploy/constructs/
operations.py says how the composites page; docs/eks.md, section 4, where the metrics come from."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct

from sonic_deploy.config import Settings
from sonic_deploy.constructs.alerting import Alerting
from sonic_deploy.constructs.api_load_balancer import ApiLoadBalancer
from sonic_deploy.constructs.dashboard import OperationsDashboard, alarm_states, canary_widgets, graph
from sonic_deploy.constructs.operations import agent_for, canary_alarms_for, page_composites
from sonic_deploy.constructs.probe_canary import ProbeCanary

# The DCGM exporter's GPU use, as the agent republishes it (manifests_metrics.py's scrape).
from sonic_deploy.routes.eks.manifests_metrics import GPU_UTIL, PODS_WAITING

METRICS_NAMESPACE = "Sonic/EKS"
ONE_MINUTE = Duration.minutes(1)
ABOVE = cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD
BELOW = cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD
# Five minutes without a worker sample is no agent or no worker it can find; a GPU node reports within a few
# minutes of joining.
WORKER_METRICS_GRACE_MINUTES = 5
GPU_METRICS_GRACE_MINUTES = 15


class EksMetrics:
    """The route's metrics in `Sonic/EKS`, by the one dimension the agent keeps (ClusterName: cost)."""

    def __init__(self, cluster_name: str) -> None:
        self.cluster_name = cluster_name

    def metric(
        self, name: str, *, statistic: str = "Sum", period: Duration = ONE_MINUTE
    ) -> cloudwatch.Metric:
        return cloudwatch.Metric(
            namespace=METRICS_NAMESPACE,
            metric_name=name,
            statistic=statistic,
            period=period,
            dimensions_map={"ClusterName": self.cluster_name},
        )

    def streams(self) -> dict[str, cloudwatch.IMetric]:
        return {
            "load": self.metric("inferno_worker_load").with_(label="load"),
            "capacity": self.metric("inferno_worker_capacity").with_(label="capacity"),
        }


class EksOperations(Construct):
    """NoWorkerCapacity, WorkerMetricsMissing, UnserviceableRequests, WorkerTtfaP95, WorkerCapacityExhausted,
    GpuMetricsMissing, NoHealthyApiTargets and UnhealthyApiTargets; the canary's and the agent's alarms; the
    composites; the dashboard. No alarm has actions of its own: Page pages."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: Settings,
        alerting: Alerting,
        metrics: EksMetrics,
        load_balancer: ApiLoadBalancer,
        canary_schedule: ProbeCanary | None,
    ) -> None:
        super().__init__(scope, construct_id)
        cfg = settings.environment.eks
        assert cfg is not None
        alarms = cfg.alarms
        canary = canary_alarms_for(self, settings, alerting, "eks", canary_schedule)
        no_capacity = alerting.alarm(
            "NoWorkerCapacity",
            metric=metrics.metric("inferno_worker_capacity"),
            threshold=1,
            evaluation_periods=3,
            comparison=BELOW,
            description="The GPU workers report no capacity for 3 minutes: every request will queue or fail.",
        )
        worker_metrics_missing = alerting.alarm(
            "WorkerMetricsMissing",
            metric=metrics.metric("inferno_worker_capacity", statistic="SampleCount"),
            threshold=1,
            evaluation_periods=WORKER_METRICS_GRACE_MINUTES,
            comparison=BELOW,
            missing_data=cloudwatch.TreatMissingData.BREACHING,
            description=f"No inferno_worker_capacity sample for {WORKER_METRICS_GRACE_MINUTES} minutes: the "
            "CloudWatch agent stopped (kubectl -n <namespace> logs deploy/cloudwatch-agent) or no worker pod runs; "
            "the scaler then holds the fleet (docs/eks.md, section 4).",
        )
        unserviceable = alerting.alarm(
            "UnserviceableRequests",
            metric=metrics.metric("api_unserviceable_requests_size", statistic="Maximum"),
            threshold=0,
            evaluation_periods=3,
            datapoints_to_alarm=2,
            comparison=ABOVE,
            description="The API server refused requests it could not serve in 2 of the last 3 minutes: add "
            "workers or raise eks.max_workers.",
        )
        ttfa = alerting.alarm(
            "WorkerTtfaP95",
            metric=metrics.metric("inferno_worker_ttfa", statistic="p95", period=Duration.minutes(5)),
            threshold=alarms.worker_ttfa_p95_ms,
            evaluation_periods=2,
            description=f"Worker time to first audio p95 above {alarms.worker_ttfa_p95_ms:g} ms for 10 minutes.",
        )
        exhausted = alerting.alarm(
            "WorkerCapacityExhausted",
            metric=cloudwatch.MathExpression(
                expression="load / capacity",
                using_metrics=metrics.streams(),
                label="load / capacity",
                period=ONE_MINUTE,
            ),
            threshold=1,
            evaluation_periods=alarms.capacity_minutes,
            description=f"Worker load at worker capacity for {alarms.capacity_minutes} minutes: requests queue; "
            "scaling is not keeping up (eks.max_workers, pending GPU nodes, the G and VT quota).",
        )
        minutes = alarms.provisioning_minutes
        waiting = alerting.alarm(
            "PodsWaiting",
            metric=metrics.metric(PODS_WAITING, statistic="Maximum"),
            threshold=minutes * 60,
            evaluation_periods=2,
            description=f"A pod of the namespace has not been ready for {minutes} minutes (Karpenter's "
            f"{PODS_WAITING}): a GPU worker waiting for a node (the G and VT quota, capacity in the AZ, "
            "kubectl get nodeclaims), or a pod that cannot start (kubectl -n <namespace> describe pod).",
        )
        gpu_missing = alerting.alarm(
            "GpuMetricsMissing",
            metric=metrics.metric(GPU_UTIL, statistic="SampleCount"),
            threshold=1,
            evaluation_periods=GPU_METRICS_GRACE_MINUTES,
            comparison=BELOW,
            missing_data=cloudwatch.TreatMissingData.BREACHING,
            description=f"No GPU utilisation for {GPU_METRICS_GRACE_MINUTES} minutes: the DCGM exporter or the "
            "agent's scrape of it stopped; the scaler reads GPU use as 0 and scales on streams alone.",
        )
        # A quiet NLB reports nothing (only while requests flow): missing is not breaching; the canary keeps it
        # reporting.
        no_targets = alerting.alarm(
            "NoHealthyApiTargets",
            metric=load_balancer.healthy_targets(),
            threshold=1,
            evaluation_periods=2,
            comparison=BELOW,
            description="No API server pod passes GET /status in the target group (the TargetGroupBinding, the "
            "pods' readiness): every new connection fails.",
        )
        unhealthy = alerting.alarm(
            "UnhealthyApiTargets",
            metric=load_balancer.unhealthy_targets(),
            threshold=0,
            evaluation_periods=2,
            comparison=ABOVE,
            description="API server pods behind the load balancer are failing GET /status.",
        )
        callers: list[cloudwatch.IAlarm] = [no_capacity, unserviceable, ttfa, no_targets]
        blind: list[cloudwatch.IAlarm] = [worker_metrics_missing, gpu_missing]
        if canary is not None:
            callers += canary.caller_facing
            blind += canary.blind
        agent = agent_for(self, settings, alerting, "eks")
        if agent is not None:
            callers += agent.alarms.caller_facing
        paged = page_composites(
            alerting, callers=callers, capacity=[exhausted, waiting, unhealthy], blind=blind
        )
        streams = metrics.streams()
        self.dashboard = OperationsDashboard(
            self,
            "Dashboard",
            dashboard_name=f"{settings.resource_prefix}-eks",
            rows=[
                [
                    *canary_widgets(
                        canary.metrics if canary is not None else None,
                        budget_ms=settings.environment.canary.ttfa_p95_ms,
                        environment=settings.environment_name,
                        width=6,
                    ),
                    graph(
                        "Worker time to first audio (ms)",
                        [metrics.metric("inferno_worker_ttfa", statistic=s) for s in ("p50", "p95")],
                        width=6,
                        left_label="ms",
                        budget=(alarms.worker_ttfa_p95_ms, f"alarm p95 {alarms.worker_ttfa_p95_ms:g} ms"),
                    ),
                    alarm_states(paged, width=6),
                ],
                [
                    graph(
                        "Worker streams: load and capacity",
                        list(streams.values()),
                        width=8,
                        left_label="streams",
                    ),
                    graph(
                        "Refused and queued",
                        [
                            metrics.metric("api_unserviceable_requests_size", statistic="Maximum"),
                            metrics.metric("api_queue_size", statistic="Maximum"),
                        ],
                        width=8,
                    ),
                    graph(
                        "API targets and GPU use",
                        [load_balancer.healthy_targets(), load_balancer.unhealthy_targets()],
                        right=[metrics.metric(GPU_UTIL, statistic="Average")],
                        width=8,
                        left_label="targets",
                        right_label="GPU %",
                    ),
                ],
                *([agent.row] if agent is not None else []),
            ],
        )
