"""The licence loader both self-hosted routes run beside Cartesia's licence proxy in air-gapped mode: a BusyBox
shell script that POSTs the offline licence to the proxy on localhost (docs/routes.md, "Load the licence").
No aws_cdk: the EKS route's manifests take it too."""

from __future__ import annotations

LOADER_TRIES, LOADER_PAUSE_S = 60, 5
# One try's limit: a proxy that accepts and never answers would hold wget (which has no timeout of its own)
# for good. BusyBox's `timeout` applet, not `wget -T`: a BusyBox built without FEATURE_WGET_TIMEOUT (Debian's
# 1.35) takes -T and segfaults.
LOADER_TRY_TIMEOUT_S = 10
# The loader's line when it gives up: a metric filter counts it (`load_failures`), an alarm pages on it.
LOADER_GAVE_UP = "the licence proxy did not accept the licence"


def loader_script(*, port: int, content_type: str) -> str:
    """The loader's shell script (BusyBox sh and wget): wait for the proxy, POST the licence once, exit 0;
    exit 1 if the proxy never took it (`sonic-deploy licence upload` reads that exit code).

    The secret holds the licence file base64-encoded (the upload command writes it so). BusyBox wget sends a
    --post-file only up to its first NUL byte, so the upload command refuses files that contain one.
    """
    return "\n".join(
        [
            "set -eu",
            'printf %s "$SONIC_LICENCE" | base64 -d > /tmp/licence',
            "n=0",
            f"while [ $n -lt {LOADER_TRIES} ]; do",
            f"  if timeout {LOADER_TRY_TIMEOUT_S} wget -q -O /dev/null --header 'Content-Type: {content_type}' "
            f"--post-file /tmp/licence http://127.0.0.1:{port}/license; then",
            "    echo 'licence uploaded to the licence proxy'; exit 0",
            "  fi",
            f"  n=$((n + 1)); sleep {LOADER_PAUSE_S}",
            "done",
            f"echo '{LOADER_GAVE_UP} after {LOADER_TRIES} tries' >&2",
            "exit 1",
        ]
    )


def watching_loader_script(
    *, port: int, content_type: str, licence_file: str, loaded_mark: str, every_s: int, workdir: str = "/tmp"
) -> str:
    """The loader of a pod that outlives its licence (EKS): every `every_s`, when the mounted secret
    `licence_file` (base64, as the upload command writes it) differs from the one last accepted, POST it as
    `loader_script` does; touch `loaded_mark` once one is in (the pod's readiness), never exit. `workdir` holds
    its copies (the container's own /tmp; a test's folder)."""
    return "\n".join(
        [
            "set -u",
            # PID 1 ignores a signal it has no handler for: without this, each stop waits out the grace period.
            "trap 'exit 0' TERM INT",
            "while true; do",
            f"  if [ -s {licence_file} ] && ! cmp -s {licence_file} {workdir}/accepted; then",
            f"    if base64 -d {licence_file} > {workdir}/licence; then",
            "      n=0",
            f"      while [ $n -lt {LOADER_TRIES} ]; do",
            f"        if timeout {LOADER_TRY_TIMEOUT_S} wget -q -O /dev/null --header 'Content-Type: {content_type}' "
            f"--post-file {workdir}/licence http://127.0.0.1:{port}/license; then",
            f"          cp {licence_file} {workdir}/accepted; touch {loaded_mark}",
            "          echo 'licence uploaded to the licence proxy'; break",
            "        fi",
            f"        n=$((n + 1)); sleep {LOADER_PAUSE_S}",
            "      done",
            f"      [ $n -lt {LOADER_TRIES} ] || echo '{LOADER_GAVE_UP} after {LOADER_TRIES} tries' >&2",
            "    else",
            "      echo 'the licence secret is not base64: write it with sonic-deploy licence upload' >&2",
            "    fi",
            "  fi",
            f"  sleep {every_s} & wait $!",
            "done",
        ]
    )
