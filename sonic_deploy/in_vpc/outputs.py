"""The probe task's stack outputs, by name (both stacks write them, constructs/probe_task.py; the in-VPC runner
reads them, with each route's own, `Route.probe_outputs`). No aws_cdk here."""

from __future__ import annotations

PROBE_CLUSTER = "ProbeCluster"
PROBE_TASK_DEFINITION = "ProbeTaskDefinition"
PROBE_CONTAINER = "ProbeContainer"
PROBE_SUBNETS = "ProbeSubnets"
PROBE_SECURITY_GROUP = "ProbeSecurityGroup"
PROBE_BUCKET = "ProbeBucket"
PROBE_OUTPUTS = (
    PROBE_CLUSTER,
    PROBE_TASK_DEFINITION,
    PROBE_CONTAINER,
    PROBE_SUBNETS,
    PROBE_SECURITY_GROUP,
    PROBE_BUCKET,
)
