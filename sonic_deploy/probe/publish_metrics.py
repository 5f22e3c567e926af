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
from sonic_deploy.probe import canary_metrics

# MetricDatum.Values: "Array Members: Maximum number of 150 items" (CloudWatch API reference).
MAX_VALUES = 150
# One PutMetricData call carries at most this many data here (the API allows 1000; a canary run has 4 or 5).
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


def publish(cloudwatch: Any, data: Sequence[dict[str, Any]]) -> int:
    """PutMetricData in calls of at most DATA_PER_CALL data; the number of calls. PublishError on failure."""
    from botocore.exceptions import BotoCoreError, ClientError

    calls = 0
    for first in range(0, len(data), DATA_PER_CALL):
        try:
            cloudwatch.put_metric_data(
                Namespace=canary_metrics.NAMESPACE, MetricData=list(data[first : first + DATA_PER_CALL])
            )
        except ClientError as error:
            code = error.response.get("Error", {}).get("Code", "")
            message = " ".join(str(error.response.get("Error", {}).get("Message", error)).split())
            raise PublishError(
                f"cloudwatch:PutMetricData to {canary_metrics.NAMESPACE} failed: {code}: {message}. Fix: grant "
                f"cloudwatch:PutMetricData (condition cloudwatch:namespace = {canary_metrics.NAMESPACE}) to the role"
            ) from None
        except BotoCoreError as error:
            raise PublishError(
                f"cloudwatch:PutMetricData to {canary_metrics.NAMESPACE}: cannot talk to AWS: {error}. Fix: check "
                "the credentials, the Region (AWS_REGION) and the network (a VPC endpoint for monitoring)"
            ) from None
        calls += 1
    return calls


def cloudwatch_client(region: str | None) -> Any:
    """boto3's client; region None: boto3's chain, which in an ECS task reads AWS_REGION ("The Region where
    the task runs", set by ECS: Amazon ECS developer guide, "Amazon ECS environment variables")."""
    import boto3

    return boto3.client("cloudwatch", region_name=region)
