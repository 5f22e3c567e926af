"""The SageMaker route's settings: the `[sagemaker]` table of an environment file and its `[sagemaker.alarms]`."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from sonic_deploy.config.base import Email, Percent, Ratio, Strict


class AlarmConfig(Strict):
    email: list[Email] = []
    errors_5xx_per_5min: Annotated[int, Field(ge=1, le=1_000_000)] = 1
    errors_4xx_per_5min: Annotated[int, Field(ge=1, le=1_000_000)] = 5
    # SageMaker gives an invocation 60 s to answer; a threshold past it never fires.
    model_latency_p95_ms: Annotated[float, Field(gt=0, le=60_000)] = 500.0
    gpu_pinned_percent: Percent = 95.0
    gpu_pinned_minutes: Annotated[int, Field(ge=1, le=1440)] = 15
    capacity_minutes: Annotated[int, Field(ge=1, le=1440)] = Field(
        default=5,
        description="concurrent streams above what the instances serve for this long: capacity exhausted",
    )


class CapacityConfig(Strict):
    """`[sagemaker.capacity]`: where the endpoint's instances come from (docs/capacity.md, "SageMaker")."""

    fallback_types: Annotated[list[str], Field(max_length=4)] = Field(
        default=[],
        description="instance types SageMaker falls back to, in this order, when instance_type has no "
        "capacity (instance pools: at most five types in all)",
    )
    provision_timeout_s: Annotated[int, Field(ge=300, le=3600)] | None = Field(
        default=None,
        description="how long SageMaker tries to get instances, across all the types, before it gives up "
        "(VariantInstanceProvisionTimeoutInSeconds; SageMaker's default when left out)",
    )
    ml_reservation_arn: str | None = Field(
        default=None,
        description="a training plan reserved for endpoints (`training-plan/NAME`): the instances come "
        "only from it, and the endpoint stops serving when it ends",
    )


class SageMakerConfig(Strict):
    instance_type: str = "ml.g6e.xlarge"
    min_instances: Annotated[int, Field(ge=0, le=1000)] = 2
    max_instances: Annotated[int, Field(ge=0, le=1000)] = 4
    streams_per_instance: Annotated[int, Field(ge=1, le=10_000)] | None = Field(
        default=None, description="Concurrent streams one instance serves; default: the instance catalogue's."
    )
    target_utilisation: Ratio = 0.8
    startup_health_check_timeout_s: Annotated[int, Field(ge=60, le=3600)] = 900
    model_data_download_timeout_s: Annotated[int, Field(ge=60, le=3600)] = 1200
    endpoint_name: str | None = None
    scale_out_cooldown_s: Annotated[int, Field(ge=0, le=86_400)] = 30
    scale_in_cooldown_s: Annotated[int, Field(ge=0, le=86_400)] = 900
    alarms: AlarmConfig = AlarmConfig()
    capacity: CapacityConfig = CapacityConfig()
