"""The shape of the committed TOML files in config/, as pydantic models.

Structure (types, ranges, unknown keys) is checked here; rules that need more than one field or more than
one file (an ARN for the Region, min <= max, a GPU instance type) are checked in `loader.py`, where the
error can name the exact field and file.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from types import UnionType
from typing import Annotated, Any, ClassVar, Literal, Union, get_args, get_origin

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

Route = Literal["sagemaker", "ecs"]
# The turn probe's cloud hops a probe task may be granted (`[probe] turn_hops`): --stt transcribe, --llm bedrock.
TurnHop = Literal["transcribe", "bedrock"]
Email = Annotated[str, Field(pattern=r"^[^@\s]+@[^@\s]+\.[^@\s]+$")]
# The OCI distribution reference grammar (github.com/distribution/reference, reference.go), which ECR and
# every registry apply: tag := /[\w][\w.-]{0,127}/ (ASCII \w here: pydantic's \w would take any letter).
ImageTag = Annotated[str, Field(pattern=r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$")]
# name := [domain '/'] remote-name, domain := host [':' port-number], domain-component :=
# /([a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])/, path-component := alpha-numeric [separator
# alpha-numeric]*, alpha-numeric := /[a-z0-9]+/, separator := /[_.]|__|[-]*/; a name is at most 255 characters.
# Which of the two the first component is, the grammar alone leaves open; distribution's normalisation
# (normalize.go, splitDockerDomain) decides: a registry host only if it holds a '.' or a ':' or is
# `localhost`, otherwise it is the first path component (Docker Hub's namespace) and must be lower case.
# So "Myregistry/api-server" is refused, "myregistry/api-server" taken. An IPv6 registry ("[::1]:5000/x",
# allowed by newer versions of the grammar) stays refused: no registry Cartesia's bundle names is one.
_DOMAIN_COMPONENT = r"[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?"
_PORT = r"(?::[0-9]+)"
_DOMAIN = (
    rf"(?:localhost{_PORT}?|{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})+{_PORT}?|{_DOMAIN_COMPONENT}{_PORT})"
)
_PATH_COMPONENT = r"[a-z0-9]+(?:(?:[_.]|__|-+)[a-z0-9]+)*"
IMAGE_NAME = re.compile(rf"(?:{_DOMAIN}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*")


def _image_name(value: str) -> str:
    if len(value) > 255 or IMAGE_NAME.fullmatch(value) is None:
        raise PydanticCustomError(
            "image_name",
            "not an image name a registry takes (registry host, with a . or : in it or localhost, then "
            "lower-case path parts separated by /; "
            "no tag, digest, space or upper case after the host; at most 255 characters)",
        )
    return value


ImageName = Annotated[str, AfterValidator(_image_name)]


def _manifest_digest(value: str) -> str:
    # fullmatch, not a `$`-anchored pattern: `$` also matches before a trailing newline.
    if re.fullmatch(r"sha256:[0-9a-f]{64}", value) is None:
        raise PydanticCustomError(
            "image_digest", "not an image manifest digest (sha256: and 64 lowercase hex digits)"
        )
    return value


ImageDigest = Annotated[str, AfterValidator(_manifest_digest)]
Percent = Annotated[float, Field(gt=0, le=100)]
Ratio = Annotated[float, Field(gt=0, le=1)]

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


def _bare(hint: Any) -> Any:
    while get_origin(hint) is Annotated:
        hint = get_args(hint)[0]
    return hint


def _takes_a_number(annotation: Any) -> bool:
    """An int or float field (also inside Annotated, Optional or a union), not one that takes a boolean too."""
    bare = _bare
    annotation = bare(annotation)
    options = (
        [bare(o) for o in get_args(annotation)]
        if get_origin(annotation) in (Union, UnionType)
        else [annotation]
    )
    return bool not in options and any(option in (int, float) for option in options)


# CloudFormation takes integer properties as 32-bit signed integers ("Type: Integer" in its resource
# reference); no setting here needs more, and a larger number is a typo.
INT32_MAX = 2**31 - 1
# Text CloudFormation or CDK would read as something else than itself, wherever the string lands in a
# template: a dynamic reference ("you can use a dynamic reference for a secret in any resource property",
# AWS CloudFormation User Guide, "Get values stored in other services using dynamic references"), the
# pseudo parameters and intrinsic functions Fn::Sub and the JSON form spell (${AWS::Region}, Fn::GetAtt),
# and a CDK token's string form (${Token[...]}), which CDK substitutes at synth.
TEMPLATE_SYNTAX = re.compile(r"\{\{resolve:|\$\{AWS::|Fn::|\$\{Token\[", re.IGNORECASE)
_NESTING_CHECKED = 64  # deeper values are refused by their type anyway; do not walk them


def _strings_in(value: Any) -> Any:
    """Every string in `value` (and in the keys of its tables), down to _NESTING_CHECKED levels."""
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            yield item
        elif depth < _NESTING_CHECKED and isinstance(item, dict):
            stack.extend((part, depth + 1) for pair in item.items() for part in pair)
        elif depth < _NESTING_CHECKED and isinstance(item, list):
            stack.extend((part, depth + 1) for part in item)


def _holds_models(annotation: Any) -> bool:
    """The field's type is, or holds (in a list, a table or a union), a model."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return True
    return any(_holds_models(arg) for arg in get_args(annotation))


