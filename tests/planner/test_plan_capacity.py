"""The planner's instance arithmetic, on worked examples written out by hand."""

from __future__ import annotations

import pytest

from sonic_deploy.config import ConfigError
from sonic_deploy.planner.capacity import Replicas, Workload, daily_profile, replicas_for


def test_default_workload_worked_example() -> None:
    # 100 calls, agent speaking 40 % of the time, streams paced at real time (rtf 1):
    # 100 x 0.4 x 1 = 40 open streams. An instance of 8 streams filled to 80 % carries 6.4:
    # 40 / 6.4 = 6.25 -> 7 serving, + 1 spare = 8.
    workload = Workload()
    assert workload.open_streams(workload.peak_calls) == pytest.approx(40.0)
    assert replicas_for(40.0, 8, 0.8) == Replicas(serving=7, total=8)
    # The same load on 4-stream instances (L4): 40 / 3.2 = 12.5 -> 13 serving, 14 in all.
    assert replicas_for(40.0, 4, 0.8) == Replicas(serving=13, total=14)


def test_an_exact_fit_does_not_round_up() -> None:
    # 160 calls x 0.4 = 64 streams; 64 / (8 x 0.8) = 10 exactly (in floating point 10.000000000000002).
    streams = Workload(peak_calls=160).open_streams(160)
    assert replicas_for(streams, 8, 0.8) == Replicas(serving=10, total=11)


def test_never_fewer_than_two_instances() -> None:
    # One call: 0.4 streams -> 1 serving + 1 spare = 2. No calls: 0 serving, still the minimum of 2.
    assert replicas_for(0.4, 8, 0.8) == Replicas(serving=1, total=2)
    assert replicas_for(0.0, 8, 0.8) == Replicas(serving=0, total=2)


def test_rtf_below_one_shortens_how_long_a_stream_holds_its_slot() -> None:
    # A server that generates ahead and closes each stream after half its audio: 100 x 0.4 x 0.5 = 20 streams;
    # 20 / 6.4 = 3.125 -> 4 serving, 5 in all.
    workload = Workload(rtf=0.5)
    assert workload.open_streams(100) == pytest.approx(20.0)
    assert daily_profile(workload, 8).peak == Replicas(serving=4, total=5)


def test_monthly_instance_hours_worked_example() -> None:
    # Peak 100 calls for 10 h: 8 instances (above). Off-peak 25 calls for 14 h: 25 x 0.4 = 10 streams,
    # 10 / 6.4 = 1.5625 -> 2 serving, 3 in all. Per day 8 x 10 + 3 x 14 = 122 instance-hours;
    # a month is 730 h = 730 / 24 days: 122 x 730 / 24 = 3,710.83 instance-hours.
    workload = Workload()
    profile = daily_profile(workload, 8)
    assert (profile.peak.total, profile.offpeak.total) == (8, 3)
    assert profile.instance_hours_per_month(workload) == pytest.approx(122 * 730 / 24)


def test_quiet_hours_run_the_minimum() -> None:
    # 8 h peak, 8 h off-peak, 8 h quiet at 2 instances: 8 x 8 + 3 x 8 + 2 x 8 = 104 instance-hours a day.
    workload = Workload(peak_hours=8, offpeak_hours=8)
    assert workload.quiet_hours == 8
    assert daily_profile(workload, 8).instance_hours_per_month(workload) == pytest.approx(104 * 730 / 24)


def test_speech_minutes_and_request_rate_worked_example() -> None:
    # Speaking call-hours a day: 0.4 x (100 x 10 + 25 x 14) = 540 -> 32,400 minutes a day,
    # x 730 / 24 days = 985,500 minutes of speech a month.
    workload = Workload()
    assert workload.speech_minutes_per_month() == pytest.approx(985_500)
    # 40 speaking calls each starting an utterance every 6 s: 6.67 requests a second.
    assert workload.requests_per_second(100) == pytest.approx(40 / 6)


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"peak_calls": 0}, "--peak-calls"),
        ({"speaking_share": 0.0}, "--speaking-share"),
        ({"speaking_share": 1.5}, "--speaking-share"),
        ({"utterance_seconds": 0.0}, "--utterance-seconds"),
        ({"rtf": 0.0}, "--rtf"),
        ({"target_utilisation": 1.2}, "--target-utilisation"),
        ({"offpeak_share": -0.1}, "--offpeak-share"),
        ({"peak_hours": 12.0, "offpeak_hours": 13.0}, "--peak-hours/--offpeak-hours"),
    ],
)
def test_bad_inputs_name_the_option_value_and_fix(changes: dict[str, float], field: str) -> None:
    with pytest.raises(ConfigError) as caught:
        Workload(**changes)  # type: ignore[arg-type]
    message = str(caught.value)
    assert message.startswith(f"command line: {field} = ")
    assert "Fix: give " in message
    for value in changes.values():
        assert repr(value) in message
