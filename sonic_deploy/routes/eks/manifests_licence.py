"""Cartesia's licence proxy on EKS (docs/eks.md, section 12): one pod behind the `licence-proxy` Service the API
server and workers are told of. Connected, a Deployment; air-gapped, a StatefulSet whose volume (EBS, through
the EBS CSI driver) keeps the offline licence, as Cartesia's chart keeps it (docs.cartesia.ai/self-hosted/
air-gapped: `licenseProxy.persistence`), and a loader container that hands it the licence from its secret."""

from __future__ import annotations

from typing import Any

from sonic_deploy.routes.eks.manifests_metrics import APP_NAMES, app_labels
from sonic_deploy.routes.eks.manifests_nodes import Manifest, header
from sonic_deploy.routes.eks.manifests_pods import (
    LICENCE_OBJECT,
    SECRETS_MOUNT,
    OfflineLicence,
    Workloads,
    container_for,
    deployment_for,
    pod_for,
    service_for,
)
from sonic_deploy.routes.licence_loader import watching_loader_script

__all__ = ["STORAGE_CLASS", "OfflineLicence", "licence_proxy", "storage_class"]

STORAGE_CLASS = "sonic-licence"
EBS_CSI_PROVISIONER = "ebs.csi.aws.com"  # the EBS CSI driver's (the aws-ebs-csi-driver add-on)
VOLUME = "licence-data"
LOADER = "licence-loader"
LOADED_MARK = "/tmp/loaded"
# How often the loader looks at its secret's file: the CSI driver refreshes it every rotationPollInterval
# (constructs/add_ons.py), so a new licence reaches the proxy within the two.
LOADER_EVERY_S = 30


def storage_class() -> Manifest:
    """Encrypted gp3 volumes (the account's EBS key), bound where the pod lands (the system nodes' AZ), kept
    when their claim goes: the licence outlives a deleted StatefulSet, as ECS's file system outlives its stack."""
    sc = header("storage.k8s.io/v1", "StorageClass", STORAGE_CLASS)
    sc.update(
        {
            "provisioner": EBS_CSI_PROVISIONER,
            # Parameters: kubernetes-sigs/aws-ebs-csi-driver docs/parameters.md ("type", "encrypted").
            "parameters": {"type": "gp3", "encrypted": "true"},
            "reclaimPolicy": "Retain",
            "volumeBindingMode": "WaitForFirstConsumer",
            "allowVolumeExpansion": True,
        }
    )
    return sc


def _loader(w: Workloads, licence: OfflineLicence, port: int) -> dict[str, Any]:
    script = watching_loader_script(
        port=port,
        content_type=licence.content_type,
        licence_file=f"{SECRETS_MOUNT}/{LICENCE_OBJECT}",
        loaded_mark=LOADED_MARK,
        every_s=LOADER_EVERY_S,
    )
    return {
        "name": LOADER,
        "image": w.images["licence_loader"],
        "imagePullPolicy": "IfNotPresent",
        "command": ["/bin/sh", "-c", script],
        "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"memory": "32Mi"}},
        "securityContext": {"allowPrivilegeEscalation": False},
        # Ready once the proxy has a licence: until then the Service sends the API server and workers nowhere.
        "readinessProbe": {
            "exec": {"command": ["/bin/sh", "-c", f"test -f {LOADED_MARK}"]},
            "periodSeconds": 10,
        },
        "volumeMounts": [{"name": "secrets", "mountPath": SECRETS_MOUNT, "readOnly": True}],
    }


def licence_proxy(w: Workloads) -> list[Manifest]:
    """The proxy's Service, and its Deployment (connected) or StatefulSet with loader and volume (air-gapped)."""
    spec = w.services["licence_proxy"]
    assert spec.port is not None  # the config's rules require it
    name = APP_NAMES["licence_proxy"]
    service = service_for(
        w, "licence_proxy", name, [{"name": "http", "port": spec.port, "targetPort": "http"}]
    )
    container = container_for(w, "licence_proxy")
    licence = w.licence
    if licence is None:
        pod = pod_for(w, "licence_proxy", container)
        return [service, deployment_for(w, "licence_proxy", pod, 1)]
    container["volumeMounts"] = [
        *container.get("volumeMounts", []),
        {"name": VOLUME, "mountPath": licence.data_path},
    ]
    pod = pod_for(w, "licence_proxy", container)
    pod["spec"]["containers"].append(_loader(w, licence, spec.port))
    stateful = header("apps/v1", "StatefulSet", name, w.namespace, app_labels("licence_proxy"))
    stateful["spec"] = {
        "serviceName": name,
        "replicas": 1,
        # Not OrderedReady: a pod that never became ready (a wrong tag, no licence) is still replaced by the
        # next rollout (Kubernetes docs, StatefulSets, "Forced rollback").
        "podManagementPolicy": "Parallel",
        "selector": {"matchLabels": {"app.kubernetes.io/name": name}},
        "template": pod,
        "volumeClaimTemplates": [
            {
                "metadata": {"name": VOLUME},
                "spec": {
                    "accessModes": ["ReadWriteOnce"],
                    "storageClassName": STORAGE_CLASS,
                    "resources": {"requests": {"storage": f"{int(licence.volume_gib)}Gi"}},
                },
            }
        ],
    }
    return [service, stateful]
