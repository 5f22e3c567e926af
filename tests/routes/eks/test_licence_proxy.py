"""The licence proxy on EKS (routes/eks/manifests_licence.py): connected, one Deployment; air-gapped, a
StatefulSet on an EBS volume with a loader that feeds it its secret's licence, and readiness on it."""

from __future__ import annotations

import base64
import contextlib
import http.server
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from sonic_deploy.routes.eks.manifests import OfflineLicence, workloads
from sonic_deploy.routes.licence_loader import watching_loader_script
from tests.routes.eks.kube_schemas import validate
from tests.routes.eks.test_manifests import dev_workloads

LICENCE = OfflineLicence("sonic/dev/cartesia-licence", "/data", "application/octet-stream")


def _objects(**changes: Any) -> list[dict[str, Any]]:
    return workloads(dev_workloads(**changes))


def _the(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (found,) = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    return found


def test_connected_the_proxy_is_one_deployment_behind_the_service_its_peers_are_told_of() -> None:
    objects = _objects()
    deployment = _the(objects, "Deployment", "licence-proxy")
    assert deployment["spec"]["replicas"] == 1
    assert _the(objects, "Service", "licence-proxy")["spec"]["ports"] == [
        {"name": "http", "port": 8080, "targetPort": "http"}
    ]
    assert not [o for o in objects if o["kind"] in ("StatefulSet", "StorageClass") and "licence" in str(o)]


def test_air_gapped_objects_validate_and_keep_the_licence_on_an_encrypted_retained_volume() -> None:
    objects = _objects(licence=LICENCE)
    for manifest in objects:
        validate(manifest)
    assert objects[0]["kind"] == "StorageClass"  # before the claim that names it
    storage = objects[0]
    assert storage["provisioner"] == "ebs.csi.aws.com" and storage["reclaimPolicy"] == "Retain"
    assert storage["parameters"]["encrypted"] == "true"
    stateful = _the(objects, "StatefulSet", "licence-proxy")
    (claim,) = stateful["spec"]["volumeClaimTemplates"]
    assert claim["spec"]["storageClassName"] == storage["metadata"]["name"]
    proxy, loader = stateful["spec"]["template"]["spec"]["containers"]
    assert {"name": claim["metadata"]["name"], "mountPath": "/data"} in proxy["volumeMounts"]
    assert loader["name"] == "licence-loader" and "readinessProbe" in loader
    assert not [o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"] == "licence-proxy"]


def test_air_gapped_the_proxys_secret_class_reads_the_licence_as_a_file_not_a_variable() -> None:
    objects = _objects(licence=LICENCE)
    spc = _the(objects, "SecretProviderClass", "licence-proxy-secrets")
    files = spc["spec"]["parameters"]["objects"]
    assert '"objectName": "sonic/dev/cartesia-licence"' in files and '"objectAlias": "licence"' in files
    synced = [key["objectName"] for key in spc["spec"]["secretObjects"][0]["data"]]
    assert "licence" not in synced


def test_the_loader_script_is_valid_sh() -> None:
    stateful = _the(_objects(licence=LICENCE), "StatefulSet", "licence-proxy")
    loader = stateful["spec"]["template"]["spec"]["containers"][1]
    script = loader["command"][2]
    assert "http://127.0.0.1:8080/license" in script
    assert subprocess.run(["sh", "-n"], input=script, text=True, check=False).returncode == 0


class _Proxy(http.server.BaseHTTPRequestHandler):
    """A proxy that refuses the first upload and takes the rest."""

    seen: ClassVar[list[bytes]] = []

    def do_POST(self) -> None:
        self.seen.append(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        self.send_response(503 if len(self.seen) == 1 else 200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


def _wait(condition: Any, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


BUSYBOX = pytest.mark.skipif(
    shutil.which("busybox") is None, reason="needs busybox (.ci/run installs it: apt-get install busybox)"
)


@contextlib.contextmanager
def _busybox_loader(tmp_path: Path, every_s: int) -> Iterator[tuple[subprocess.Popen[str], Path, Path]]:
    """The watching loader under BusyBox's applets alone, against a stand-in proxy that refuses the first
    licence: (the loader, its secret's file, its ready mark)."""
    _Proxy.seen = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Proxy)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    applets = tmp_path / "bin"
    applets.mkdir()
    for applet in ("sh", "base64", "wget", "sleep", "echo", "timeout", "cmp", "cp", "touch"):
        (applets / applet).symlink_to(str(shutil.which("busybox")))
    secret, mark, work = tmp_path / "licence", tmp_path / "loaded", tmp_path / "work"
    work.mkdir()  # the container's /tmp: a run's copies never meet another's
    secret.write_text(base64.b64encode(b"first licence\n").decode())
    script = watching_loader_script(
        port=server.server_address[1],
        content_type="application/octet-stream",
        licence_file=str(secret),
        loaded_mark=str(mark),
        every_s=every_s,
        workdir=str(work),
    ).replace("sleep 5", "sleep 0")
    loader = subprocess.Popen(
        [str(applets / "sh"), "-c", script], env={"PATH": str(applets)}, stdout=subprocess.PIPE, text=True
    )
    try:
        assert _wait(lambda: mark.exists(), 20), "never marked ready"
        assert _Proxy.seen == [b"first licence\n", b"first licence\n"]
        yield loader, secret, mark
    finally:
        loader.kill()
        loader.wait()
        server.shutdown()


@BUSYBOX
def test_the_loader_sends_each_new_licence_once_under_busybox(tmp_path: Path) -> None:
    """The first licence after a refusal, marked ready; the same file not again; a rotated one (the CSI driver
    rewrites the file) sent once more."""
    with _busybox_loader(tmp_path, every_s=1) as (_, secret, _mark):
        time.sleep(0.5)
        assert len(_Proxy.seen) == 2  # the same file is not sent again
        secret.write_text(base64.b64encode(b"second licence\n").decode())
        assert _wait(lambda: len(_Proxy.seen) == 3, 20)
        assert _Proxy.seen[-1] == b"second licence\n"


@BUSYBOX
def test_the_loader_exits_at_once_on_sigterm_under_busybox(tmp_path: Path) -> None:
    """As the kubelet stops it (SIGTERM to PID 1): exit 0 at once, not after its minute-long wait."""
    with _busybox_loader(tmp_path, every_s=60) as (loader, _secret, _mark):
        started = time.monotonic()
        loader.terminate()
        assert loader.wait(timeout=30) == 0 and time.monotonic() - started < 30


def test_a_proxy_without_secret_variables_still_gets_its_licence_file_and_no_empty_secret() -> None:
    services = dict(dev_workloads().services)
    services["licence_proxy"] = services["licence_proxy"].model_copy(update={"secrets": {}})
    objects = _objects(licence=LICENCE, services=services)
    spc = _the(objects, "SecretProviderClass", "licence-proxy-secrets")
    validate(spc)
    assert (
        "secretObjects" not in spc["spec"]
        and '"objectAlias": "licence"' in spc["spec"]["parameters"]["objects"]
    )
    stateful = _the(objects, "StatefulSet", "licence-proxy")
    assert stateful["spec"]["template"]["spec"]["volumes"][0]["name"] == "secrets"
