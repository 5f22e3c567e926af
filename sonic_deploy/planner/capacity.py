"""How many instances a call volume needs: the planner's arithmetic, free of prices and AWS calls.

A call's agent speaks for `speaking_share` of the call. While it speaks, one Sonic stream is open; the stream
holds a GPU slot for `rtf` times the length of its audio (1.0 when the server paces audio at real time, less
when it generates ahead and closes early). So at any moment `calls * speaking_share * rtf` streams are open.
Capacity is sized so that those streams fill `target_utilisation` of the serving instances; one spare instance
absorbs a failure (N+1), and never fewer than two instances run (the SageMaker SLA needs more than one).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from sonic_deploy.config import ConfigError
from sonic_deploy.config.catalogue import PublishedFigure

HOURS_PER_DAY = 24
HOURS_PER_MONTH = 730  # AWS's monthly convention: 8,760 hours a year / 12
MINIMUM_INSTANCES = 2
SPARE_INSTANCES = 1  # N+1: survive one instance failing at peak

# Floating-point products such as 100 * 0.4 / 0.8 must not round up a whole number of instances.
_EPSILON = 1e-9


@dataclass(frozen=True)
class Workload:
    """The call volume to plan for. Every field has a default, so a plan runs with no input at all."""

    peak_calls: int = 100
    speaking_share: float = 0.4
    utterance_seconds: float = 6.0
    rtf: float = 1.0
    target_utilisation: float = 0.8
    peak_hours: float = 10.0
    offpeak_hours: float = 14.0
    offpeak_share: float = 0.25

    def __post_init__(self) -> None:
        def fail(field: str, value: object, fix: str) -> None:
            raise ConfigError(file="command line", field=field, value=value, problem="out of range", fix=fix)

        if self.peak_calls < 1:
            fail("--peak-calls", self.peak_calls, "give a whole number of concurrent calls, 1 or more")
        if not 0 < self.speaking_share <= 1:
            fail(
                "--speaking-share",
                self.speaking_share,
                "give the agent's share of call time, e.g. 0.4 (0 < x <= 1)",
            )
        if self.utterance_seconds <= 0:
            fail(
                "--utterance-seconds",
                self.utterance_seconds,
                "give the average utterance length in seconds, > 0",
            )
        if not 0 < self.rtf <= 1:
            fail(
                "--rtf",
                self.rtf,
                "give the real-time factor a stream holds its slot for (0 < x <= 1; 1 = paced)",
            )
        if not 0 < self.target_utilisation <= 1:
            fail(
                "--target-utilisation",
                self.target_utilisation,
                "give a share of capacity, e.g. 0.8 (0 < x <= 1)",
            )
        if not 0 <= self.offpeak_share <= 1:
            fail("--offpeak-share", self.offpeak_share, "give off-peak calls as a share of peak, 0 to 1")
        if (
            self.peak_hours < 0
            or self.offpeak_hours < 0
            or self.peak_hours + self.offpeak_hours > HOURS_PER_DAY
        ):
            fail(
                "--peak-hours/--offpeak-hours",
                (self.peak_hours, self.offpeak_hours),
                "give hours >= 0 that add up to 24 or less (the rest of the day runs the minimum, no calls)",
            )

    @property
    def quiet_hours(self) -> float:
        return HOURS_PER_DAY - self.peak_hours - self.offpeak_hours

    @property
    def offpeak_calls(self) -> float:
        return self.peak_calls * self.offpeak_share

    def open_streams(self, calls: float) -> float:
        return calls * self.speaking_share * self.rtf

    def requests_per_second(self, calls: float) -> float:
        """New Sonic requests a second: each speaking call starts one per utterance."""
        return calls * self.speaking_share / self.utterance_seconds

    def speech_minutes_per_month(self) -> float:
        speaking_calls_per_day = self.speaking_share * (
            self.peak_calls * self.peak_hours + self.offpeak_calls * self.offpeak_hours
        )
        return speaking_calls_per_day * 60 * HOURS_PER_MONTH / HOURS_PER_DAY


StreamsBasis = Literal["measured", "configured", "catalogue"]
"""Where a streams-per-instance figure comes from, strongest first: a probe run, the environment's
`sagemaker.streams_per_instance`, the catalogue's published figure for the Sonic version."""


@dataclass(frozen=True)
class Figure:
    """A streams-per-instance figure and where it comes from: the one a plan uses, or one it replaced."""

    basis: StreamsBasis
    streams: int
    source: str


@dataclass(frozen=True)
class StreamsPerInstance:
    """Concurrent streams one instance serves, and where that figure comes from (shown to the user): the
    figures it overrides, and the published figures that contradict the catalogue's."""

    count: int
    source: str
    basis: StreamsBasis = "catalogue"
    replaces: tuple[Figure, ...] = ()
    contradicted_by: tuple[PublishedFigure, ...] = ()


@dataclass(frozen=True)
class Replicas:
    """Instances for one instance type: serving ones, and the total with the spare and the minimum."""

    serving: int
    total: int


def replicas_for(streams: float, streams_per_instance: int, target_utilisation: float) -> Replicas:
    serving = max(math.ceil(streams / (streams_per_instance * target_utilisation) - _EPSILON), 0)
    return Replicas(serving=serving, total=max(serving + SPARE_INSTANCES, MINIMUM_INSTANCES))


@dataclass(frozen=True)
class DailyProfile:
    """Instances at peak and off-peak, and the instance-hours they add up to in a month."""

    peak: Replicas
    offpeak: Replicas

    def instance_hours_per_month(self, workload: Workload) -> float:
        per_day = (
            self.peak.total * workload.peak_hours
            + self.offpeak.total * workload.offpeak_hours
            + MINIMUM_INSTANCES * workload.quiet_hours
        )
        return per_day * HOURS_PER_MONTH / HOURS_PER_DAY


def daily_profile(workload: Workload, streams_per_instance: int) -> DailyProfile:
    return DailyProfile(
        peak=replicas_for(
            workload.open_streams(workload.peak_calls), streams_per_instance, workload.target_utilisation
        ),
        offpeak=replicas_for(
            workload.open_streams(workload.offpeak_calls), streams_per_instance, workload.target_utilisation
        ),
    )
