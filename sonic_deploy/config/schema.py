"""The shape of the committed TOML files in config/, as pydantic models: an environment file (its route
tables are the routes' own models, `sonic_deploy/routes/<route>/config.py`) and the model packages; the
instance catalogue's are in `catalogue.py`, the base they all derive from in `base.py`.

Structure (types, ranges, unknown keys) is checked here; rules that need more than one field or more than
one file (an ARN for the Region, min <= max, a GPU instance type) are checked in `rules.py` and the routes'
`rules.py`, where the error can name the exact field and file.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator
from pydantic_core import PydanticCustomError

from sonic_deploy.config.base import Strict
from sonic_deploy.routes.ecs.config import EcsConfig
from sonic_deploy.routes.eks.config import EksConfig
from sonic_deploy.routes.sagemaker.config import SageMakerConfig

Route = Literal["sagemaker", "ecs", "eks"]
# The turn probe's cloud hops a probe task may be granted (`[probe] turn_hops`): --stt transcribe, --llm bedrock.
TurnHop = Literal["transcribe", "bedrock"]

# CloudWatch Logs accepts only these retention periods (days).
LOG_RETENTION_DAYS = (
    1,
    3,
    5,
    7,
    14,
    30,
    60,
    90,
    120,
    150,
    180,
    365,
    400,
    545,
    731,
    1096,
    1827,
    2192,
    2557,
    2922,
    3288,
    3653,
)


class ExistingVpc(Strict):
    """Use a VPC you already have instead of creating one (no lookup at synth: name its parts)."""

    vpc_id: Annotated[str, Field(pattern=r"^vpc-[0-9a-f]{8,17}$")]
    vpc_cidr: str
    private_subnet_ids: list[Annotated[str, Field(pattern=r"^subnet-[0-9a-f]{8,17}$")]]
    availability_zones: list[str]
    private_route_table_ids: list[Annotated[str, Field(pattern=r"^rtb-[0-9a-f]{8,17}$")]] = []


class NetworkConfig(Strict):
    availability_zones: list[str] = Field(
        description="At least two AZs; SageMaker's VpcConfig needs subnets in two different AZs."
    )
    cidr: str = Field(
        default="10.60.0.0/16",
        description="the environment's range: the SageMaker route's VPC takes its lower half, the ECS route's its "
        "upper half, so the two never overlap",
    )
    route_cidrs: dict[Route, str] = Field(
        default={},
        description="a route's own range instead of its half of `cidr`: to keep the range of a VPC deployed "
        "before the halves (changing it replaces the VPC)",
    )
    client_cidrs: list[str] = Field(
        default=[],
        description="ranges of client VPCs (peered, or through a transit gateway) admitted to the Sonic endpoint "
        "and the ECS route's API, besides the route's own VPC",
    )
    existing_vpc: ExistingVpc | None = None
    flow_log_retention_days: int = 90

    @property
    def zones(self) -> list[str]:
        """The AZs the stacks use: the existing VPC's, or the ones named for a new VPC."""
        return self.existing_vpc.availability_zones if self.existing_vpc else self.availability_zones


