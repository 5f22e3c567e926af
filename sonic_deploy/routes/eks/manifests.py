"""The Kubernetes objects the EKS stack applies, as plain dicts from flat inputs: no aws_cdk, since the tools
import route packages. String inputs may be CDK tokens (ARNs, names): placed, never parsed. The services
are the ECS route's (routes/ecs/constructs/self_hosted_sonic.py), from the same ServiceConfig."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sonic_deploy.config.cartesia import ServiceConfig
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

__all__ = [
    "ASSOCIATED",
    "SERVICE_ACCOUNTS",
    "GpuNodes",
    "Manifest",
    "Workloads",
    "gpu_nodes",
    "peer_addresses",
    "workloads",
]

# What runs (connected mode: no licence proxy yet), by the service account each runs as.
SERVICE_ACCOUNTS = {
    "nats": "nats",
    "api_server": "api-server",
    "gpu_worker": "gpu-worker",
    "cloudwatch_agent": "cloudwatch-agent",
}
RUN = tuple(SERVICE_ACCOUNTS)
# Those with a Pod Identity association (services.py): NATS calls no AWS API.
ASSOCIATED = ("api_server", "gpu_worker", "cloudwatch_agent")
NATS_ROUTE_PORT = 6222  # nats-server's cluster port, as on ECS (routes/ecs/config.py)
NATS_CLUSTER = "nats-cluster"  # the headless Service: a stable DNS name per NATS pod, for the routes
SECRETS_DRIVER = "secrets-store.csi.k8s.io"
SECRETS_MOUNT = "/mnt/secrets-store"
# ECS's container health check timings (routes/ecs/constructs/sonic_service.py).
HEALTH_INTERVAL_S, HEALTH_TIMEOUT_S, HEALTH_RETRIES, HEALTH_START_S = 30, 5, 3, 60


@dataclass(frozen=True)
class Workloads:
    """What the namespace runs. Strings may be CDK tokens; ints are ints."""

    namespace: str  # "sonic"
    services: Mapping[str, ServiceConfig]  # api_server, gpu_worker, nats, cloudwatch_agent (others ignored)
    images: Mapping[str, str]  # service -> the image pods pull (ECR uri:tag or uri@digest)
    api_server_replicas: int
    nats_replicas: int
    min_workers: int
    max_workers: int
    api_key_secret: str  # Secrets Manager name or ARN of the API key
    target_group_arn: str  # the stack's NLB IP target group (TargetGroupBinding)
    deregistration_delay_s: int
    api_stop_timeout_s: int
    worker_stop_timeout_s: int
    region: str
    cluster_name: str
    metrics_namespace: str  # "Sonic/EKS"
    target_utilisation: float  # 0.8: load / capacity
    gpu_target_percent: float  # 80
    scale_out_window_s: int  # 30
    scale_in_window_s: int  # 900
    service_accounts: Mapping[str, str]  # service -> ServiceAccount name (Pod Identity associations)
    # Added: the log group the agent writes its EMF events to (the stack's, encrypted).
    metrics_log_group: str = "/aws/containerinsights/sonic/prometheus"
    # Added: the registry_credentials secret (name or ARN; its "password" field), for services whose
    # `secrets` name it (the GPU worker's GOOGLE_APPLICATION_CREDENTIALS_JSON in the shipped config).
    registry_credentials_secret: str | None = None
    # Added: GpuNodes.name of the NodePools the workers run on (their nodes carry it as a label).
    gpu_nodes_name: str = "sonic-gpu"
    # Added: the GPU worker's health, as ecs.worker_start_period_s and ecs.worker_health_retries.
    worker_start_period_s: int = 300
    worker_health_retries: int = 10
    # The CPU pods' nodes (NATS, the API server, the agent): the stack's system nodes, in the GPU nodes' AZ.
    system_node_selector: Mapping[str, str] = field(default_factory=dict)


def workloads(w: Workloads) -> list[Manifest]:
    """Every namespaced object, in apply order: namespace, identities, secrets, NATS, API server, workers,
    metrics, scaling."""
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
    secret_classes = [_secret_class(w, service) for service in RUN if w.services[service].secrets]
    return [
        namespace,
        *accounts,
        *secret_classes,
        *_nats(w),
        *_api_server(w),
        *_gpu_worker(w),
        *agent_objects(w, w.service_accounts["cloudwatch_agent"]),
        _agent(w),
        *scaling_objects(w),
    ]


def peer_addresses(w: Workloads) -> dict[str, str]:
    """Peer -> its in-cluster address, for the variables ServiceConfig names (nats_url_variable,
    licence_proxy_url_variable). No licence proxy runs here yet: its address names the Service it would have."""
    ns = f"{w.namespace}.svc.cluster.local"
    addresses = {"nats": f"nats://{APP_NAMES['nats']}.{ns}:{w.services['nats'].port}"}
    proxy = w.services.get("licence_proxy")
    if proxy is not None and proxy.port is not None:
        addresses["licence_proxy"] = f"http://licence-proxy.{ns}:{proxy.port}"
    return addresses


# --- pods -------------------------------------------------------------------------------------------------


def _resources(spec: ServiceConfig, *, gpu: bool = False, hard_memory: bool = True) -> dict[str, Any]:
    """ECS cpu units are 1/1024 vCPU: requested as millicores, not limited (a CFS quota throttles bursts the
    node could serve). memory_mib is requested, and limited as Fargate's task memory is; the GPU worker's
    was a soft reservation on ECS (memory_reservation_mib), so there its node is the limit."""
    requests: dict[str, Any] = {"cpu": f"{round(spec.cpu * 1000 / 1024)}m", "memory": f"{spec.memory_mib}Mi"}
    limits: dict[str, Any] = {"memory": f"{spec.memory_mib}Mi"} if hard_memory else {}
    if gpu:
        requests[GPU_RESOURCE] = limits[GPU_RESOURCE] = 1
    return {"requests": requests, "limits": limits}


def _probe_command(health_check: Sequence[str]) -> list[str]:
    """A Docker health check as an exec probe: CMD-SHELL runs its string in /bin/sh, CMD its arguments."""
    if health_check[0] == "CMD-SHELL":
        return ["/bin/sh", "-c", " ".join(health_check[1:])]
    if health_check[0] == "CMD":
        return list(health_check[1:])
    raise ValueError(f"health_check must start with CMD or CMD-SHELL, not {health_check[0]!r}")


def _probes(
    spec: ServiceConfig, *, start_s: int = HEALTH_START_S, retries: int = HEALTH_RETRIES
) -> dict[str, Any]:
    """ECS's check three ways: startup covers its start period and retries, liveness restarts after
    `retries` failures 30 s apart, readiness takes the pod out of its Service (and target group) after 30 s."""
    if not spec.health_check:
        return {}
    command = {"exec": {"command": _probe_command(spec.health_check)}}
    every = 10
    startup = math.ceil((start_s + retries * HEALTH_INTERVAL_S) / every)
    return {
        "startupProbe": {
            **command,
            "periodSeconds": every,
            "timeoutSeconds": HEALTH_TIMEOUT_S,
            "failureThreshold": startup,
        },
        "livenessProbe": {
            **command,
            "periodSeconds": HEALTH_INTERVAL_S,
            "timeoutSeconds": HEALTH_TIMEOUT_S,
            "failureThreshold": retries,
        },
        "readinessProbe": {
            **command,
            "periodSeconds": every,
            "timeoutSeconds": HEALTH_TIMEOUT_S,
            "failureThreshold": HEALTH_RETRIES,
        },
    }


def _secret_name(service: str) -> str:
    return f"{APP_NAMES[service]}-secrets"


def _secret_class(w: Workloads, service: str) -> Manifest:
    """ASCP reads this service's secrets with its pod's Pod Identity and syncs them into a Secret (only
    while a pod mounts the volume): one class per service, so each role reads only its own secrets."""
    objects: list[dict[str, Any]] = []
    keys: list[dict[str, str]] = []
    for ref in sorted(set(w.services[service].secrets.values())):
        if ref == "api_key":
            objects.append(
                {"objectName": w.api_key_secret, "objectType": "secretsmanager", "objectAlias": ref}
            )
        else:
            if w.registry_credentials_secret is None:
                raise ValueError(
                    f"{service} names the {ref} secret: set Workloads.registry_credentials_secret"
                )
            # The service-account JSON is the secret's "password" field, as the ECS route reads it.
            objects.append(
                {
                    "objectName": w.registry_credentials_secret,
                    "objectType": "secretsmanager",
                    "objectAlias": f"{ref}-document",  # the whole JSON's file: a name of ours, not the ARN's
                    "jmesPath": [{"path": "password", "objectAlias": ref}],
                }
            )
        keys.append({"objectName": ref, "key": ref})
    spc = header(
        "secrets-store.csi.x-k8s.io/v1",
        "SecretProviderClass",
        _secret_name(service),
        w.namespace,
        app_labels(service),
    )
    # Fields: kubernetes-sigs/secrets-store-csi-driver at 0aad886, apis/v1/secretproviderclass_types.go;
    # parameter names: aws/secrets-store-csi-driver-provider-aws at a74182c, server/server.go.
    spc["spec"] = {
        "provider": "aws",
        # JSON is YAML: ASCP reads `objects` with sigs.k8s.io/yaml (provider/secret_descriptor.go, a74182c).
        "parameters": {"objects": json.dumps(objects), "region": w.region, "usePodIdentity": "true"},
        "secretObjects": [{"secretName": _secret_name(service), "type": "Opaque", "data": keys}],
    }
    return spc


def _container(
    w: Workloads,
    service: str,
    *,
    gpu: bool = False,
    hard_memory: bool = True,
    probes: dict[str, Any] | None = None,
) -> dict[str, Any]:
    spec = w.services[service]
    environment = dict(spec.environment)
    peers = peer_addresses(w)
    for peer, variable in (
        ("nats", spec.nats_url_variable),
        ("licence_proxy", spec.licence_proxy_url_variable),
    ):
        if variable is not None and peer in peers:
            environment[variable] = peers[peer]
    env: list[dict[str, Any]] = [
        {"name": name, "value": value} for name, value in sorted(environment.items())
    ]
    env += [
        {"name": variable, "valueFrom": {"secretKeyRef": {"name": _secret_name(service), "key": ref}}}
        for variable, ref in sorted(spec.secrets.items())
    ]
    container: dict[str, Any] = {
        "name": APP_NAMES[service],
        "image": w.images[service],
        "imagePullPolicy": "IfNotPresent",
        "resources": _resources(spec, gpu=gpu, hard_memory=hard_memory),
        "securityContext": {"allowPrivilegeEscalation": False},
        **(probes if probes is not None else _probes(spec)),
    }
    if spec.command:
        container["args"] = list(spec.command)  # as ECS's command: the image's entrypoint runs with them
    if env:
        container["env"] = env
    ports = [{"name": "http", "containerPort": spec.port}] if spec.port is not None else []
    if spec.metrics_port is not None and spec.metrics_port != spec.port:
        ports.append({"name": "metrics", "containerPort": spec.metrics_port})
    if ports:
        container["ports"] = ports
    if spec.secrets:
        container["volumeMounts"] = [{"name": "secrets", "mountPath": SECRETS_MOUNT, "readOnly": True}]
    return container


def _pod(
    w: Workloads,
    service: str,
    container: dict[str, Any],
    *,
    grace_s: int | None = None,
    kube_api: bool = False,
) -> dict[str, Any]:
    """A pod template: its ServiceAccount, no Service links (they would put NATS_PORT and the like into
    every container's environment), and the secrets volume when the container reads secrets."""
    spec: dict[str, Any] = {
        "serviceAccountName": w.service_accounts[service],
        "automountServiceAccountToken": kube_api,  # only the agent calls the Kubernetes API
        "enableServiceLinks": False,
        "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [container],
    }
    if grace_s is not None:
        spec["terminationGracePeriodSeconds"] = int(grace_s)
    if service != "gpu_worker" and w.system_node_selector:
        spec["nodeSelector"] = dict(w.system_node_selector)
    if w.services[service].secrets:
        spec["volumes"] = [
            {
                "name": "secrets",
                "csi": {
                    "driver": SECRETS_DRIVER,
                    "readOnly": True,
                    "volumeAttributes": {"secretProviderClass": _secret_name(service)},
                },
            }
        ]
    return {"metadata": {"labels": app_labels(service)}, "spec": spec}


def _spread(service: str) -> list[dict[str, Any]]:
    """Pods of one workload on different nodes where there are enough."""
    return [
        {
            "maxSkew": 1,
            "topologyKey": "kubernetes.io/hostname",
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": {"app.kubernetes.io/name": APP_NAMES[service]}},
        }
    ]


def _deployment(w: Workloads, service: str, pod: dict[str, Any], replicas: int | None) -> Manifest:
    deployment = header("apps/v1", "Deployment", APP_NAMES[service], w.namespace, app_labels(service))
    spec: dict[str, Any] = {
        "selector": {"matchLabels": {"app.kubernetes.io/name": APP_NAMES[service]}},
        # As ECS's 100% minimum healthy: a new pod is ready before an old one goes.
        "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
        "template": pod,
    }
    if replicas is not None:
        spec["replicas"] = int(replicas)
    deployment["spec"] = spec
    return deployment


def _disruption_budget(w: Workloads, service: str) -> Manifest:
    budget = header("policy/v1", "PodDisruptionBudget", APP_NAMES[service], w.namespace, app_labels(service))
    budget["spec"] = {
        "maxUnavailable": 1,
        "selector": {"matchLabels": {"app.kubernetes.io/name": APP_NAMES[service]}},
    }
    return budget


def _service(w: Workloads, service: str, name: str, ports: list[dict[str, Any]], **extra: Any) -> Manifest:
    svc = header("v1", "Service", name, w.namespace, app_labels(service))
    svc["spec"] = {"selector": {"app.kubernetes.io/name": APP_NAMES[service]}, "ports": ports, **extra}
    return svc


# --- the services ------------------------------------------------------------------------------------------


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
    container = _container(w, "nats", probes=_probes(spec) or ready)
    container["args"] = nats_args(w)
    container["ports"] = [
        {"name": "client", "containerPort": spec.port},
        {"name": "cluster", "containerPort": NATS_ROUTE_PORT},
    ]
    pod = _pod(w, "nats", container)
    pod["spec"]["topologySpreadConstraints"] = _spread("nats")
    stateful = header("apps/v1", "StatefulSet", APP_NAMES["nats"], w.namespace, app_labels("nats"))
    stateful["spec"] = {
        "serviceName": NATS_CLUSTER,
        "replicas": int(w.nats_replicas),
        # All at once: each server retries its routes until the others answer.
        "podManagementPolicy": "Parallel",
        "selector": {"matchLabels": {"app.kubernetes.io/name": APP_NAMES["nats"]}},
        "template": pod,
    }
    cluster = _service(
        w,
        "nats",
        NATS_CLUSTER,
        [{"name": "cluster", "port": NATS_ROUTE_PORT, "targetPort": "cluster"}],
        clusterIP="None",
        publishNotReadyAddresses=True,
    )
    client = _service(
        w, "nats", APP_NAMES["nats"], [{"name": "client", "port": spec.port, "targetPort": "client"}]
    )
    return [cluster, client, stateful, _disruption_budget(w, "nats")]


def _api_server(w: Workloads) -> list[Manifest]:
    spec = w.services["api_server"]
    container = _container(w, "api_server")
    # Drain (docs/eks.md, section 3): the pod keeps serving its calls while the target group deregisters it,
    # then has api_stop_timeout_s from SIGTERM.
    container["lifecycle"] = {"preStop": {"sleep": {"seconds": int(w.deregistration_delay_s)}}}
    pod = _pod(w, "api_server", container, grace_s=w.deregistration_delay_s + w.api_stop_timeout_s)
    pod["spec"]["topologySpreadConstraints"] = _spread("api_server")
    service = _service(
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
        _deployment(w, "api_server", pod, w.api_server_replicas),
        _disruption_budget(w, "api_server"),
        binding,
    ]


def _gpu_worker(w: Workloads) -> list[Manifest]:
    spec = w.services["gpu_worker"]
    probes = _probes(spec, start_s=w.worker_start_period_s, retries=w.worker_health_retries)
    container = _container(w, "gpu_worker", gpu=True, hard_memory=False, probes=probes)
    pod = _pod(w, "gpu_worker", container, grace_s=w.worker_stop_timeout_s)
    pod["spec"]["nodeSelector"] = {GPU_NODES_LABEL: w.gpu_nodes_name}
    pod["spec"]["tolerations"] = [{"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}]
    # No replicas: KEDA's HPA owns the count, and an apply without the field leaves it be.
    return [_deployment(w, "gpu_worker", pod, None), _disruption_budget(w, "gpu_worker")]


def _agent(w: Workloads) -> Manifest:
    container = _container(w, "cloudwatch_agent")
    container["env"] = [*agent_environment(), *container.get("env", [])]
    return _deployment(w, "cloudwatch_agent", _pod(w, "cloudwatch_agent", container, kube_api=True), 1)
