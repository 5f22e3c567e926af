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
from tests.standins.harness import ServerFactory

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


def test_one_ttfa_datum_a_call_as_the_api_allows() -> None:
    """ "Up to 150 values per metric with one PutMetricData request": each TTFA datum goes in its own call,
    the first with the counts."""
    data = metric_data([_sample(True, 10.0 + i) for i in range(400)], "staging", "sagemaker", AT)
    client = boto3.client("cloudwatch", region_name="us-east-2")
    calls = publish_metrics.batches(data)
    assert [sum(d["MetricName"] == canary_metrics.TTFA for d in call) for call in calls] == [1, 1, 1]
    assert [len(call) for call in calls] == [5, 1, 1]
    with Stubber(client) as stubber:
        for call in calls:
            stubber.add_response(
                "put_metric_data", {}, {"Namespace": "SonicDeploy/Canary", "MetricData": call}
            )
        assert publish(client, data) == 3
        stubber.assert_no_pending_responses()


@pytest.mark.parametrize(
    ("code", "status", "fix"),
    [
        ("AccessDenied", 403, "Fix: grant cloudwatch:PutMetricData"),
        ("InternalServiceError", 500, "Fix: retry later: CloudWatch failed on its side"),
        ("Throttling", 400, "Fix: retry later"),
        ("InvalidParameterValue", 400, "Fix: this is a bug in sonic-deploy"),
    ],
)
def test_the_fix_follows_the_error_code(code: str, status: int, fix: str) -> None:
    client = boto3.client("cloudwatch", region_name="us-east-2")
    data = metric_data([_sample(True, 80.0)], "staging", "ecs", AT)
    with Stubber(client) as stubber:
        stubber.add_client_error("put_metric_data", code, "no\x1b[31m", status)
        with pytest.raises(PublishError) as raised:
            publish(client, data)
    assert fix in str(raised.value)
    assert "\x1b" not in str(raised.value)  # escaped (one_line), never sent to the terminal raw
    assert ("grant" in str(raised.value)) == (code == "AccessDenied")


def test_the_client_is_the_profiles_in_the_given_region(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    config = tmp_path / "config"
    config.write_text("[profile prod]\nregion = eu-west-1\n", encoding="utf-8")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    client = publish_metrics.cloudwatch_client("prod", "us-east-2")
    assert client.meta.region_name == "us-east-2"
    assert publish_metrics.region_of("prod", None) == "eu-west-1"
    with pytest.raises(
        PublishError, match=r"^cannot make a CloudWatch client: .*(absent).*Fix: check --profile"
    ):
        publish_metrics.cloudwatch_client("absent", "us-east-2")
    with pytest.raises(PublishError, match=r"no AWS Region.*Fix: set AWS_DEFAULT_REGION"):
        publish_metrics.cloudwatch_client(None, None)


def test_publish_metrics_without_a_region_is_refused_before_the_run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """No Region (no AWS_DEFAULT_REGION, no profile's): one line and exit 2, no request sent."""
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    for name in ("AWS_DEFAULT_REGION", "AWS_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    argv = ["probe", "ws", "--url", "ws://127.0.0.1:9/tts/websocket", "--concurrency", "1", "--requests", "1"]
    argv += ["--warmup", "0", "--out", str(tmp_path / "out"), "--publish-metrics", "dev"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--publish-metrics: no AWS Region to publish to. Fix:" in err
    assert not (tmp_path / "out").exists()


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
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-2")
    made: list[tuple[str | None, str | None]] = []

    def fake(profile: str | None, region: str | None) -> Any:
        made.append((profile, region))
        return client

    monkeypatch.setattr(publish_metrics, "cloudwatch_client", fake)
    routes: list[str] = []
    real_metric_data = publish_metrics.metric_data

    def recording(samples: Any, environment: str, route: str, at: Any) -> Any:
        routes.append(route)
        return real_metric_data(samples, environment, route, at)

    monkeypatch.setattr(publish_metrics, "metric_data", recording)
    argv = ["probe", "ws", "--url", server.ws_url, "--concurrency", "1", "--requests", "3", "--warmup", "1"]
    argv += ["--no-report", "--quiet", "--out", str(tmp_path / "canary"), "--publish-metrics", "staging"]
    # The EKS stack's canary names its route; a ws probe's default is the ECS route's.
    argv += ["--publish-route", "eks"] if fails else []
    assert main(argv) == (1 if fails else 0)
    stubber.assert_no_pending_responses()
    assert routes == ["eks" if fails else "ecs"]
    assert made == [(None, None)]  # boto3's chain: AWS_DEFAULT_REGION, as in the canary's task
    err = capsys.readouterr().err
    if fails:
        assert (
            "--publish-metrics: cloudwatch:PutMetricData to SonicDeploy/Canary failed: InternalServiceError"
            in err
        )
        assert "Fix: retry later" in err and "Fix: grant" not in err
    else:
        assert "published 5 data to SonicDeploy/Canary (Environment=staging, Route=ecs)" in err


@pytest.mark.parametrize(
    ("argv", "complaint"),
    [
        (
            ["ws", "--url", "ws://127.0.0.1:9/tts/websocket", "--publish-route", "eks"],
            "add --publish-metrics ENV",
        ),
        (
            ["sagemaker", "--endpoint", "e", "--publish-metrics", "x", "--publish-route", "eks"],
            "--publish-route eks: that route's callers do not speak `probe sagemaker`'s wire",
        ),
        (
            ["ws", "--url", "ws://127.0.0.1:9/tts/websocket", "--in-vpc-route", "eks"],
            "--in-vpc-route is for --in-vpc",
        ),
    ],
)
def test_a_route_option_without_what_it_qualifies_is_refused(
    argv: list[str], complaint: str, capsys: pytest.CaptureFixture[str], tmp_path: Any
) -> None:
    try:
        code = main(["probe", *argv, "--out", str(tmp_path / "o")])
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    assert code == 2
    assert complaint in capsys.readouterr().err
