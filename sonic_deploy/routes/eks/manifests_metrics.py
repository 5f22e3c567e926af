"""The EKS route's metrics and scaling objects (plain dicts, no aws_cdk): the CloudWatch agent's scrape of the
namespace's pods into `Workloads.metrics_namespace` (as the ECS route's sonic_metrics.py does for Sonic/ECS),
and KEDA scaling the GPU workers on those CloudWatch figures (docs/eks.md, section 4)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from sonic_deploy.routes.eks.manifests_nodes import Manifest, header

if TYPE_CHECKING:
    from sonic_deploy.routes.eks.manifests import Workloads

# Service (config) -> the Kubernetes name of its workload, Service and scrape job.
APP_NAMES = {
    "api_server": "api-server",
    "gpu_worker": "gpu-worker",
    "nats": "nats",
    "licence_proxy": "licence-proxy",
    "cloudwatch_agent": "cloudwatch-agent",
}
NAME_LABEL = "app.kubernetes.io/name"
PART_OF = {"app.kubernetes.io/part-of": "sonic"}
AGENT_CONFIG = "cloudwatch-agent"  # the ConfigMap
KEDA_AUTH = "keda-aws"  # the TriggerAuthentication

# As the ECS route publishes them (sonic_metrics.py): gauges, summed or averaged over the workers.
WORKER_METRICS = (
    "inferno_worker_load",
    "inferno_worker_capacity",
    "inferno_worker_rtf",
    "inferno_worker_ttfa",
)
API_METRICS = ("api_queue_size", "api_unserviceable_requests_size")
# NVIDIA's DCGM exporter chart, installed into the namespace: its pod label and port (deployment/
# templates/_helpers.tpl, values.yaml `service.port`) and counters (etc/default-counters.csv), at d5e5f51.
DCGM_JOB, DCGM_PORT = "dcgm-exporter", 9400
GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"
GPU_METRICS = (GPU_UTIL, "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE")
# Karpenter's controller (its chart's pod label and metrics port, charts/karpenter at c88abbbad), and how long
# each pod not yet ready has waited since it was made (website/content/en/v1.14/reference/metrics.md): the
# GPU worker waiting for a node, or any pod of the namespace. Its series name the pod's namespace.
KARPENTER_JOB, KARPENTER_PORT, KARPENTER_NAMESPACE = "karpenter", 8080, "kube-system"
PODS_WAITING = "karpenter_pods_unstarted_time_seconds"
COLLECTION_INTERVAL_S = 10
DIMENSION = "ClusterName"  # the one dimension, as on ECS: the agent adds it from cluster_name


def app_labels(service: str) -> dict[str, str]:
    return {NAME_LABEL: APP_NAMES[service], **PART_OF}


def _scrape_targets(w: Workloads) -> list[tuple[str, str, int, tuple[str, ...]]]:
    """(job, namespace, metrics port, metrics to publish) for each scraped workload."""
    targets = []
    for service, published in (("gpu_worker", WORKER_METRICS), ("api_server", API_METRICS)):
        port = w.services[service].metrics_port if service in w.services else None
        if port is not None:
            targets.append((APP_NAMES[service], w.namespace, int(port), published))
    return [
        *targets,
        (DCGM_JOB, w.namespace, DCGM_PORT, GPU_METRICS),
        (KARPENTER_JOB, KARPENTER_NAMESPACE, KARPENTER_PORT, (PODS_WAITING,)),
    ]


def prometheus_config(w: Workloads) -> str:
    """A scrape job per workload: its namespace's pods carrying its name label, at its metrics port.
    Karpenter's series are kept for this namespace's pods only."""
    jobs: list[dict[str, Any]] = [
        {
            "job_name": job,
            "kubernetes_sd_configs": [{"role": "pod", "namespaces": {"names": [namespace]}}],
            "relabel_configs": [
                {
                    "source_labels": ["__meta_kubernetes_pod_label_app_kubernetes_io_name"],
                    "regex": job,
                    "action": "keep",
                },
                {
                    "source_labels": ["__meta_kubernetes_pod_container_port_number"],
                    "regex": str(port),
                    "action": "keep",
                },
                {"source_labels": ["__meta_kubernetes_pod_phase"], "regex": "Running", "action": "keep"},
            ],
        }
        for job, namespace, port, _ in _scrape_targets(w)
    ]
    (karpenter,) = [job for job in jobs if job["job_name"] == KARPENTER_JOB]
    karpenter["metric_relabel_configs"] = [
        {
            "source_labels": ["__name__", "namespace"],
            "regex": f"{PODS_WAITING};{w.namespace}",
            "action": "keep",
        }
    ]
    interval = f"{COLLECTION_INTERVAL_S}s"
    # JSON is YAML: the agent reads this as Prometheus's own scrape configuration.
    return json.dumps(
        {"global": {"scrape_interval": interval, "scrape_timeout": "5s"}, "scrape_configs": jobs},
        sort_keys=True,
    )


def agent_config(w: Workloads) -> str:
    """The agent's own configuration: the scrape above, published as EMF into the metrics namespace."""
    declarations = [
        {
            "source_labels": ["job"],
            "label_matcher": f"^{job}$",
            "dimensions": [[DIMENSION]],
            "metric_selectors": [f"^{name}$" for name in published],
        }
        for job, _, _, published in _scrape_targets(w)
    ]
    config = {
        # The Region named: pods on a one-hop IMDSv2 node cannot ask the instance metadata for it.
        "agent": {"metrics_collection_interval": COLLECTION_INTERVAL_S, "region": w.region},
        "logs": {
            "metrics_collected": {
                "prometheus": {
                    "cluster_name": w.cluster_name,
                    "log_group_name": w.metrics_log_group,
                    "prometheus_config_path": "env:PROMETHEUS_CONFIG_CONTENT",
                    "emf_processor": {
                        "metric_namespace": w.metrics_namespace,
                        "metric_declaration": declarations,
                    },
                }
            },
            "force_flush_interval": 5,
        },
    }
    return json.dumps(config, sort_keys=True)


