"""The EKS route's Kubernetes objects (routes/eks/manifests.py): each validates offline (kube_schemas.py), for
the shipped dev services' settings, and says what docs/eks.md decides (GPU, scaling, drain, nodes)."""

from __future__ import annotations

import copy
import dataclasses
import json
import subprocess
import sys
import tomllib
from functools import cache
from typing import Any

import jsonschema
import pytest

from sonic_deploy.config.cartesia import ServiceConfig
from sonic_deploy.routes.eks.manifests import (
    GpuNodes,
    Manifest,
    Workloads,
    gpu_nodes,
    nats_args,
    peer_addresses,
    workloads,
)
from sonic_deploy.routes.eks.manifests_nodes import GPU_NODES_LABEL, GPU_RESOURCE
from tests.cdk_context import ROOT
from tests.routes.eks.kube_schemas import UnknownKindError, validate


@cache
def dev_services() -> dict[str, ServiceConfig]:
    """[ecs.services.*] of the shipped dev environment: the settings the EKS route takes too."""
    config = tomllib.loads((ROOT / "config/environments/dev.toml").read_text(encoding="utf-8"))
    return {name: ServiceConfig.model_validate(table) for name, table in config["ecs"]["services"].items()}


def dev_workloads(**changes: Any) -> Workloads:
    services = dev_services()
    ecr = "123456789012.dkr.ecr.us-east-2.amazonaws.com/sonic-dev/eks"
    base = Workloads(
        namespace="sonic",
        services=services,
        images={name: f"{ecr}/{name}:{spec.tag}" for name, spec in services.items()},
        api_server_replicas=2,
        nats_replicas=3,
        min_workers=2,
        max_workers=6,
        api_key_secret="sonic/dev/cartesia-api-key",
        target_group_arn="arn:aws:elasticloadbalancing:us-east-2:123456789012:targetgroup/sonic-api/0123456789abcdef",
        deregistration_delay_s=300,
        api_stop_timeout_s=120,
        worker_stop_timeout_s=120,
        region="us-east-2",
        cluster_name="sonic-dev",
        metrics_namespace="Sonic/EKS",
        target_utilisation=0.8,
        gpu_target_percent=80.0,
        scale_out_window_s=30,
        scale_in_window_s=900,
        service_accounts={name: name.replace("_", "-") for name in services},
        metrics_log_group="/sonic/dev/eks/prometheus",
        registry_credentials_secret="sonic/dev/registry-credentials",
        system_node_selector={"sonic-deploy/nodes": "system"},
    )
    return dataclasses.replace(base, **changes)


def dev_nodes(**changes: Any) -> GpuNodes:
    base = GpuNodes(
        name="sonic-gpu",
        ami_alias="al2023@v20260820",
        instance_profile="sonic-dev-eks-eks-KarpenterNodeInstanceProfile",
        subnet_id="subnet-0123456789abcdef0",
        security_group_ids=("sg-0123456789abcdef0", "sg-0fedcba9876543210"),
        placement_group_name="sonic-dev-gpu",
        kms_key_arn="arn:aws:kms:us-east-2:123456789012:key/11111111-2222-3333-4444-555555555555",
        root_volume_gib=200,
        instance_types=("g6e.xlarge", "g6e.2xlarge", "g6.2xlarge"),
        max_gpus=6,
        availability_zone="us-east-2a",
        tags={"sonic-deploy:environment": "dev"},
    )
    return dataclasses.replace(base, **changes)


@cache
def objects() -> tuple[Manifest, ...]:
    return (*workloads(dev_workloads()), *gpu_nodes(dev_nodes()))


def the(kind: str, name: str | None = None) -> Manifest:
    found = [o for o in objects() if o["kind"] == kind and name in (None, o["metadata"]["name"])]
    assert len(found) == 1, f"{len(found)} {kind} {name or ''}"
    return found[0]


def pod_spec(kind: str, name: str) -> dict[str, Any]:
    spec: dict[str, Any] = the(kind, name)["spec"]["template"]["spec"]
    return spec


def test_every_object_validates() -> None:
    for manifest in objects():
        validate(manifest)
    names = [(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]) for o in objects()]
    assert len(names) == len(set(names)), "two objects with one kind, namespace and name"