class ProbeTaskConfig(Strict):
    """The probe's Fargate task in each stack: `sonic-deploy probe ... --in-vpc ENV` starts several, and the
    canary one on a schedule."""

    # One of Fargate's CPU and memory pairs: the loader checks the pair (fargate.FARGATE_SIZES).
    cpu: Annotated[int, Field(ge=256, le=16384)] = 1024
    memory_mib: Annotated[int, Field(ge=512, le=122_880)] = 2048
    streams_per_task: Annotated[int, Field(ge=1, le=4096)] = Field(
        default=32, description="closed loop: concurrent streams one task drives (more: more tasks)"
    )
    rate_per_task: Annotated[float, Field(gt=0, le=10_000)] = Field(
        default=20.0, description="open loop: requests a second one task drives (more: more tasks)"
    )
    max_tasks: Annotated[int, Field(ge=1, le=100)] = Field(
        default=20, description="the most tasks one run starts (each is a Fargate task, billed by the second)"
    )
    results_retention_days: Annotated[int, Field(ge=1, le=3650)] = Field(
        default=30, description="days the runs' samples are kept in the stack's probe bucket"
    )
    # Opt-in: each hop listed grants the task role that service's one call and, where the VPC has no NAT,
    # adds its interface endpoint (billed per AZ and hour whether a run uses it or not: docs/deploy.md).
    turn_hops: list[TurnHop] = Field(
        default=[],
        description="the cloud hops `probe turn --in-vpc` may call from the tasks: transcribe (--stt), "
        "bedrock (--llm)",
    )

    @field_validator("turn_hops")
    @classmethod
    def _once_each(cls, hops: list[TurnHop]) -> list[TurnHop]:
        if len(set(hops)) != len(hops):
            raise PydanticCustomError(
                "turn_hops_twice", "names a hop twice: list each of transcribe and bedrock at most once"
            )
        return hops


class CanaryConfig(Strict):
    """A scheduled run of the probe task through the caller's path, publishing first-audio time and success
    as CloudWatch metrics (sonic_deploy/probe/canary_metrics.py), and the alarms on them."""

    enabled: bool | None = Field(default=None, description="default: off in dev, on everywhere else")
    every_minutes: Annotated[int, Field(ge=1, le=1440)] = Field(
        default=5,
        description="minutes between runs; at most 5, so that the first-audio alarm's window holds 3",
    )
    requests: Annotated[int, Field(ge=1, le=50)] = Field(default=3, description="measured requests a run")
    transcript: Annotated[str, Field(min_length=1, max_length=500)] = (
        "Thanks for calling. How can I help you today?"
    )
    voice_id: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")] | None = Field(
        default=None, description="default: the probe's default voice"
    )
    ttfa_p95_ms: Annotated[float, Field(gt=0, le=60_000)] = Field(
        default=500.0,
        description="the alarm: canary first-audio p95 above this over 15 minutes, in 2 of 3 such windows",
    )
    failed_runs: Annotated[int, Field(ge=1, le=100)] = Field(
        default=2, description="the alarm: this many runs in a row with a failed request (or no run at all)"
    )


class AgentConfig(Strict):
    """Your voice agent's own telemetry (sonic_deploy/client/telemetry.py; docs/client.md, "Telemetry"): the
    dashboard's agent row and the alarms on what its callers got."""

    enabled: bool = Field(default=False, description="your agent writes telemetry for this environment")
    first_audio_p95_ms: Annotated[float, Field(gt=0, le=60_000)] = Field(
        default=500.0,
        description="the alarm: the agent's first-audio p95 above this for 3 periods of 5 minutes",
    )
    error_percent: Annotated[float, Field(gt=0, le=100)] = Field(
        default=5.0, description="the alarm: failed utterances above this share of all, over 5 minutes, twice"
    )


class EnvironmentConfig(Strict):
    """One file in config/environments/: where and how to deploy."""

    account: Annotated[str, Field(pattern=r"^[0-9]{12}$")] | None = None  # not \d: that takes any digit
    region: str
    routes: list[Route] = Field(min_length=1)
    sonic_version: str
    log_retention_days: int = 90
    tags: dict[str, str] = {}
    network: NetworkConfig
    sagemaker: SageMakerConfig = SageMakerConfig()
    ecs: EcsConfig | None = None
    eks: EksConfig | None = None
    probe: ProbeTaskConfig = ProbeTaskConfig()
    canary: CanaryConfig = CanaryConfig()
    agent: AgentConfig = AgentConfig()


class ModelPackages(Strict):
    """config/model_packages.toml: `[versions."<sonic version>"]` with one `<region> = "<arn>"` per line."""

    versions: dict[str, dict[str, str]]
    unconfirmed: list[str] = Field(
        default=[],
        description="ARNs listed above that nobody has checked against a subscription: synth warns, deploy refuses",
    )
