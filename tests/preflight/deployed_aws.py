"""The deployed SageMaker route as `preflight --after-deploy` reads it, answered by botocore's Stubber in the
services' own request and response shapes: STS, CloudFormation, SageMaker, CloudWatch and ECS (nothing reaches
moto). The `aws` fixture (conftest.py) holds the stubs; these functions queue their answers."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import boto3
import botocore.session
from botocore.stub import Stubber

from sonic_deploy.preflight import AwsClients
from sonic_deploy.routes.sagemaker.preflight_deployed import Deployed

REGION, ACCOUNT = "us-east-2", "123456789012"
STACK, ENDPOINT, VARIANT, CONFIG = "sonic-dev-sagemaker", "sonic-dev", "AllTraffic", "sonic-dev-config-1"
DEPLOYED = Deployed(ENDPOINT, VARIANT)
PREFIX = f"TargetTracking-endpoint/{ENDPOINT}/variant/{VARIANT}-Alarm"
XL, XL2 = "ml.g6e.xlarge", "ml.g6e.2xlarge"
PLAN = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-plan/sonic-endpoints"
WHEN = datetime(2026, 1, 1, tzinfo=UTC)
STUBBED = ("sts", "cloudformation", "sagemaker", "cloudwatch", "ecs")


@functools.cache
def _session() -> boto3.Session:
    """One session for every test's clients (each service's model read once), with made-up credentials."""
    core = botocore.session.get_session()
    core.set_credentials("AKIAEXAMPLEEXAMPLE00", "made-up")
    return boto3.Session(botocore_session=core, region_name=REGION)


@dataclasses.dataclass
class Aws:
    clients: AwsClients
    stubs: dict[str, Stubber]

    def answer(self, service: str, operation: str, response: dict[str, Any], params: dict[str, Any]) -> None:
        self.stubs[service].add_response(operation, response, params)

    def refuse(self, service: str, operation: str, code: str, message: str) -> None:
        self.stubs[service].add_client_error(
            operation, service_error_code=code, service_message=message, http_status_code=400
        )


@contextlib.contextmanager
def stubbed(services: tuple[str, ...] = STUBBED) -> Iterator[Aws]:
    """Every call the checks make to `services` is stubbed: an unexpected one, or one more, fails the test."""
    clients = AwsClients.from_session(_session(), REGION)
    stubs = {name: Stubber(getattr(clients, name)) for name in services}
    for stub in stubs.values():
        stub.activate()
    yield Aws(clients, stubs)
    for stub in stubs.values():
        stub.assert_no_pending_responses()
        stub.deactivate()


def identity(aws: Aws) -> None:
    aws.answer(
        "sts",
        "get_caller_identity",
        {"UserId": "AIDAEXAMPLE", "Account": ACCOUNT, "Arn": f"arn:aws:iam::{ACCOUNT}:user/ops"},
        {},
    )


def stack(aws: Aws, status: str = "UPDATE_COMPLETE", outputs: bool = True) -> None:
    described: dict[str, Any] = {
        "StackName": STACK,
        "StackId": f"arn:aws:cloudformation:{REGION}:{ACCOUNT}:stack/{STACK}/0f1e2d3c",
        "CreationTime": WHEN,
        "StackStatus": status,
    }
    if outputs:
        described["Outputs"] = [
            {"OutputKey": "EndpointName", "OutputValue": ENDPOINT},
            {"OutputKey": "VariantName", "OutputValue": VARIANT},
            {"OutputKey": "Region", "OutputValue": REGION},
        ]
    aws.answer("cloudformation", "describe_stacks", {"Stacks": [described]}, {"StackName": STACK})


def endpoint(
    aws: Aws,
    status: str = "InService",
    pools: tuple[tuple[str, int], ...] = (),
    plan: str | None = None,
    variant: str = VARIANT,
) -> None:
    summary: dict[str, Any] = {"VariantName": variant, "CurrentInstanceCount": 2, "DesiredInstanceCount": 2}
    if pools:
        summary["InstancePools"] = [{"InstanceType": t, "CurrentInstanceCount": n} for t, n in pools]
    if plan:
        summary["CapacityReservationConfig"] = {
            "MlReservationArn": plan,
            "CapacityReservationPreference": "capacity-reservations-only",
            "TotalInstanceCount": 4,
            "AvailableInstanceCount": 2,
            "UsedByCurrentEndpoint": 2,
        }
    described = {
        "EndpointName": ENDPOINT,
        "EndpointArn": f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:endpoint/{ENDPOINT}",
        "EndpointConfigName": CONFIG,
        "ProductionVariants": [summary],
        "EndpointStatus": status,
        "CreationTime": WHEN,
        "LastModifiedTime": WHEN,
    }
    if status == "Failed":
        described["FailureReason"] = "CapacityError: Unable to provision requested ML compute capacity."
    aws.answer("sagemaker", "describe_endpoint", described, {"EndpointName": ENDPOINT})


def endpoint_config(aws: Aws, *by_priority: str) -> None:
    variant = {
        "VariantName": VARIANT,
        "ModelName": "sonic-dev-model",
        "InitialInstanceCount": 2,
        "InstancePools": [{"InstanceType": t, "Priority": p} for p, t in enumerate(by_priority, start=1)],
    }
    aws.answer(
        "sagemaker",
        "describe_endpoint_config",
        {
            "EndpointConfigName": CONFIG,
            "EndpointConfigArn": f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:endpoint-config/{CONFIG}",
            "ProductionVariants": [variant],
            "CreationTime": WHEN,
        },
        {"EndpointConfigName": CONFIG},
    )


def series(instance_type: str | None = None, **more: str) -> dict[str, Any]:
    dimensions = {"EndpointName": ENDPOINT, "VariantName": VARIANT}
    if instance_type:
        dimensions["InstanceType"] = instance_type
    dimensions.update(more)
    return {
        "Namespace": "AWS/SageMaker",
        "MetricName": "ConcurrentRequestsPerModel",
        "Dimensions": [{"Name": name, "Value": value} for name, value in dimensions.items()],
    }


def metrics(aws: Aws, *pages: list[dict[str, Any]]) -> None:
    """ListMetrics, one page per list: each but the last carries a NextToken."""
    params = {
        "Namespace": "AWS/SageMaker",
        "MetricName": "ConcurrentRequestsPerModel",
        "Dimensions": [{"Name": "EndpointName", "Value": ENDPOINT}],
    }
    for number, page in enumerate(pages, start=1):
        last = number == len(pages)
        response: dict[str, Any] = {"Metrics": page, **({} if last else {"NextToken": f"page-{number + 1}"})}
        aws.answer(
            "cloudwatch",
            "list_metrics",
            response,
            {**params, **({"NextToken": f"page-{number}"} if number > 1 else {})},
        )


def alarm(kind: str, state: str, watches: str, math: bool = False) -> dict[str, Any]:
    """A target-tracking alarm as Application Auto Scaling makes it: on the metric, or (pools) on metric math."""
    made: dict[str, Any] = {
        "AlarmName": f"{PREFIX}{kind}-0b8d3c4e-5f6a-4b7c-8d9e-{len(kind):012d}",
        "AlarmArn": f"arn:aws:cloudwatch:{REGION}:{ACCOUNT}:alarm:{PREFIX}{kind}",
        "StateValue": state,
        "EvaluationPeriods": 3 if kind == "High" else 15,
        "Threshold": 0.8,
        "ComparisonOperator": "GreaterThanThreshold" if kind == "High" else "LessThanThreshold",
    }
    if math:
        metric = {"Namespace": "AWS/SageMaker", "MetricName": watches, "Dimensions": []}
        made["Metrics"] = [
            {
                "Id": "c1",
                "MetricStat": {"Metric": metric, "Period": 60, "Stat": "Average"},
                "ReturnData": False,
            },
            {"Id": "ratio", "Expression": "MAX([FILL(c1, 0) / 8])", "ReturnData": True},
        ]
    else:
        made.update(Namespace="AWS/SageMaker", MetricName=watches, Statistic="Average", Period=60)
    return made


def alarms(aws: Aws, *made: dict[str, Any]) -> None:
    aws.answer("cloudwatch", "describe_alarms", {"MetricAlarms": list(made)}, {"AlarmNamePrefix": PREFIX})


def results(found: list[Any]) -> list[tuple[str, str, str]]:
    return [(r.check, r.status, r.detail) for r in found]