def test_the_namespace_injects_the_load_balancers_readiness_gate() -> None:
    labels = the("Namespace")["metadata"]["labels"]
    assert labels == {"elbv2.k8s.aws/pod-readiness-gate-inject": "enabled"}


def test_a_worker_requests_and_is_limited_to_one_gpu_on_the_gpu_nodes_only() -> None:
    spec = pod_spec("Deployment", "gpu-worker")
    (container,) = spec["containers"]
    assert container["resources"]["requests"][GPU_RESOURCE] == 1
    assert container["resources"]["limits"][GPU_RESOURCE] == 1
    pools = [o for o in objects() if o["kind"] == "NodePool"]
    for pool in pools:
        template = pool["spec"]["template"]
        assert template["metadata"]["labels"][GPU_NODES_LABEL] == spec["nodeSelector"][GPU_NODES_LABEL]
        for taint in template["spec"]["taints"]:
            assert any(
                t["key"] == taint["key"] and t["effect"] == taint["effect"] and t["operator"] == "Exists"
                for t in spec["tolerations"]
            )
    assert "replicas" not in the("Deployment", "gpu-worker")["spec"], "KEDA's HPA owns the count"
    for kind, name in (
        ("Deployment", "api-server"),
        ("StatefulSet", "nats"),
        ("Deployment", "cloudwatch-agent"),
    ):
        (other,) = pod_spec(kind, name)["containers"]
        assert GPU_RESOURCE not in other["resources"]["requests"]
        assert "tolerations" not in pod_spec(kind, name)
        assert pod_spec(kind, name)["nodeSelector"] == {
            "sonic-deploy/nodes": "system"
        }  # the stack's CPU nodes


def test_ecs_cpu_units_and_memory_become_requests_and_limits() -> None:
    (api,) = pod_spec("Deployment", "api-server")["containers"]
    assert api["resources"] == {
        "requests": {"cpu": "1000m", "memory": "2048Mi"},
        "limits": {"memory": "2048Mi"},
    }
    (worker,) = pod_spec("Deployment", "gpu-worker")["containers"]
    assert worker["resources"]["requests"] == {"cpu": "3000m", "memory": "28672Mi", GPU_RESOURCE: 1}
    assert worker["resources"]["limits"] == {GPU_RESOURCE: 1}


