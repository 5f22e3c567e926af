"""`--publish-metrics ENV`: a run's canary metrics to CloudWatch (PutMetricData), the ones the stacks' alarms
and dashboards read (canary_metrics.py).

TimeToFirstAudio goes as raw values (Values and Counts), not as a statistic set, so that CloudWatch computes
its percentiles (p50, p95) from the values themselves: "Each unique value is listed just once in this array,
and the corresponding number in the Counts array specifies the number of times that value occurred" (the
PutMetricData API reference, MetricDatum.Values, which holds at most 150 values). The counts (Requests,
Succeeded, Failed, Throttled) are sent even when no request succeeded: a run that failed whole is the one
the canary's alarms must see."""

from __future__ import annotations

import datetime
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from sonic_deploy.client.errors import ThrottledError, error_for
from sonic_deploy.config.errors import one_line
from sonic_deploy.probe import canary_metrics

# MetricDatum.Values: "Array Members: Maximum number of 150 items" (CloudWatch API reference).
MAX_VALUES = 150
# One PutMetricData call carries at most this many data here (the API allows 1000; a canary run has 4 or 5),
# and at most one TTFA datum: the API takes "up to 150 values per metric with one PutMetricData request"
# (PutMetricData API reference, MetricData), so a run with more distinct values sends them over several calls.
DATA_PER_CALL = 20
STORAGE_RESOLUTION = 60
ROUTES = {"ws": "ecs", "http": "ecs", "sagemaker": "sagemaker"}


class PublishError(Exception):
    """PutMetricData failed; one line."""


def throttled(kind: str) -> bool:
    """A failure for want of capacity, as the probe classifies its error kinds (client/errors.py): a 429 in
    any form (status_429, error_event_429, model_error_429), a WebSocket closed with 1013, SageMaker's
    ThrottlingException."""
    return isinstance(error_for(kind, ""), ThrottledError)


def metric_data(
    samples: Iterable[dict[str, Any]], environment: str, route: str, at: datetime.datetime
) -> list[dict[str, Any]]:
    """The run's data: its measured (not warm-up) requests only."""
    measured = [s for s in samples if not s.get("warmup")]
    ok = [s for s in measured if s.get("ok")]
    failed = [s for s in measured if not s.get("ok")]
    dimensions = [
        {"Name": canary_metrics.ENVIRONMENT_DIMENSION, "Value": environment},
        {"Name": canary_metrics.ROUTE_DIMENSION, "Value": route},
    ]

    def datum(name: str, unit: str, **value: Any) -> dict[str, Any]:
        return {
            "MetricName": name,
            "Dimensions": dimensions,
            "Timestamp": at,
            "Unit": unit,
            "StorageResolution": STORAGE_RESOLUTION,
            **value,
        }

    data = [
        datum(canary_metrics.REQUESTS, "Count", Value=float(len(measured))),
        datum(canary_metrics.SUCCEEDED, "Count", Value=float(len(ok))),
        datum(canary_metrics.FAILED, "Count", Value=float(len(failed))),
        datum(
            canary_metrics.THROTTLED,
            "Count",
            Value=float(sum(throttled(str(s.get("error"))) for s in failed)),
        ),
    ]
    # Rounded to 0.1 ms (far below the probe's own error), so equal values share one entry with a count.
    counted = Counter(round(float(s["ttfa_ms"]), 1) for s in ok if s.get("ttfa_ms") is not None)
    values = sorted(counted)
    for first in range(0, len(values), MAX_VALUES):
        chunk = values[first : first + MAX_VALUES]
        data.append(
            datum(
                canary_metrics.TTFA, "Milliseconds", Values=chunk, Counts=[float(counted[v]) for v in chunk]
            )
        )
    return data


