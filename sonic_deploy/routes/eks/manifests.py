"""The Kubernetes objects the EKS stack applies, as plain dicts from flat inputs: no aws_cdk, since the tools
import route packages. String inputs may be CDK tokens (ARNs, names): placed, never parsed. The services
are the ECS route's (routes/ecs/constructs/self_hosted_sonic.py), from the same ServiceConfig; the pods'
builders are in manifests_pods.py, the licence proxy in manifests_licence.py."""

from __future__ import annotations

from sonic_deploy.routes.eks.manifests_licence import OfflineLicence, licence_proxy, storage_class
from sonic_deploy.routes.eks.manifests_metrics import (
    APP_NAMES,
    agent_environment,
    agent_objects,
    app_labels,
    scaling_objects,
)
from sonic_deploy.routes.eks.manifests_nodes import (
    GPU_NODES_LABEL,
    GPU_RESOURCE,
    GpuNodes,
    Manifest,
    gpu_nodes,
    header,
)
from sonic_deploy.routes.eks.manifests_pods import (
    Workloads,
    budget_for,
    container_for,
    deployment_for,
    health_probes,
    mounts_secrets,
    peer_addresses,
    pod_for,
    secret_class_for,
    service_for,
    spread_for,
)

__all__ = [
    "ASSOCIATED",
    "SERVICE_ACCOUNTS",
    "GpuNodes",
    "Manifest",
    "OfflineLicence",
    "Workloads",
    "gpu_nodes",
    "peer_addresses",
    "workloads",
]

# What runs, by the service account each runs as (the licence loader is a container of the proxy's pod).
SERVICE_ACCOUNTS = {
    "nats": "nats",
    "licence_proxy": "licence-proxy",
    "api_server": "api-server",
    "gpu_worker": "gpu-worker",
    "cloudwatch_agent": "cloudwatch-agent",
}
RUN = tuple(SERVICE_ACCOUNTS)
# Those with a Pod Identity association (services.py): NATS calls no AWS API.
ASSOCIATED = ("licence_proxy", "api_server", "gpu_worker", "cloudwatch_agent")
NATS_ROUTE_PORT = 6222  # nats-server's cluster port, as on ECS (routes/ecs/config.py)
NATS_CLUSTER = "nats-cluster"  # the headless Service: a stable DNS name per NATS pod, for the routes


def workloads(w: Workloads) -> list[Manifest]:
    """Every namespaced object, in apply order: namespace, identities, secrets, NATS, the licence proxy, API
    server, workers, metrics, scaling (and, air-gapped, the proxy's cluster-scoped StorageClass first)."""
    missing = [service for service in RUN if service not in w.services or service not in w.service_accounts]
    if missing:
        raise ValueError(f"Workloads: no service config or ServiceAccount name for {', '.join(missing)}")
    namespace = header(
        "v1",
        "Namespace",
        w.namespace,
        labels={
            # The load balancer controller holds a rollout until new pods are healthy in the target group.
            "elbv2.k8s.aws/pod-readiness-gate-inject": "enabled",
        },
    )
    accounts = [
        header("v1", "ServiceAccount", w.service_accounts[service], w.namespace, app_labels(service))
        for service in RUN
    ]
    secret_classes = [secret_class_for(w, service) for service in RUN if mounts_secrets(w, service)]
    return [
        *([storage_class()] if w.licence is not None else []),
        namespace,
        *accounts,
        *secret_classes,
        *_nats(w),
        *licence_proxy(w),
        *_api_server(w),
        *_gpu_worker(w),
        *agent_objects(w, w.service_accounts["cloudwatch_agent"]),
        _agent(w),
        *scaling_objects(w),
    ]


def nats_args(w: Workloads) -> list[str]:
    """The nats service's command with its routes (on ECS, one Cloud Map name) replaced by every server's
    headless-Service name; added when the command has none and there is more than one server."""
    routes = ",".join(
        f"nats://{APP_NAMES['nats']}-{i}.{NATS_CLUSTER}.{w.namespace}.svc.cluster.local:{NATS_ROUTE_PORT}"
        for i in range(int(w.nats_replicas))
    )
    args, found = [], False
    command = list(w.services["nats"].command)
    i = 0
    while i < len(command):
        if command[i] == "--routes" and i + 1 < len(command):
            args += ["--routes", routes]
            found, i = True, i + 2
            continue
        if command[i].startswith("--routes="):
            args.append(f"--routes={routes}")
            found = True
        else:
            args.append(command[i])
        i += 1
    if not found and w.nats_replicas > 1:
        args += ["--routes", routes]
    # Routes need a cluster listener (nats-server refuses "--routes" without "--cluster"): added when missing.
    if w.nats_replicas > 1 and not any(a == "--cluster" or a.startswith("--cluster=") for a in args):
        args += ["--cluster_name", "sonic", "--cluster", f"nats://0.0.0.0:{NATS_ROUTE_PORT}"]
    return args


