"""The pods of the EKS route's workloads, as plain dicts: what the stack's Workloads say (`Workloads`), and the
builders of containers, pods, Deployments, Services and secrets from the ECS route's ServiceConfig (no aws_cdk,
as manifests.py)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sonic_deploy.config.cartesia import ServiceConfig
from sonic_deploy.routes.eks.manifests_metrics import APP_NAMES, app_labels
from sonic_deploy.routes.eks.manifests_nodes import GPU_RESOURCE, Manifest, header

SECRETS_DRIVER = "secrets-store.csi.k8s.io"
SECRETS_MOUNT = "/mnt/secrets-store"
# ECS's container health check timings (routes/ecs/constructs/sonic_service.py).
HEALTH_INTERVAL_S, HEALTH_TIMEOUT_S, HEALTH_RETRIES, HEALTH_START_S = 30, 5, 3, 60


@dataclass(frozen=True)
class OfflineLicence:
    """Air-gapped mode: the secret the operator writes the licence into (`sonic-deploy licence upload`), where
    the proxy keeps it, and how the loader sends it."""

    secret: str  # Secrets Manager name
    data_path: str  # ecs.licence_data_path's twin: the proxy's volume
    content_type: str
    volume_gib: int = 1


# The offline licence's file in the licence proxy's secrets volume (its SecretProviderClass object alias).
LICENCE_OBJECT = "licence"


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
    # Air-gapped mode: the offline licence (the proxy then keeps state on a volume, and a loader feeds it).
    licence: OfflineLicence | None = None


def peer_addresses(w: Workloads) -> dict[str, str]:
    """Peer -> its in-cluster address, for the variables ServiceConfig names (nats_url_variable,
    licence_proxy_url_variable): their Services' cluster names."""
    ns = f"{w.namespace}.svc.cluster.local"
    addresses = {"nats": f"nats://{APP_NAMES['nats']}.{ns}:{w.services['nats'].port}"}
    proxy = w.services.get("licence_proxy")
    if proxy is not None and proxy.port is not None:
        addresses["licence_proxy"] = f"http://{APP_NAMES['licence_proxy']}.{ns}:{proxy.port}"
    return addresses


def _files(w: Workloads, service: str) -> list[dict[str, Any]]:
    """Secrets a service reads as files, not variables: the licence proxy's offline licence (its loader's)."""
    if service != "licence_proxy" or w.licence is None:
        return []
    return [{"objectName": w.licence.secret, "objectType": "secretsmanager", "objectAlias": LICENCE_OBJECT}]


def mounts_secrets(w: Workloads, service: str) -> bool:
    return bool(w.services[service].secrets) or bool(_files(w, service))


# --- the services ------------------------------------------------------------------------------------------


def resources_for(spec: ServiceConfig, *, gpu: bool = False, hard_memory: bool = True) -> dict[str, Any]:
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


def health_probes(
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


def secret_name_for(service: str) -> str:
    return f"{APP_NAMES[service]}-secrets"


def secret_class_for(w: Workloads, service: str) -> Manifest:
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
    objects += _files(w, service)
    spc = header(
        "secrets-store.csi.x-k8s.io/v1",
        "SecretProviderClass",
        secret_name_for(service),
        w.namespace,
        app_labels(service),
    )
    # Fields: kubernetes-sigs/secrets-store-csi-driver at 0aad886, apis/v1/secretproviderclass_types.go;
    # parameter names: aws/secrets-store-csi-driver-provider-aws at a74182c, server/server.go.
    spc["spec"] = {
        "provider": "aws",
        # JSON is YAML: ASCP reads `objects` with sigs.k8s.io/yaml (provider/secret_descriptor.go, a74182c).
        "parameters": {"objects": json.dumps(objects), "region": w.region, "usePodIdentity": "true"},
    }
    if keys:  # a Secret only for what containers read as variables (the licence is a file)
        spc["spec"]["secretObjects"] = [
            {"secretName": secret_name_for(service), "type": "Opaque", "data": keys}
        ]
    return spc


def container_for(
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
        {"name": variable, "valueFrom": {"secretKeyRef": {"name": secret_name_for(service), "key": ref}}}
        for variable, ref in sorted(spec.secrets.items())
    ]
    container: dict[str, Any] = {
        "name": APP_NAMES[service],
        "image": w.images[service],
        "imagePullPolicy": "IfNotPresent",
        "resources": resources_for(spec, gpu=gpu, hard_memory=hard_memory),
        "securityContext": {"allowPrivilegeEscalation": False},
        **(probes if probes is not None else health_probes(spec)),
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


def pod_for(
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
    if mounts_secrets(w, service):
        spec["volumes"] = [
            {
                "name": "secrets",
                "csi": {
                    "driver": SECRETS_DRIVER,
                    "readOnly": True,
                    "volumeAttributes": {"secretProviderClass": secret_name_for(service)},
                },
            }
        ]
    return {"metadata": {"labels": app_labels(service)}, "spec": spec}


def spread_for(service: str) -> list[dict[str, Any]]:
    """Pods of one workload on different nodes where there are enough."""
    return [
        {
            "maxSkew": 1,
            "topologyKey": "kubernetes.io/hostname",
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": {"app.kubernetes.io/name": APP_NAMES[service]}},
        }
    ]


def deployment_for(w: Workloads, service: str, pod: dict[str, Any], replicas: int | None) -> Manifest:
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


def budget_for(w: Workloads, service: str) -> Manifest:
    budget = header("policy/v1", "PodDisruptionBudget", APP_NAMES[service], w.namespace, app_labels(service))
    budget["spec"] = {
        "maxUnavailable": 1,
        "selector": {"matchLabels": {"app.kubernetes.io/name": APP_NAMES[service]}},
    }
    return budget


def service_for(w: Workloads, service: str, name: str, ports: list[dict[str, Any]], **extra: Any) -> Manifest:
    svc = header("v1", "Service", name, w.namespace, app_labels(service))
    svc["spec"] = {"selector": {"app.kubernetes.io/name": APP_NAMES[service]}, "ports": ports, **extra}
    return svc