def batches(data: Sequence[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The data in PutMetricData calls: at most DATA_PER_CALL each, and at most one TTFA datum in a call
    (the first call carries the counts with the first TTFA datum)."""
    calls: list[list[dict[str, Any]]] = []
    current: list[dict[str, Any]] = []
    for datum in data:
        ttfa = datum["MetricName"] == canary_metrics.TTFA
        if current and (
            len(current) >= DATA_PER_CALL
            or (ttfa and any(d["MetricName"] == canary_metrics.TTFA for d in current))
        ):
            calls.append(current)
            current = []
        current.append(datum)
    if current:
        calls.append(current)
    return calls


# What to do about a PutMetricData error, by its code (the API reference's Errors; the common errors).
_PERMISSION = f"grant cloudwatch:PutMetricData (condition cloudwatch:namespace = {canary_metrics.NAMESPACE}) to the role"
_FIXES = {
    "AccessDenied": _PERMISSION,
    "AccessDeniedException": _PERMISSION,
    "UnauthorizedOperation": _PERMISSION,
    "ExpiredToken": "sign in again (e.g. `aws sso login --profile NAME`); in a task, its role's credentials renew",
    "ExpiredTokenException": "sign in again (e.g. `aws sso login --profile NAME`)",
    "InvalidClientTokenId": "check the credentials (the access key is not this account's, or was deleted)",
    "UnrecognizedClientException": "check the credentials (the access key is not this account's)",
    "Throttling": "retry later; the next canary run publishes again (PutMetricData is throttled per Region)",
    "ThrottlingException": "retry later; the next canary run publishes again",
    "InternalServiceError": "retry later: CloudWatch failed on its side (a 500); the next canary run publishes again",
    "InternalFailure": "retry later: CloudWatch failed on its side; the next canary run publishes again",
    "ServiceUnavailable": "retry later: CloudWatch is unavailable; the next canary run publishes again",
    "InvalidParameterValue": "this is a bug in sonic-deploy's metric data: report it with the run's samples.jsonl",
    "InvalidParameterCombination": "this is a bug in sonic-deploy's metric data: report it with the run's samples.jsonl",
    "MissingParameter": "this is a bug in sonic-deploy's metric data: report it with the run's samples.jsonl",
}


def publish(cloudwatch: Any, data: Sequence[dict[str, Any]]) -> int:
    """PutMetricData in `batches(data)`; the number of calls. PublishError on failure."""
    from botocore.exceptions import BotoCoreError, ClientError

    calls = 0
    for batch in batches(data):
        try:
            cloudwatch.put_metric_data(Namespace=canary_metrics.NAMESPACE, MetricData=batch)
        except ClientError as error:
            code = str(error.response.get("Error", {}).get("Code", ""))
            message = " ".join(str(error.response.get("Error", {}).get("Message", error)).split())
            fix = _FIXES.get(code, "read the error; for a permission, " + _PERMISSION)
            raise PublishError(
                one_line(
                    f"cloudwatch:PutMetricData to {canary_metrics.NAMESPACE} failed: {code}: {message}. Fix: {fix}"
                )
            ) from None
        except BotoCoreError as error:
            raise PublishError(
                one_line(
                    f"cloudwatch:PutMetricData to {canary_metrics.NAMESPACE}: cannot talk to AWS: {error}. Fix: "
                    "check the credentials, the Region (AWS_DEFAULT_REGION) and the network (a VPC endpoint for "
                    "monitoring)"
                )
            ) from None
        calls += 1
    return calls


def cloudwatch_client(profile: str | None, region: str | None) -> Any:
    """boto3's client of `profile` in `region`; None: boto3's chain. botocore reads the Region from
    AWS_DEFAULT_REGION (botocore/configprovider.py, `region`: env var AWS_DEFAULT_REGION) or the profile's
    config, never AWS_REGION; ECS sets both in a task ("AWS_DEFAULT_REGION" and "AWS_REGION": Amazon ECS
    developer guide, "Amazon ECS environment variables"). PublishError (one line) if the profile does not
    exist or no Region is found."""
    from botocore.exceptions import BotoCoreError

    try:
        import boto3

        session = boto3.Session(profile_name=profile, region_name=region)
        if session.region_name is None:
            raise PublishError(
                "no AWS Region to publish to. Fix: set AWS_DEFAULT_REGION (or the profile's region); with "
                "--in-vpc ENV, the stack's Region is used"
            )
        return session.client("cloudwatch")
    except BotoCoreError as error:
        raise PublishError(
            one_line(f"cannot make a CloudWatch client: {error}. Fix: check --profile")
        ) from None


def region_of(profile: str | None, region: str | None) -> str | None:
    """The Region boto3 would publish to (`region`, else the profile's or AWS_DEFAULT_REGION), or None."""
    from botocore.exceptions import BotoCoreError

    if region is not None:
        return region
    try:
        import boto3

        found: str | None = boto3.Session(profile_name=profile).region_name
    except BotoCoreError:
        return None
    return found