def _nats(w: Workloads) -> list[Manifest]:
    spec = w.services["nats"]
    # Ready once it takes clients, unless config names a health check.
    ready = {"readinessProbe": {"tcpSocket": {"port": "client"}, "periodSeconds": 10}}
    container = container_for(w, "nats", probes=health_probes(spec) or ready)
    container["args"] = nats_args(w)
    container["ports"] = [
        {"name": "client", "containerPort": spec.port},
        {"name": "cluster", "containerPort": NATS_ROUTE_PORT},
    ]
    pod = pod_for(w, "nats", container)
    pod["spec"]["topologySpreadConstraints"] = spread_for("nats")
    stateful = header("apps/v1", "StatefulSet", APP_NAMES["nats"], w.namespace, app_labels("nats"))
    stateful["spec"] = {
        "serviceName": NATS_CLUSTER,
        "replicas": int(w.nats_replicas),
        # All at once: each server retries its routes until the others answer.
        "podManagementPolicy": "Parallel",
        "selector": {"matchLabels": {"app.kubernetes.io/name": APP_NAMES["nats"]}},
        "template": pod,
    }
    cluster = service_for(
        w,
        "nats",
        NATS_CLUSTER,
        [{"name": "cluster", "port": NATS_ROUTE_PORT, "targetPort": "cluster"}],
        clusterIP="None",
        publishNotReadyAddresses=True,
    )
    client = service_for(
        w, "nats", APP_NAMES["nats"], [{"name": "client", "port": spec.port, "targetPort": "client"}]
    )
    return [cluster, client, stateful, budget_for(w, "nats")]


def _api_server(w: Workloads) -> list[Manifest]:
    spec = w.services["api_server"]
    container = container_for(w, "api_server")
    # Drain (docs/eks.md, section 3): the pod keeps serving its calls while the target group deregisters it,
    # then has api_stop_timeout_s from SIGTERM.
    container["lifecycle"] = {"preStop": {"sleep": {"seconds": int(w.deregistration_delay_s)}}}
    pod = pod_for(w, "api_server", container, grace_s=w.deregistration_delay_s + w.api_stop_timeout_s)
    pod["spec"]["topologySpreadConstraints"] = spread_for("api_server")
    service = service_for(
        w, "api_server", APP_NAMES["api_server"], [{"name": "http", "port": spec.port, "targetPort": "http"}]
    )
    binding = header(
        "elbv2.k8s.aws/v1beta1",
        "TargetGroupBinding",
        APP_NAMES["api_server"],
        w.namespace,
        app_labels("api_server"),
    )
    # kubernetes-sigs/aws-load-balancer-controller at 225f445 (v3.5.0), apis/elbv2/v1beta1/
    # targetgroupbinding_types.go: the controller registers the Service's ready pod IPs in the target group.
    binding["spec"] = {
        "targetGroupARN": w.target_group_arn,
        "targetType": "ip",
        "serviceRef": {"name": APP_NAMES["api_server"], "port": spec.port},
    }
    return [
        service,
        deployment_for(w, "api_server", pod, w.api_server_replicas),
        budget_for(w, "api_server"),
        binding,
    ]


def _gpu_worker(w: Workloads) -> list[Manifest]:
    spec = w.services["gpu_worker"]
    probes = health_probes(spec, start_s=w.worker_start_period_s, retries=w.worker_health_retries)
    container = container_for(w, "gpu_worker", gpu=True, hard_memory=False, probes=probes)
    pod = pod_for(w, "gpu_worker", container, grace_s=w.worker_stop_timeout_s)
    pod["spec"]["nodeSelector"] = {GPU_NODES_LABEL: w.gpu_nodes_name}
    pod["spec"]["tolerations"] = [{"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}]
    # No replicas: KEDA's HPA owns the count, and an apply without the field leaves it be.
    return [deployment_for(w, "gpu_worker", pod, None), budget_for(w, "gpu_worker")]


def _agent(w: Workloads) -> Manifest:
    container = container_for(w, "cloudwatch_agent")
    container["env"] = [*agent_environment(), *container.get("env", [])]
    return deployment_for(w, "cloudwatch_agent", pod_for(w, "cloudwatch_agent", container, kube_api=True), 1)