def _keys(value: Any) -> list[Any]:
    return list(value) if isinstance(value, dict) else []


# Control and format characters (zero-width ones among them) and line and paragraph separators.
_INVISIBLE = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


def _control_character(text: str, allowed: str) -> str | None:
    if text.isprintable():
        return None
    return next((c for c in text if unicodedata.category(c) in _INVISIBLE and c not in allowed), None)


class Strict(BaseModel):
    """Unknown keys are typos: refuse them. Numbers are finite (TOML's `inf` and `nan` are refused) and
    within CloudFormation's 32-bit integers, a boolean is not a number (pydantic would take `true` for 1),
    and neither is a quoted string (`min_instances = "2"`: strict mode, so a number in a table or list is
    not converted either, and a string number never slips past the int32 check, which runs after the
    field's own range). No string holds a control character (but a tab or newline in the fields listed in
    `_multiline`: a container's shell command may have them) or CloudFormation's own syntax."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, strict=True)
    _multiline: ClassVar[frozenset[str]] = frozenset()

    @field_validator("*", mode="before")
    @classmethod
    def _plain_values(cls, value: Any, info: ValidationInfo) -> Any:
        field = cls.model_fields.get(info.field_name or "")
        if field is not None and _takes_a_number(field.annotation):
            if isinstance(value, bool):
                raise PydanticCustomError(
                    "bool_for_number", "a boolean where a number is needed (true and false are not 1 and 0)"
                )
            if isinstance(value, str):
                raise PydanticCustomError(
                    "string_for_number",
                    "a quoted string where a number is needed (in TOML a quoted number is text)",
                )
        # A model checks its own fields, so the error names the field in it (an unknown key is refused as
        # one); of a table of models, only the names are checked here.
        checked = value
        if field is not None and _holds_models(field.annotation):
            checked = _keys(value) if get_origin(_bare(field.annotation)) is dict else []
        # A shell command may hold a tab or a newline (in its text, not in a variable's name).
        multiline = info.field_name in cls._multiline
        for text in _strings_in(checked):
            allowed = "\t\n" if multiline and not (isinstance(value, dict) and text in value) else ""
            bad = _control_character(text, allowed)
            if bad is not None:
                raise PydanticCustomError(
                    "control_character",
                    "holds the control character {character} (a pasted newline, tab or terminal escape?)",
                    {"character": repr(bad), "text": text},
                )
            syntax = TEMPLATE_SYNTAX.search(text)
            if syntax is not None:
                raise PydanticCustomError(
                    "template_syntax",
                    "holds {syntax}, which CloudFormation or CDK would resolve instead of keeping as text",
                    {"syntax": repr(syntax.group()), "text": text},
                )
        return value

    @field_validator("*", mode="after")
    @classmethod
    def _not_too_large(cls, value: Any, info: ValidationInfo) -> Any:
        """After the field's own range (`Field(le=...)`), so a field that has one says so; this is for the
        fields that have none (`1e308` in a share is "at most 1", not CloudFormation's integers)."""
        field = cls.model_fields.get(info.field_name or "")
        if field is None or not _takes_a_number(field.annotation) or isinstance(value, bool):
            return value
        if isinstance(value, int | float) and abs(value) > INT32_MAX:
            limit = "CloudFormation's integers stop at" if isinstance(value, int) else "none goes past"
            raise PydanticCustomError(
                "number_too_large", f"beyond what any setting here takes ({limit} {INT32_MAX})"
            )
        return value


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


# Where the ECS route's services find each other (Cloud Map: <name>.SERVICE_NAMESPACE), and the port NATS
# servers route to each other on.
SERVICE_NAMESPACE = "sonic.internal"
NATS_ROUTE_PORT = 6222


ServiceName = Literal[
    "api_server", "gpu_worker", "licence_proxy", "nats", "cloudwatch_agent", "licence_loader"
]
# An environment variable's name, or the shipped placeholder in front of one (REPLACE-ME_NATS_URL).
AddressVariable = Annotated[str, Field(pattern=r"^(?:REPLACE-ME_)?[A-Za-z_][A-Za-z0-9_]{0,254}$")]
SecretRef = Literal["api_key", "registry_credentials"]


class ServiceConfig(Strict):
    """One container of the self-hosted product. Image names, tags and most settings are Cartesia's and
    are not public: they come from your deployment bundle, into config, never into code."""

    _multiline: ClassVar[frozenset[str]] = frozenset({"command", "health_check", "environment"})

    source: ImageName = Field(description="image to copy from, without tag, e.g. <registry>/<path>/<name>")
    tag: ImageTag = Field(description="the tag it gets in your ECR (and the source's, without a digest)")
    digest: ImageDigest | None = Field(
        default=None,
        description="pin the image: 'sha256:<64 hex>' of its linux/amd64 manifest (not of a multi-arch index); "
        "the copy pulls source@digest and tasks run exactly this digest",
    )
    port: Annotated[int, Field(ge=1, le=65535)] | None = Field(
        default=None, description="the port it serves on (every service but cloudwatch_agent)"
    )
    # The largest GPU instance the ECS route could use (g6e.48xlarge: 192 vCPUs, 1,536 GiB).
    cpu: Annotated[int, Field(ge=128, le=196_608)] = 1024
    memory_mib: Annotated[int, Field(ge=256, le=1_572_864)] = 2048
    environment: dict[str, str] = Field(
        default={},
        description="plain settings, stored in the task definition; a name with a secret-like part (KEY, TOKEN, "
        "SECRET, PASSWORD, AUTH, ...) is refused: put those in `secrets`, or list it in `not_secrets`",
    )
    not_secrets: list[str] = Field(
        default=[],
        description="names in `environment` with a secret-like part that you have checked hold no secret (e.g. "
        "AUTH_ENABLED): kept as plain variables, and named as such in the task definition's acknowledgement",
    )
    secrets: dict[str, SecretRef] = Field(
        default={}, description="environment variable -> which secret (api_key or registry_credentials)"
    )
    command: list[str] = []
    metrics_port: Annotated[int, Field(ge=1, le=65535)] | None = Field(
        default=None, description="port of a Prometheus /metrics endpoint to scrape into CloudWatch"
    )
    health_check: list[str] = Field(
        default=[], description='container health check, e.g. ["CMD-SHELL", "curl -sf localhost:5000/status"]'
    )
    private_registry: bool = Field(
        default=True, description="pull with the registry credentials (false for public images)"
    )
    # The names are Cartesia's (not public); the values are the stack's Cloud Map addresses.
    nats_url_variable: AddressVariable | None = Field(
        default=None,
        description="api_server and gpu_worker: the variable the image reads NATS's address from; the stack "
        f"sets it to nats://nats.{SERVICE_NAMESPACE}:<nats port>",
    )
    licence_proxy_url_variable: AddressVariable | None = Field(
        default=None,
        description="api_server and gpu_worker: the variable the image reads the licence proxy's address from; "
        f"the stack sets it to http://licence-proxy.{SERVICE_NAMESPACE}:<licence_proxy port>",
    )


class SecretsConfig(Strict):
    api_key: str = Field(description="Secrets Manager name of the Cartesia API key")
    registry_credentials: str = Field(
        description='Secrets Manager name of {"username": "_json_key", "password": "<service-account JSON>"}'
    )
    create: bool = Field(
        default=False, description="create both secrets (placeholder values) instead of importing"
    )
    licence: str | None = Field(
        default=None,
        description="air-gapped mode: the secret with the offline licence (default sonic/<env>/cartesia-licence); "
        "`sonic-deploy licence upload` creates and writes it, before the first deploy",
    )


class EcsAlarmConfig(Strict):
    email: list[Email] = []
    worker_ttfa_p95_ms: Annotated[float, Field(gt=0, le=60_000)] = 200.0
    gpu_pinned_percent: Percent = 95.0
    gpu_pinned_minutes: Annotated[int, Field(ge=1, le=1440)] = 15
    capacity_minutes: Annotated[int, Field(ge=1, le=1440)] = Field(
        default=5, description="worker load above worker capacity for this long: capacity exhausted"
    )
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


class EcsApiConfig(Strict):
    """`[ecs.api]`: the internal load balancer in front of the API server. TLS terminates there (TCP to the
    API server behind it); outside the default environment it is on, and `tls = false` there is refused
    unless `allow_plaintext_outside_dev = true` accepts plain text on purpose."""

    tls: bool | None = Field(
        default=None,
        description="a TLS listener (wss://, https://) instead of plain TCP (ws://); default: on outside dev, "
        "off in dev. On, it needs domain_name and one certificate source: certificate_arn or private_ca_arn. "
        "Off outside dev only with allow_plaintext_outside_dev = true",
    )
    allow_plaintext_outside_dev: bool = Field(
        default=False,
        description="outside dev, accept tls = false: the API key, transcripts and audio cross the VPC in "
        "clear (ws://). Refused in dev (plain by default) and with TLS on (it would accept nothing)",
    )
    certificate_arn: str | None = Field(
        default=None,
        description="an ACM certificate (imported or issued) in the environment's Region that names domain_name",
    )
    private_ca_arn: str | None = Field(
        default=None,
        description="an AWS Private CA in the environment's Region: the stack has ACM issue domain_name's "
        "certificate from it (acm.PrivateCertificate), and renews it",
    )
    domain_name: str | None = Field(
        default=None,
        description="the name agents dial (the certificate names it; point it at the stack output "
        "LoadBalancerDnsName with a private DNS record): the host of ApiUrl when TLS is on",
    )
    deletion_protection: bool | None = Field(
        default=None, description="the load balancer refuses deletion; default: on outside dev, off in dev"
    )
    access_logs: bool = Field(
        default=True,
        description="NLB access logs to an S3 bucket the stack makes (ELB writes them for TLS listeners only)",
    )
    access_log_retention_days: Annotated[int, Field(ge=1, le=3650)] = Field(
        default=365, description="days an access log is kept before S3 lifecycle deletes it"
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


class EcsConfig(Strict):
    instance_type: str = "g6e.xlarge"
    availability_zone: str = Field(description="the one AZ of the GPU instances, placement group and NLB")
    licence_mode: Literal["connected", "air-gapped"] = "connected"
    nat_gateways: Annotated[int, Field(ge=0, le=1)] = 1
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
    licence_data_path: str = Field(
        default="/data", description="where the licence proxy keeps its offline licence (air-gapped mode)"
    )
    licence_content_type: str = Field(
        default="application/octet-stream",
        pattern=r"^[A-Za-z0-9!#$&^_.+-]+/[A-Za-z0-9!#$&^_.+-]+$",
        description="Content-Type of the licence upload (POST /license) in air-gapped mode",
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
    api: EcsApiConfig = EcsApiConfig()
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


class ProbeTaskConfig(Strict):
    """The probe's Fargate task in each stack: `sonic-deploy probe ... --in-vpc ENV` starts several, and the
    canary one on a schedule."""

    # One of Fargate's CPU and memory pairs: the loader checks the pair (rules.FARGATE_SIZES).
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
    probe: ProbeTaskConfig = ProbeTaskConfig()
    canary: CanaryConfig = CanaryConfig()


class InstanceType(Strict):
    """One row of config/instance_types.toml."""

    gpus: Annotated[int, Field(ge=1, le=64)]
    gpu: str
    vcpus: Annotated[int, Field(ge=1, le=1024)]
    memory_gib: Annotated[float, Field(gt=0, le=32_768)]
    local_storage: bool = Field(description="local NVMe instance storage (SageMaker then refuses a KmsKeyId)")


class GpuModel(Strict):
    memory_gib: Annotated[float, Field(gt=0, le=1024)]


class PublishedFigure(Strict):
    """A concurrency figure someone published, and where: the catalogue keeps no number without its source."""

    streams: Annotated[int, Field(ge=1, le=10_000)] = Field(description="concurrent Sonic streams")
    source: Annotated[str, Field(min_length=1)] = Field(description="who says so, and where")


class ConcurrencyFigure(PublishedFigure):
    """The figure the catalogue uses, and the published figures that contradict it."""

    alternatives: list[PublishedFigure] = Field(
        default=[], description="other published figures that contradict this one, each with its source"
    )


class VersionConcurrency(Strict):
    """`[concurrency."<sonic version>"]`: streams per GPU, and per instance where a listing states it."""

    per_gpu: dict[str, ConcurrencyFigure] = Field(description="GPU model -> streams one GPU serves")
    per_instance: dict[str, ConcurrencyFigure] = Field(
        default={}, description="instance type -> streams one instance serves (wins over per_gpu)"
    )


class InstanceCatalogue(Strict):
    gpus: dict[str, GpuModel]
    instance_types: dict[str, InstanceType]
    concurrency: dict[str, VersionConcurrency] = Field(
        min_length=1, description="Sonic version -> its concurrency figures"
    )


@dataclass(frozen=True)
class CatalogueStreams:
    """Streams one instance serves by the catalogue, for one Sonic version: the figure used, how it was
    reached (`source`), and the contradicting published figures, each as streams per instance."""

    streams: int
    source: str
    alternatives: tuple[PublishedFigure, ...] = ()


def catalogue_streams(
    catalogue: InstanceCatalogue, sonic_version: str, instance_type: str
) -> CatalogueStreams:
    """Concurrent streams one instance of a catalogued type serves under a Sonic version: the version's
    per-instance figure for the type if it has one, else GPUs x its per-GPU figure. The loader has checked
    that every version covers every GPU an instance type uses."""
    version = catalogue.concurrency[sonic_version]
    per_instance = version.per_instance.get(instance_type)
    if per_instance is not None:
        return CatalogueStreams(
            per_instance.streams,
            f"{sonic_version}, per {instance_type}: {per_instance.source}",
            tuple(per_instance.alternatives),
        )
    row = catalogue.instance_types[instance_type]
    per_gpu = version.per_gpu[row.gpu]
    return CatalogueStreams(
        row.gpus * per_gpu.streams,
        f"{sonic_version}, {row.gpus} x {row.gpu} at {per_gpu.streams} per GPU: {per_gpu.source}",
        tuple(
            PublishedFigure(
                streams=row.gpus * alt.streams,
                source=f"{row.gpus} x {row.gpu} at {alt.streams} per GPU: {alt.source}",
            )
            for alt in per_gpu.alternatives
        ),
    )


class ModelPackages(Strict):
    """config/model_packages.toml: `[versions."<sonic version>"]` with one `<region> = "<arn>"` per line."""

    versions: dict[str, dict[str, str]]
    unconfirmed: list[str] = Field(
        default=[],
        description="ARNs listed above that nobody has checked against a subscription: synth warns, deploy refuses",
    )
