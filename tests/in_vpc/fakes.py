"""The AWS side of an in-VPC run, for tests: the stack's outputs, ECS's task descriptions in the shape
DescribeTasks and RunTask return them, and a fake ECS whose tasks are real `sonic-deploy probe` processes
on this machine (the run's bucket is then a folder: protocol.DirectoryStore)."""

from __future__ import annotations

import datetime
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.connect.conftest import ACCOUNT, DEPLOYED_ECS_OUTPUTS, DEPLOYED_SAGEMAKER_OUTPUTS, REGION

CLUSTER = "sonic-dev-ecs-ProbeCluster-0a1b2c"
TASK_DEFINITION = f"arn:aws:ecs:{REGION}:{ACCOUNT}:task-definition/sonicdevecsProbeTask:3"
PROBE_OUTPUTS = {
    "ProbeCluster": CLUSTER,
    "ProbeTaskDefinition": TASK_DEFINITION,
    "ProbeContainer": "probe",
    "ProbeSubnets": "subnet-0a1b2c3d4e5f60718,subnet-0f1e2d3c4b5a69788",
    "ProbeSecurityGroup": "sg-0123456789abcdef0",
    "ProbeBucket": "sonic-dev-ecs-probebucket-1x2y3z",
}
ECS_OUTPUTS = {**DEPLOYED_ECS_OUTPUTS, **PROBE_OUTPUTS}
SAGEMAKER_OUTPUTS = {**DEPLOYED_SAGEMAKER_OUTPUTS, **PROBE_OUTPUTS}
CREATED = datetime.datetime(2026, 12, 2, 1, 0, tzinfo=datetime.UTC)


def task_arn(n: int) -> str:
    return f"arn:aws:ecs:{REGION}:{ACCOUNT}:task/{CLUSTER}/{n:032x}"


def task(n: int, status: str = "PROVISIONING", **extra: Any) -> dict[str, Any]:
    """One task as RunTask and DescribeTasks describe it (the fields ECS fills for a Fargate task)."""
    arn = task_arn(n)
    container: dict[str, Any] = {
        "containerArn": f"arn:aws:ecs:{REGION}:{ACCOUNT}:container/{CLUSTER}/{n:032x}/c0",
        "taskArn": arn,
        "name": "probe",
        "lastStatus": "PENDING" if status in ("PROVISIONING", "PENDING") else status,
    }
    container.update(extra.pop("container", {}))
    return {
        "taskArn": arn,
        "clusterArn": f"arn:aws:ecs:{REGION}:{ACCOUNT}:cluster/{CLUSTER}",
        "taskDefinitionArn": TASK_DEFINITION,
        "lastStatus": status,
        "desiredStatus": "STOPPED" if status == "STOPPED" else "RUNNING",
        "launchType": "FARGATE",
        "platformVersion": "1.4.0",
        "cpu": "1024",
        "memory": "2048",
        "createdAt": CREATED,
        "group": "family:sonicdevecsProbeTask",
        "containers": [container],
        "attachments": [
            {
                "id": f"{n:08x}-0000-4000-8000-000000000000",
                "type": "ElasticNetworkInterface",
                "status": "PRECREATED",
                "details": [{"name": "subnetId", "value": "subnet-0a1b2c3d4e5f60718"}],
            }
        ],
        "version": 1,
        **extra,
    }


class ProcessEcs:
    """ECS whose RunTask starts the task's command as a `sonic-deploy` process here (the image's
    ENTRYPOINT is `sonic-deploy`), DescribeTasks reports it RUNNING while it lives, StopTask kills it."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.processes: list[subprocess.Popen[bytes]] = []
        self.commands: list[list[str]] = []
        self.calls: list[dict[str, Any]] = []
        self.stopped: list[str] = []

    def run_task(self, **request: Any) -> dict[str, Any]:
        self.calls.append(request)
        (override,) = request["overrides"]["containerOverrides"]
        assert override["name"] == "probe"
        n = len(self.processes)
        self.commands.append(override["command"])
        log = (self.log_dir / f"task{n}.log").open("wb")
        env = {**os.environ, "CARTESIA_API_KEY": "from-secrets-manager"}
        process = subprocess.Popen(
            [sys.executable, "-m", "sonic_deploy.cli", *override["command"]], stderr=log, stdout=log, env=env
        )
        self.processes.append(process)
        return {"tasks": [task(n)], "failures": []}

    def describe_tasks(self, cluster: str, tasks: list[str]) -> dict[str, Any]:
        described = []
        for arn in tasks:
            n = int(arn.rsplit("/", 1)[1], 16)
            code = self.processes[n].poll()
            if code is None:
                described.append(task(n, "RUNNING"))
            else:
                described.append(
                    task(
                        n,
                        "STOPPED",
                        stoppedReason="Essential container in task exited",
                        container={"exitCode": code},
                    )
                )
        return {"tasks": described, "failures": []}

    def get_paginator(self, operation: str) -> Any:
        assert operation == "list_tasks"
        ecs = self

        class Pages:
            def paginate(self, cluster: str, startedBy: str) -> list[dict[str, Any]]:  # noqa: N803 (ECS's name)
                running = [task_arn(n) for n, p in enumerate(ecs.processes) if p.poll() is None]
                return [{"taskArns": running}]

        return Pages()

    def stop_task(self, cluster: str, task: str, reason: str) -> dict[str, Any]:
        self.stopped.append(task)
        process = self.processes[int(task.rsplit("/", 1)[1], 16)]
        if process.poll() is None:
            process.kill()
        process.wait(timeout=10)
        return {}

    def kill_all(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=10)