def agent_environment() -> list[dict[str, Any]]:
    """The variables the agent image reads its configurations from, as the ECS route's scraper task does."""
    return [
        {"name": variable, "valueFrom": {"configMapKeyRef": {"name": AGENT_CONFIG, "key": key}}}
        for variable, key in (
            ("CW_CONFIG_CONTENT", "agent.json"),
            ("PROMETHEUS_CONFIG_CONTENT", "prometheus.yaml"),
        )
    ]


def agent_objects(w: Workloads, service_account: str) -> list[Manifest]:
    """The agent's ConfigMap, and a Role (bound to its ServiceAccount) in each namespace it scrapes pods of
    (this one's, and Karpenter's) to find them."""
    labels = app_labels("cloudwatch_agent")
    config_map = header("v1", "ConfigMap", AGENT_CONFIG, w.namespace, labels)
    config_map["data"] = {"agent.json": agent_config(w), "prometheus.yaml": prometheus_config(w)}
    discovery = []
    for namespace in sorted({namespace for _, namespace, _, _ in _scrape_targets(w)}):
        role = header("rbac.authorization.k8s.io/v1", "Role", "cloudwatch-agent-discovery", namespace, labels)
        role["rules"] = [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]
        binding = header(
            "rbac.authorization.k8s.io/v1", "RoleBinding", "cloudwatch-agent-discovery", namespace, labels
        )
        binding["roleRef"] = {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "Role",
            "name": role["metadata"]["name"],
        }
        binding["subjects"] = [{"kind": "ServiceAccount", "name": service_account, "namespace": w.namespace}]
        discovery += [role, binding]
    return [config_map, *discovery]


def _number(value: float) -> str:
    return f"{value:g}"


