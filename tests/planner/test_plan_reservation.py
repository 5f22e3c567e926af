"""`plan --price-reservation`: the training plan of `sagemaker.capacity.ml_reservation_arn` read with
DescribeTrainingPlan (botocore's Stubber, the API's response shape) and priced beside the same instances on
demand; a plan with no reservation, or no credentials, is one line."""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from sonic_deploy.cli import main
from sonic_deploy.planner.reservation import Reservation, describe, reservation_note
from tests.conftest import EditConfig

PLAN = "arn:aws:sagemaker:us-east-2:123456789012:training-plan/sonic-endpoints"
START = datetime.datetime(2026, 12, 1, tzinfo=datetime.UTC)


def training_plan(fee: str, instance_type: str = "ml.p5.48xlarge", count: int = 2) -> dict[str, Any]:
    return {
        "TrainingPlanArn": PLAN,
        "TrainingPlanName": "sonic-endpoints",
        "Status": "Active",
        "DurationHours": 720,
        "DurationMinutes": 30,
        "StartTime": START,
        "EndTime": START + datetime.timedelta(hours=720, minutes=30),
        "UpfrontFee": fee,
        "CurrencyCode": "USD",
        "TotalInstanceCount": count,
        "TargetResources": ["endpoint"],
        "ReservedCapacitySummaries": [
            {
                "ReservedCapacityArn": "arn:aws:sagemaker:us-east-2:123456789012:reserved-capacity/rc-1",
                "InstanceType": instance_type,
                "TotalInstanceCount": count,
                "Status": "Active",
                "AvailabilityZone": "us-east-2a",
            }
        ],
    }


@pytest.fixture
def sagemaker() -> Iterator[tuple[Any, Stubber]]:
    client = boto3.Session(aws_access_key_id="x", aws_secret_access_key="x").client(
        "sagemaker", region_name="us-east-2"
    )
    with Stubber(client) as stub:
        yield client, stub
        stub.assert_no_pending_responses()


def test_the_plan_is_read_as_the_api_describes_it(sagemaker: tuple[Any, Stubber]) -> None:
    client, stub = sagemaker
    stub.add_response(
        "describe_training_plan", training_plan("43218.00"), {"TrainingPlanName": "sonic-endpoints"}
    )
    reservation = describe(client, PLAN)
    assert reservation == Reservation("sonic-endpoints", 43218.0, "USD", 720.5, {"ml.p5.48xlarge": 2})
    # The price table has no ml.p5 row: priced, not compared.
    assert reservation_note(reservation, lambda _: None) == (
        "reservation sonic-endpoints: 43,218.00 USD up front for 2 x ml.p5.48xlarge over 720.5 h: 59.98 an "
        "hour, 29.992 an instance-hour (not compared with on demand: no on-demand price for ml.p5.48xlarge)"
    )


@pytest.mark.parametrize(
    ("on_demand", "ending"),
    [
        (120.0, "the plan costs less once the endpoint uses more than 50% of its instance-hours"),
        (40.0, "the plan costs more even fully used (150% of on demand)"),
    ],
)
def test_the_fee_beside_the_same_instances_on_demand(on_demand: float, ending: str) -> None:
    reservation = Reservation("p", 43230.0, "USD", 720.5, {"ml.p5.48xlarge": 1})
    note = reservation_note(reservation, {"ml.p5.48xlarge": on_demand}.get)
    assert note.endswith(f"on demand the same instances cost {on_demand:,.3f} an instance-hour: {ending}")


def test_a_fee_in_another_currency_is_not_compared() -> None:
    note = reservation_note(Reservation("p", 100.0, "EUR", 10, {"ml.p5.48xlarge": 1}), lambda _: 1.0)
    assert note.endswith("(not compared with on demand: the fee is in EUR)")


def _session(client: Any, profile: str | None = None) -> type:
    class FakeSession:
        def __init__(self, profile_name: str | None = None) -> None:
            assert profile_name == profile

        def client(self, service: str, region_name: str) -> object:
            assert (service, region_name) == ("sagemaker", "us-east-2")
            return client

    return FakeSession


def test_the_command_adds_the_reservation_to_the_plan(
    sagemaker: tuple[Any, Stubber],
    edit_config: EditConfig,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    client, stub = sagemaker
    stub.add_response("describe_training_plan", training_plan("43218.00"))
    monkeypatch.setattr(boto3, "Session", _session(client, "billing"))
    config = edit_config(
        "environments/dev.toml", "", f'\n[sagemaker.capacity]\nml_reservation_arn = "{PLAN}"\n'
    )
    argv = ["plan", "--config-dir", str(config), "--price-reservation", "--profile", "billing"]
    assert main(argv) == 0
    assert (
        "reservation sonic-endpoints: 43,218.00 USD up front for 2 x ml.p5.48xlarge"
        in capsys.readouterr().out
    )


def test_no_reservation_or_no_access_is_one_line(
    sagemaker: tuple[Any, Stubber],
    edit_config: EditConfig,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    client, stub = sagemaker
    monkeypatch.setattr(boto3, "Session", _session(client))
    config = edit_config("environments/dev.toml", "", "")
    assert main(["plan", "--config-dir", str(config), "--price-reservation"]) == 2
    assert "sagemaker.capacity.ml_reservation_arn = (missing): not set" in capsys.readouterr().err
    (config / "environments/dev.toml").write_text(
        (config / "environments/dev.toml").read_text()
        + f'\n[sagemaker.capacity]\nml_reservation_arn = "{PLAN}"\n'
    )
    stub.add_client_error("describe_training_plan", "AccessDeniedException", "not allowed", 400)
    assert main(["plan", "--config-dir", str(config), "--price-reservation"]) == 1
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "sagemaker:DescribeTrainingPlan" in error and "AccessDenied" in error