def test_the_scaled_object_keeps_at_least_two_workers_and_joins_the_signals_by_formula() -> None:
    spec = the("ScaledObject")["spec"]
    assert spec["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "gpu-worker"}
    assert spec["minReplicaCount"] == 2 <= spec["maxReplicaCount"] == 6
    modifiers = spec["advanced"]["scalingModifiers"]
    assert modifiers == {
        "formula": "float(capacity > 0 ? max(load / capacity / 0.8, gpu / 80) : 1)",
        "target": "1",
        "metricType": "Value",
    }
    assert spec["fallback"]["behavior"] == "currentReplicas"
    behavior = spec["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
    assert behavior["scaleUp"]["stabilizationWindowSeconds"] == 30
    assert behavior["scaleDown"]["stabilizationWindowSeconds"] == 900
    assert behavior["scaleDown"]["policies"] == [{"type": "Pods", "value": 1, "periodSeconds": 60}]
    triggers = {t["name"]: t for t in spec["triggers"]}
    assert set(triggers) == {"load", "capacity", "gpu"}
    for name, metric in (("load", "inferno_worker_load"), ("capacity", "inferno_worker_capacity")):
        metadata = triggers[name]["metadata"]
        assert (metadata["metricName"], metadata["metricStat"], metadata["ignoreNullValues"]) == (
            metric,
            "Sum",
            "false",
        )
        assert metadata["namespace"] == "Sonic/EKS"
    assert "ignoreNullValues" not in triggers["gpu"]["metadata"], "a missing GPU figure reads as 0"
    auth = the("TriggerAuthentication")
    assert auth["spec"] == {"podIdentity": {"provider": "aws"}}
    assert {t["authenticationRef"]["name"] for t in spec["triggers"]} == {auth["metadata"]["name"]}


def test_the_cloudwatch_triggers_name_only_what_kedas_scaler_reads() -> None:
    # kedacore/keda at 8b4f083, pkg/scalers/aws_cloudwatch_scaler.go: awsCloudwatchMetadata's `keda:"name=..."`.
    known = {
        "namespace", "metricName", "dimensionName", "dimensionValue", "expression", "targetMetricValue",
        "activationTargetMetricValue", "minMetricValue", "ignoreNullValues", "metricCollectionTime", "metricStat",
        "metricUnit", "metricStatPeriod", "metricEndTimeOffset", "awsAccountId", "awsRegion", "awsEndpoint",
        "identityOwner",
    }  # fmt: skip
    for trigger in the("ScaledObject")["spec"]["triggers"]:
        metadata = trigger["metadata"]
        assert set(metadata) <= known
        assert {"targetMetricValue", "minMetricValue", "awsRegion"} <= set(metadata)
        assert int(metadata["metricCollectionTime"]) % int(metadata["metricStatPeriod"]) == 0


def test_the_api_server_drains_before_it_stops() -> None:
    spec = pod_spec("Deployment", "api-server")
    (container,) = spec["containers"]
    assert container["lifecycle"]["preStop"] == {"sleep": {"seconds": 300}}
    assert spec["terminationGracePeriodSeconds"] > 300
    assert spec["terminationGracePeriodSeconds"] == 300 + 120
    binding = the("TargetGroupBinding")["spec"]
    assert binding["targetType"] == "ip"
    assert binding["targetGroupARN"] == dev_workloads().target_group_arn
    service = the("Service", binding["serviceRef"]["name"])
    assert binding["serviceRef"]["port"] in [p["port"] for p in service["spec"]["ports"]]
    assert the("PodDisruptionBudget", "api-server")["spec"]["maxUnavailable"] == 1


def test_health_checks_become_exec_probes() -> None:
    (api,) = pod_spec("Deployment", "api-server")["containers"]
    command = ["/bin/sh", "-c", "curl -sf http://localhost:5000/status || exit 1"]
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert api[probe]["exec"]["command"] == command
    (worker,) = pod_spec("Deployment", "gpu-worker")["containers"]
    # start period 300 s and 10 retries 30 s apart, as ECS allows, in 10 s steps
    assert worker["startupProbe"]["failureThreshold"] * worker["startupProbe"]["periodSeconds"] == 600


def test_secrets_come_from_secrets_manager_through_the_csi_driver() -> None:
    for name in ("api-server", "gpu-worker"):
        spec = pod_spec("Deployment", name)
        (volume,) = spec["volumes"]
        provider_class = the("SecretProviderClass", volume["csi"]["volumeAttributes"]["secretProviderClass"])
        parameters = provider_class["spec"]["parameters"]
        assert parameters["usePodIdentity"] == "true"
        (synced,) = provider_class["spec"]["secretObjects"]
        aliases = set()
        for entry in json.loads(parameters["objects"]):
            aliases |= {entry.get("objectAlias")} | {p["objectAlias"] for p in entry.get("jmesPath", [])}
        (container,) = spec["containers"]
        assert container["volumeMounts"][0]["name"] == volume["name"]
        refs = [e["valueFrom"]["secretKeyRef"] for e in container["env"] if "valueFrom" in e]
        assert refs, name
        for ref in refs:
            assert ref["name"] == synced["secretName"]
            assert ref["key"] in {d["key"] for d in synced["data"]}
        assert {d["objectName"] for d in synced["data"]} <= aliases
        assert all("value" not in e for e in container["env"] if "valueFrom" in e)


def test_a_secret_the_config_names_needs_its_secret() -> None:
    with pytest.raises(ValueError, match="registry_credentials_secret"):
        workloads(dev_workloads(registry_credentials_secret=None))


def test_peers_are_told_the_in_cluster_addresses() -> None:
    w = dev_workloads()
    assert peer_addresses(w)["nats"] == "nats://nats.sonic.svc.cluster.local:4222"
    for name in ("api-server", "gpu-worker"):
        (container,) = pod_spec("Deployment", name)["containers"]
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert env["REPLACE-ME_NATS_URL"] == "nats://nats.sonic.svc.cluster.local:4222"
        assert env["REPLACE-ME_LICENSE_PROXY_URL"] == "http://licence-proxy.sonic.svc.cluster.local:8080"
    assert the("Service", "nats")["spec"]["ports"][0]["port"] == 4222


def test_nats_routes_name_every_server_of_the_headless_service() -> None:
    args = pod_spec("StatefulSet", "nats")["containers"][0]["args"]
    routes = args[args.index("--routes") + 1].split(",")
    assert routes == [f"nats://nats-{i}.nats-cluster.sonic.svc.cluster.local:6222" for i in range(3)]
    assert the("StatefulSet")["spec"]["serviceName"] == "nats-cluster"
    assert the("Service", "nats-cluster")["spec"]["clusterIP"] == "None"
    assert args[:4] == ["--cluster_name", "sonic", "--cluster", "nats://0.0.0.0:6222"]
    single = dev_workloads(nats_replicas=1)
    assert nats_args(single)[-1] == "nats://nats-0.nats-cluster.sonic.svc.cluster.local:6222"


def test_the_agent_scrapes_the_namespace_into_the_metrics_namespace() -> None:
    data = the("ConfigMap", "cloudwatch-agent")["data"]
    agent = json.loads(data["agent.json"])
    prometheus = agent["logs"]["metrics_collected"]["prometheus"]
    assert prometheus["emf_processor"]["metric_namespace"] == "Sonic/EKS"
    assert all(
        d["dimensions"] == [["ClusterName"]] for d in prometheus["emf_processor"]["metric_declaration"]
    )
    scrape = json.loads(data["prometheus.yaml"])
    jobs = {job["job_name"]: job for job in scrape["scrape_configs"]}
    assert set(jobs) == {"gpu-worker", "api-server", "dcgm-exporter", "karpenter"}
    for name, job in jobs.items():
        namespace = "kube-system" if name == "karpenter" else "sonic"
        assert job["kubernetes_sd_configs"] == [{"role": "pod", "namespaces": {"names": [namespace]}}]
    (container,) = pod_spec("Deployment", "cloudwatch-agent")["containers"]
    assert {e["name"] for e in container["env"]} == {"CW_CONFIG_CONTENT", "PROMETHEUS_CONFIG_CONTENT"}
    roles = [o for o in objects() if o["kind"] == "Role"]
    assert {r["metadata"]["namespace"] for r in roles} == {"sonic", "kube-system"}
    for role in roles:
        assert role["rules"] == [
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}
        ]
    for binding in (o for o in objects() if o["kind"] == "RoleBinding"):
        assert binding["subjects"] == [
            {
                "kind": "ServiceAccount",
                "name": pod_spec("Deployment", "cloudwatch-agent")["serviceAccountName"],
                "namespace": "sonic",
            }
        ]


def test_karpenters_waiting_pods_are_kept_for_the_namespace_alone() -> None:
    """Karpenter's pod gauge names every namespace's pods: only this one's reach CloudWatch (each series a
    cost), and only that metric."""
    data = the("ConfigMap", "cloudwatch-agent")["data"]
    (job,) = [
        j for j in json.loads(data["prometheus.yaml"])["scrape_configs"] if j["job_name"] == "karpenter"
    ]
    (keep,) = job["metric_relabel_configs"]
    assert keep == {
        "source_labels": ["__name__", "namespace"],
        "regex": "karpenter_pods_unstarted_time_seconds;sonic",
        "action": "keep",
    }
    declarations = json.loads(data["agent.json"])["logs"]["metrics_collected"]["prometheus"]["emf_processor"]
    (karpenter,) = [d for d in declarations["metric_declaration"] if d["label_matcher"] == "^karpenter$"]
    assert karpenter["metric_selectors"] == ["^karpenter_pods_unstarted_time_seconds$"]


def test_node_pools_follow_the_config_order_in_the_placement_group() -> None:
    pools = [o for o in objects() if o["kind"] == "NodePool"]
    weights = [p["spec"]["weight"] for p in pools]
    assert weights == sorted(weights, reverse=True) and len(set(weights)) == len(weights)
    types = [p["spec"]["template"]["spec"]["requirements"][0]["values"] for p in pools]
    assert types == [["g6e.xlarge"], ["g6e.2xlarge"], ["g6.2xlarge"]]
    for pool in pools:
        spec = pool["spec"]
        requirements = {r["key"]: r["values"] for r in spec["template"]["spec"]["requirements"]}
        assert requirements["topology.kubernetes.io/zone"] == ["us-east-2a"]
        assert requirements["karpenter.sh/capacity-type"] == ["on-demand"]
        assert spec["limits"] == {GPU_RESOURCE: 6}
        assert spec["disruption"]["consolidationPolicy"] == "WhenEmpty"
        assert spec["template"]["spec"]["expireAfter"] == "Never"
    node_class = the("EC2NodeClass")["spec"]
    assert node_class["placementGroupSelector"] == {"name": "sonic-dev-gpu"}
    assert node_class["amiSelectorTerms"] == [{"alias": "al2023@v20260820"}]
    assert node_class["metadataOptions"]["httpTokens"] == "required"
    assert node_class["metadataOptions"]["httpPutResponseHopLimit"] == 1
    (root,) = node_class["blockDeviceMappings"]
    assert root["ebs"]["encrypted"] is True and root["ebs"]["volumeSize"] == "200Gi"


def test_token_strings_are_placed_as_they_are() -> None:
    token = "${Token[TOKEN.123]}"
    nodes = gpu_nodes(
        dev_nodes(subnet_id=token, placement_group_name=token, kms_key_arn=token, instance_profile=token)
    )
    node_class = nodes[0]["spec"]
    assert node_class["subnetSelectorTerms"] == [{"id": token}]
    assert node_class["placementGroupSelector"] == {"name": token}
    assert node_class["instanceProfile"] == token
    w = workloads(dev_workloads(target_group_arn=token, api_key_secret=token, cluster_name=token))
    assert token in json.dumps(w)


def test_the_manifests_import_no_aws_cdk() -> None:
    """The operator tools import route packages (docs/architecture.md, "Import rules"): a fresh interpreter."""
    check = (
        "import sys, sonic_deploy.routes.eks.manifests; "
        "loaded = sorted({m.split('.')[0] for m in sys.modules} & {'aws_cdk', 'jsii', 'constructs'}); "
        "sys.exit(f'loaded {loaded}' if loaded else 0)"
    )
    subprocess.run([sys.executable, "-c", check], cwd=ROOT, check=True)


# --- the validators refuse what they should -------------------------------------------------------------


def test_a_built_in_object_with_an_unknown_field_is_refused() -> None:
    deployment = copy.deepcopy(the("Deployment", "api-server"))
    deployment["spec"]["template"]["spec"]["containers"][0]["gpus"] = 1
    with pytest.raises(jsonschema.ValidationError, match="gpus"):
        validate(deployment)


def test_a_namespaced_built_in_object_without_its_namespace_is_refused() -> None:
    service = copy.deepcopy(the("Service", "nats"))
    del service["metadata"]["namespace"]
    with pytest.raises(jsonschema.ValidationError, match="namespace"):
        validate(service)


@pytest.mark.parametrize(
    ("kind", "path", "value"),
    [
        ("NodePool", ("spec", "disruption", "consolidationPolicy"), "WhenIdle"),
        ("NodePool", ("spec", "weights"), 100),
        ("EC2NodeClass", ("spec", "placementGroupSelector", "group"), "sonic"),
        ("ScaledObject", ("spec", "advanced", "scalingModifiers", "metricType"), "Utilization"),
        ("TriggerAuthentication", ("spec", "podIdentity", "provider"), "aws-pod-identity"),
        ("TargetGroupBinding", ("spec", "targetType"), "pod"),
        ("SecretProviderClass", ("spec", "parameters", "usePodIdentities"), "true"),
    ],
)
def test_a_custom_resource_with_a_wrong_field_is_refused(
    kind: str, path: tuple[str, ...], value: Any
) -> None:
    manifest = copy.deepcopy(next(o for o in objects() if o["kind"] == kind))
    parent = manifest
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = value
    with pytest.raises(jsonschema.ValidationError):
        validate(manifest)


def test_an_unknown_kind_is_refused() -> None:
    with pytest.raises(UnknownKindError):
        validate({"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {"name": "x"}})
    with pytest.raises(UnknownKindError):
        validate({"apiVersion": "v1", "metadata": {"name": "x"}})