def _cloudwatch_trigger(
    w: Workloads, name: str, metric: str, stat: str, *, null_is_error: bool
) -> dict[str, Any]:
    """An aws-cloudwatch trigger on one metric. Metadata names: kedacore/keda at 8b4f083,
    pkg/scalers/aws_cloudwatch_scaler.go (awsCloudwatchMetadata; targetMetricValue and minMetricValue
    required; metricStatPeriod 1, 5, 10, 30, 60 or a multiple of 60; collection time a multiple of it)."""
    metadata = {
        "awsRegion": w.region,
        "namespace": w.metrics_namespace,
        "metricName": metric,
        "dimensionName": DIMENSION,
        "dimensionValue": w.cluster_name,
        "metricStat": stat,
        "metricStatPeriod": "60",
        # Two minutes: a late minute is read from the one before, not as missing.
        "metricCollectionTime": "120",
        "minMetricValue": "0",
        # Required, but unused: with scalingModifiers the composite's target decides.
        "targetMetricValue": "1",
    }
    if null_is_error:
        # No data is an error (default: read as 0), so the fallback holds the fleet.
        metadata["ignoreNullValues"] = "false"
    return {
        "type": "aws-cloudwatch",
        "name": name,
        "metadata": metadata,
        "authenticationRef": {"name": KEDA_AUTH},
    }


def scaling_formula(w: Workloads) -> str:
    """Replicas wanted over replicas running: streams against target_utilisation, GPU use against its %. With
    no capacity reported (every worker loading its model, or none scraped) 1: hold the fleet, never 0/0. KEDA
    takes expr's ternary (apis/keda/v1alpha1/scaledobject_webhook_test.go:1119 at 8b4f083)."""
    streams = f"load / capacity / {_number(w.target_utilisation)}"
    return f"float(capacity > 0 ? max({streams}, gpu / {_number(w.gpu_target_percent)}) : 1)"


def scaling_objects(w: Workloads) -> list[Manifest]:
    """KEDA's TriggerAuthentication (the operator's own Pod Identity) and the workers' ScaledObject. Field
    names: kedacore/keda at 8b4f083, apis/keda/v1alpha1/scaledobject_types.go, triggerauthentication_types.go."""
    labels = app_labels("gpu_worker")
    auth = header("keda.sh/v1alpha1", "TriggerAuthentication", KEDA_AUTH, w.namespace, labels)
    auth["spec"] = {"podIdentity": {"provider": "aws"}}
    scaled = header("keda.sh/v1alpha1", "ScaledObject", APP_NAMES["gpu_worker"], w.namespace, labels)
    scaled["spec"] = {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": APP_NAMES["gpu_worker"]},
        "pollingInterval": 15,
        "minReplicaCount": int(w.min_workers),
        "maxReplicaCount": int(w.max_workers),
        # A trigger in error (a stream metric stopped) keeps the replicas there are, as ECS does.
        "fallback": {"failureThreshold": 3, "replicas": int(w.min_workers), "behavior": "currentReplicas"},
        "advanced": {
            "horizontalPodAutoscalerConfig": {
                "behavior": {
                    "scaleUp": {"stabilizationWindowSeconds": int(w.scale_out_window_s)},
                    "scaleDown": {
                        "stabilizationWindowSeconds": int(w.scale_in_window_s),
                        "policies": [{"type": "Pods", "value": 1, "periodSeconds": 60}],
                    },
                }
            },
            "scalingModifiers": {"formula": scaling_formula(w), "target": "1", "metricType": "Value"},
        },
        "triggers": [
            _cloudwatch_trigger(w, "load", "inferno_worker_load", "Sum", null_is_error=True),
            _cloudwatch_trigger(w, "capacity", "inferno_worker_capacity", "Sum", null_is_error=True),
            # Missing GPU figures read as 0: streams alone decide, as ECS's GPU policy only adds capacity.
            _cloudwatch_trigger(w, "gpu", GPU_UTIL, "Average", null_is_error=False),
        ],
    }
    return [auth, scaled]
