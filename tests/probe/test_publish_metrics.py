"""`--publish-metrics ENV`: the canary's data (canary_metrics.py) from a run's samples, put with
PutMetricData against botocore's Stubber; the failures counted when nothing succeeded; a failed publish
exits 1."""

from __future__ import annotations

import datetime
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from sonic_deploy.cli import main
from sonic_deploy.probe import canary_metrics, publish_metrics
from sonic_deploy.probe.publish_metrics import PublishError, metric_data, publish, throttled

from .harness import ServerFactory

AT = datetime.datetime(2026, 12, 2, 1, 5, tzinfo=datetime.UTC)
DIMENSIONS = [{"Name": "Environment", "Value": "staging"}, {"Name": "Route", "Value": "ecs"}]


def _sample(
    ok: bool, ttfa: float | None = None, error: str | None = None, warmup: bool = False
) -> dict[str, Any]:
    return {"ok": ok, "ttfa_ms": ttfa, "error": error, "warmup": warmup}


def _by_name(data: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    named: dict[str, list[dict[str, Any]]] = {}
    for datum in data:
        named.setdefault(datum["MetricName"], []).append(datum)
    return named


def test_counts_and_raw_ttfa_values_of_the_measured_requests() -> None:
    samples = [
        _sample(True, 999.0, warmup=True),  # not measured
        _sample(True, 81.23),
        _sample(True, 81.21),
        _sample(True, 95.0),
        _sample(False, error="status_429"),
        _sample(False, error="closed_1013"),
        _sample(False, error="timeout"),
    ]
    named = _by_name(metric_data(samples, "staging", "ecs", AT))
    values = {name: data[0].get("Value") for name, data in named.items()}
    assert values[canary_metrics.REQUESTS] == 6
    assert values[canary_metrics.SUCCEEDED] == 3
    assert values[canary_metrics.FAILED] == 3
    assert values[canary_metrics.THROTTLED] == 2
    (ttfa,) = named[canary_metrics.TTFA]
    assert ttfa["Values"] == [81.2, 95.0] and ttfa["Counts"] == [2.0, 1.0]
    assert ttfa["Unit"] == "Milliseconds"
    for data in named.values():
        assert data[0]["Dimensions"] == DIMENSIONS
        assert data[0]["StorageResolution"] == 60
        assert data[0]["Timestamp"] == AT


def test_a_run_that_failed_whole_is_counted_without_a_ttfa_datum() -> None:
    named = _by_name(metric_data([_sample(False, error="refused")] * 3, "staging", "ecs", AT))
    assert canary_metrics.TTFA not in named
    assert named[canary_metrics.FAILED][0]["Value"] == 3
    assert named[canary_metrics.SUCCEEDED][0]["Value"] == 0


def test_more_than_150_distinct_values_go_in_several_data() -> None:
    data = metric_data([_sample(True, 10.0 + i) for i in range(400)], "staging", "sagemaker", AT)
    ttfa = _by_name(data)[canary_metrics.TTFA]
    assert [len(d["Values"]) for d in ttfa] == [150, 150, 100]
    assert sum(sum(d["Counts"]) for d in ttfa) == 400


def test_the_probes_capacity_kinds_are_throttles() -> None:
    for kind in (
        "status_429",
        "error_event_429",
        "model_error_429",
        "closed_1013",
        "client_error_ThrottlingException",
    ):
        assert throttled(kind), kind
    for kind in ("status_5xx", "timeout", "refused", "status_422", "model_error_422"):
        assert not throttled(kind), kind


def test_put_metric_data_as_the_api_takes_it_and_its_failure() -> None:
    client = boto3.client("cloudwatch", region_name="us-east-2")
    data = metric_data([_sample(True, 80.0), _sample(False, error="status_429")], "staging", "ecs", AT)
    with Stubber(client) as stubber:
        stubber.add_response("put_metric_data", {}, {"Namespace": "SonicDeploy/Canary", "MetricData": data})
        assert publish(client, data) == 1
        stubber.add_client_error(
            "put_metric_data",
            "AccessDenied",
            "User is not authorized to perform: cloudwatch:PutMetricData",
            403,
        )
        with pytest.raises(
            PublishError, match=r"AccessDenied: User is not authorized.*Fix: grant cloudwatch:PutMetricData"
        ):
            publish(client, data)


@pytest.mark.parametrize("fails", [False, True])
def test_a_canary_run_publishes_and_a_failed_publish_exits_1(
    fails: bool,
    reference_server: ServerFactory,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    server = reference_server("--first-byte-ms", "10", "--ms-per-char", "1", "--pace", "0")
    client = boto3.client("cloudwatch", region_name="us-east-2")
    stubber = Stubber(client)
    if fails:
        stubber.add_client_error("put_metric_data", "InternalServiceError", "try again", 500)
    else:
        stubber.add_response("put_metric_data", {})
    stubber.activate()
    monkeypatch.setattr(publish_metrics, "cloudwatch_client", lambda region: client)
    argv = ["probe", "ws", "--url", server.ws_url, "--concurrency", "1", "--requests", "3", "--warmup", "1"]
    argv += ["--no-report", "--quiet", "--out", str(tmp_path / "canary"), "--publish-metrics", "staging"]
    assert main(argv) == (1 if fails else 0)
    stubber.assert_no_pending_responses()
    err = capsys.readouterr().err
    if fails:
        assert (
            "--publish-metrics: cloudwatch:PutMetricData to SonicDeploy/Canary failed: InternalServiceError"
            in err
        )
    else:
        assert "published 5 data to SonicDeploy/Canary (Environment=staging, Route=ecs)" in err
