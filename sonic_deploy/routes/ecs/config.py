"""The ECS route's settings: the `[ecs]` table of an environment file and the tables under it (alarms,
capacity, resilience); its services, secrets and API take the models the EKS route shares
(config/cartesia.py)."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import Field, field_validator
from pydantic_core import PydanticCustomError

from sonic_deploy.config.base import Percent, Ratio, Strict
from sonic_deploy.config.cartesia import (
    ApiConfig,
    LicenceSettings,
    SecretsConfig,
    ServiceConfig,
    ServiceName,
    WorkerAlarmConfig,
)

# Where the ECS route's services find each other (Cloud Map: <name>.SERVICE_NAMESPACE), and the port NATS
# servers route to each other on.
SERVICE_NAMESPACE = "sonic.internal"
NATS_ROUTE_PORT = 6222


class EcsAlarmConfig(WorkerAlarmConfig):
    gpu_pinned_percent: Percent = 95.0
    gpu_pinned_minutes: Annotated[int, Field(ge=1, le=1440)] = 15
    provisioning_minutes: Annotated[int, Field(ge=1, le=1440)] = Field(
        default=15,
        description="a worker task waiting this long for a GPU instance (PROVISIONING, or PENDING): capacity or "
        "quota is short",
    )


class WorkerTtfaConfig(Strict):
    """How the workers' /metrics exposes inferno_worker_ttfa. Cartesia does not document its Prometheus type or
    unit: read one line of `curl <worker>:8080/metrics` (a `# TYPE inferno_worker_ttfa ...` line) and set both."""

    form: Literal["gauge", "summary", "histogram"] = "gauge"
    unit: Literal["ms", "s"] = "ms"


class ResilienceConfig(Strict):
    """[ecs.resilience]: AWS FIS experiment templates for a resilience rehearsal (docs/operate.md). Off, nothing
    FIS-related is in the template."""

    enabled: bool = Field(default=False, description="deploy the FIS experiment templates and their role")
    # FIS takes 1 minute to 12 hours; a rehearsal holds the GPU group short of one instance for this long.
    insufficient_capacity_minutes: Annotated[int, Field(ge=1, le=60)] = Field(
        default=10,
        description="how long the GPU group's launches are refused (InsufficientInstanceCapacity) in its experiment",
    )
    insufficient_capacity_percent: Annotated[int, Field(ge=1, le=100)] = Field(
        default=100, description="the share of the GPU group's launch requests refused in that experiment"
    )


# The ECS GPU AMI by release: `/aws/service/ecs/optimized-ami/amazon-linux-2023/gpu/<release>/image_id` (the
# parameter format of the ECS Developer Guide, "Retrieving Amazon ECS-optimized Linux AMI metadata":
# `.../amazon-linux-2023/<version>`, and `.../amazon-linux-2/gpu/<version>` for AL2's GPU variant; the AL2023 GPU
# release path by the same pattern is UNVERIFIED until `sonic-deploy preflight` reads it). Release names are
# aws/amazon-ecs-ami al2023gpu.pkr.hcl's `al2023-ami-ecs-gpu-hvm-2023.0.<YYYYMMDD>-kernel-6.1-x86_64-ebs`; the
# kernel is any `<major>.<minor>`, so a release on a newer AL2023 kernel is not refused.
GPU_AMI_RELEASE = r"al2023-ami-ecs-gpu-hvm-2023\.0\.[0-9]{8}-kernel-[0-9]+\.[0-9]+-x86_64-ebs"
GPU_AMI_RELEASE_FORM = "al2023-ami-ecs-gpu-hvm-2023.0.<YYYYMMDD>-kernel-<major>.<minor>-x86_64-ebs"
GPU_AMI_PARAMETER_PREFIX = "/aws/service/ecs/optimized-ami/amazon-linux-2023/gpu/"
RECOMMENDED_AMI = "recommended"
# aws/amazon-ecs-ami release 20260820: NVIDIA driver 580.159.03 (its al2023gpu NVIDIA_DRIVER_VERSION). A newer release arrives as
# a reviewed change to this line or to `ecs.capacity.ami`, never by a scale-out.
DEFAULT_GPU_AMI = "al2023-ami-ecs-gpu-hvm-2023.0.20260820-kernel-6.1-x86_64-ebs"


def gpu_ami_parameter(ami: str) -> str:
    """The SSM parameter holding the AMI id of `ami` (a release name, or "recommended")."""
    return f"{GPU_AMI_PARAMETER_PREFIX}{ami}/image_id"


ReservationUse = Literal["open", "targeted", "none"]


class CapacityReservationConfig(Strict):
    """`[[ecs.capacity.reservation]]`: an EC2 capacity reservation the GPU groups may launch into."""

    id: Annotated[str, Field(pattern=r"^cr-[0-9a-f]{8,17}$")] = Field(
        description="the reservation's id (cr-...)"
    )
    availability_zone: str = Field(description="its AZ: ecs.availability_zone or the fallback's")
    instance_type: str = Field(description="its instance type: one the group in that AZ launches")
    kind: Literal["on-demand", "capacity-block"] = Field(
        default="on-demand",
        description='an On-Demand Capacity Reservation; "capacity-block" (a Capacity Block for ML) is refused: '
        "EC2 offers them for P and Trn types only, which the ECS route does not run",
    )


class CapacityFallbackConfig(Strict):
    """`[ecs.capacity.fallback]`: a second AZ, with its own placement group and GPU group (0 instances until
    used), and an overflow worker service there that takes the tasks the first AZ cannot place."""

    availability_zone: str = Field(description="one of the VPC's AZs, not ecs.availability_zone")
    instance_types: list[str] = Field(
        default=[],
        description="its GPU types, in order of preference; default: the first AZ's (ecs.instance_type, then "
        "ecs.capacity.instance_types)",
    )
    after_minutes: Annotated[int, Field(ge=1, le=120)] = Field(
        default=15,
        description="the first AZ short of GPU instances for its workers (tasks without an instance) by more than "
        "the overflow has, for this long: the overflow grows; longer than a normal scale-out "
        "(ecs.instance_warmup_s + ecs.worker_start_period_s)",
    )
    scale_in_minutes: Annotated[int, Field(ge=5, le=1440)] = Field(
        default=30,
        description="the overflow above the first AZ's shortfall for this long: one overflow task goes (one per "
        "period)",
    )


class EcsCapacityConfig(Strict):
    """`[ecs.capacity]`: where the GPU instances come from (docs/routes.md, "The single-AZ trade-off")."""

    instance_types: list[str] = Field(
        default=[],
        description="more GPU types for the same group, tried in this order after ecs.instance_type when EC2 has "
        "none of it (each one GPU, each fits the worker)",
    )
    ami: str = Field(
        default=DEFAULT_GPU_AMI,
        description='the ECS GPU AMI release, or "recommended" (AWS\'s newest at each deploy: a driver change '
        "then arrives unreviewed)",
    )
    market: Literal["on-demand", "spot"] = Field(
        default="on-demand", description='"spot" only in dev: interrupted with 2 minutes\' notice'
    )
    reservations: ReservationUse = Field(
        default="open",
        description='"open": any open reservation matching an instance is used (EC2\'s default); "targeted": '
        'the reservations listed below first; "none": never a reservation',
    )
    reservations_only: bool = Field(
        default=False,
        description="with targeted: launch only into the listed reservations (no On-Demand beyond them)",
    )
    reservation: list[CapacityReservationConfig] = Field(
        default=[], description="the reservations the stack targets, and preflight checks"
    )
    fallback: CapacityFallbackConfig | None = None

    @field_validator("ami")
    @classmethod
    def _ami_release(cls, value: str) -> str:
        if value != RECOMMENDED_AMI and re.fullmatch(GPU_AMI_RELEASE, value) is None:
            raise PydanticCustomError(
                "ami_release",
                'neither "recommended" nor an ECS GPU AMI release name ({form}, from aws/amazon-ecs-ami\'s '
                "releases; default {default})",
                {"form": GPU_AMI_RELEASE_FORM, "default": DEFAULT_GPU_AMI},
            )
        return value


class EcsConfig(LicenceSettings):
    instance_type: str = "g6e.xlarge"
    availability_zone: str = Field(description="the one AZ of the GPU instances, placement group and NLB")
    min_workers: Annotated[int, Field(ge=0, le=1000)] = 2
    max_workers: Annotated[int, Field(ge=0, le=1000)] = 6
    api_server_tasks: Annotated[int, Field(ge=0, le=1000)] = 2
    nats_tasks: Annotated[int, Field(ge=0, le=5)] = Field(
        default=3,
        description="NATS servers, clustered (their routes in ecs.services.nats.command): every request crosses "
        "NATS; 2 or 3 (more can stay split: rules.MOST_NATS_SERVERS)",
    )
    target_utilisation: Ratio = 0.8
    scale_out_cooldown_s: Annotated[int, Field(ge=0, le=86_400)] = 30
    scale_in_cooldown_s: Annotated[int, Field(ge=0, le=86_400)] = 900
    instance_warmup_s: Annotated[int, Field(ge=0, le=10000)] = 300
    root_volume_gib: Annotated[int, Field(ge=30, le=16384)] = 200
    worker_start_period_s: Annotated[int, Field(ge=0, le=300)] = 300
    worker_health_retries: Annotated[int, Field(ge=1, le=10)] = 10
    listener_port: Annotated[int, Field(ge=1, le=65535)] | None = Field(
        default=None, description="the load balancer's port; default 443 with TLS (ecs.api.tls), 80 without"
    )
    nlb_idle_timeout_s: Annotated[int, Field(ge=60, le=6000)] = 3600
    deregistration_delay_s: Annotated[int, Field(ge=0, le=3600)] = Field(
        default=300,
        description="how long a call keeps its API server task once a deploy or scale-in replaces it",
    )
    api_stop_timeout_s: Annotated[int, Field(ge=2, le=120)] = Field(
        default=120,
        description="SIGTERM to SIGKILL for the API server after its drain (Fargate's most: 120 s)",
    )
    worker_stop_timeout_s: Annotated[int, Field(ge=2, le=600)] = Field(
        default=120, description="SIGTERM to SIGKILL for a GPU worker: how long its in-flight utterances get"
    )
    reuse_repositories: bool = Field(
        default=False,
        description="use the ECR repositories an earlier deploy left behind instead of creating them",
    )
    copy_images: bool = Field(default=True, description="copy images from Cartesia's registry at deploy time")
    image_copy_memory_mib: Annotated[int, Field(ge=128, le=10240)] = Field(
        default=3008,
        description="memory of the image-copy Lambda (its CPU and network scale with it; it has 900 s at most)",
    )
    model_id: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")] | None = Field(
        default=None,
        description="the model_id agents send (`sonic-deploy connect` prints it; stack output ModelId); default: "
        "the environment's sonic_version. UNVERIFIED: a self-hosted release may name its model differently "
        "from the cloud API (its changelog names it): set it from your release's documentation",
    )
    # What the frameworks send by default, read from their source: pipecat 1.14 `Cartesia-Version:
    # 2026-03-01` (pinned; its `cartesia_version` argument is deprecated), LiveKit's Cartesia plugin 1.8.9
    # `?cartesia_version=2025-04-16` (its `api_version` argument), the official SDK 4.2.0 `2026-08-14`.
    # 2025-04-16 is the one Cartesia's self-hosted API pages show (domain.md, section 2).
    cartesia_version: Annotated[str, Field(pattern=r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$")] = Field(
        default="2025-04-16",
        description="the Cartesia API version agents send (`sonic-deploy connect` prints it; stack output "
        "CartesiaVersion): the one your self-hosted release documents",
    )
    secrets: SecretsConfig
    services: dict[ServiceName, ServiceConfig]
    alarms: EcsAlarmConfig = EcsAlarmConfig()
    worker_ttfa: WorkerTtfaConfig = WorkerTtfaConfig()
    resilience: ResilienceConfig = ResilienceConfig()
    api: ApiConfig = ApiConfig()
    capacity: EcsCapacityConfig = EcsCapacityConfig()

    def zone_instance_types(self) -> dict[str, list[str]]:
        """The GPU types each AZ's group launches, in order of preference: the first AZ's, then the
        fallback's."""
        first = [self.instance_type, *self.capacity.instance_types]
        zones = {self.availability_zone: first}
        if self.capacity.fallback is not None:
            zones[self.capacity.fallback.availability_zone] = self.capacity.fallback.instance_types or first
        return zones

    def reservation_ids(self, availability_zone: str) -> list[str]:
        """The listed capacity reservations in one AZ."""
        return [r.id for r in self.capacity.reservation if r.availability_zone == availability_zone]
