"""`sonic-deploy preflight --after-deploy sagemaker`: what only the deployed endpoint can show. docs/capacity.md
("Marketplace, network isolation, the VPC", First deploy) lists what no AWS document confirms about instance
pools; these checks ask the stack, the endpoint, CloudWatch's list of metrics and the scaling policies' alarms.
Read-only: cloudformation:DescribeStacks, sagemaker:DescribeEndpoint and DescribeEndpointConfig,
cloudwatch:ListMetrics and DescribeAlarms."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from botocore.exceptions import ClientError

from sonic_deploy.config import Settings
from sonic_deploy.preflight.deployed_stack import check_route_stack
from sonic_deploy.preflight.results import CheckResult, aws_error, error_message, failed, passed, skipped
from sonic_deploy.routes.sagemaker import outputs

if TYPE_CHECKING:
    from mypy_boto3_cloudformation import CloudFormationClient
    from mypy_boto3_cloudwatch import CloudWatchClient
    from mypy_boto3_cloudwatch.type_defs import MetricAlarmTypeDef
    from mypy_boto3_sagemaker import SageMakerClient
    from mypy_boto3_sagemaker.type_defs import DescribeEndpointOutputTypeDef, ProductionVariantSummaryTypeDef

    from sonic_deploy.preflight.runner import AwsClients

ROUTE = "sagemaker"
# What the pools' stream policy and alarms read per type (parts.py `_tracked`, EndpointAlarms). Restated, since
# this module may not import aws_cdk; tests/routes/sagemaker/test_capacity_stack.py checks them on a template.
NAMESPACE = "AWS/SageMaker"
CONCURRENCY = "ConcurrentRequestsPerModel"
PER_TYPE = ("EndpointName", "VariantName", "InstanceType")
# The variant's target-tracking policies, streams and GPU (parts.py `_tracked`), each with its own alarms.
POLICIES = 2
# An endpoint in one of these states exists and is changing (an update, a scale, maintenance, a rollback back
# to InService): botocore's SageMaker model, EndpointStatus.
CHANGING = ("Updating", "SystemUpdating", "RollingBack")
# A name with no endpoint: ValidationException `Could not find endpoint "<ARN>".`, as users' logs quote it for
# DescribeEndpoint and getmoto/moto's tests/test_sagemaker/test_sagemaker_endpoint.py asserts it (there for
# UpdateEndpointWeightsAndCapacities).
NO_ENDPOINT = "Could not find endpoint"
SAY_WHY = "`aws sagemaker describe-endpoint --endpoint-name {0}` shows why; fix it and deploy again"


@dataclass(frozen=True)
class Deployed:
    """The stack's endpoint and variant, from its outputs EndpointName and VariantName."""

    endpoint: str
    variant: str

    @property
    def resource_id(self) -> str:
        """Application Auto Scaling's id of the variant, as the stack's scalable target names it."""
        return f"endpoint/{self.endpoint}/variant/{self.variant}"

    @property
    def alarm_prefix(self) -> str:
        """Application Auto Scaling names a target-tracking policy's alarms TargetTracking-<resource id>-AlarmHigh-
        <uuid> and -AlarmLow-<uuid> (botocore's application-autoscaling examples-1.json, PutScalingPolicy; for a
        SageMaker variant, awslabs/stable-diffusion-aws-extension, docs/en/user-guide/endpoint-autoscaling.md)."""
        return f"TargetTracking-{self.resource_id}-Alarm"


def after_deploy(clients: AwsClients, settings: Settings) -> list[CheckResult]:
    """The stack and its endpoint first (the rest read them), then the instance pools, each pool type's
    concurrency series and the scaling policies' alarms."""
    stack, deployed = check_stack(clients.cloudformation, settings)
    if deployed is None:
        return [stack, skipped("the endpoint's checks", "they read the deployed stack's outputs")]
    endpoint_check, endpoint = check_endpoint(clients.sagemaker, deployed)
    if endpoint is None:
        return [stack, endpoint_check, skipped("pools, metrics and alarms", "they need the endpoint")]
    return [
        stack,
        endpoint_check,
        check_instance_pools(clients.sagemaker, settings, deployed, endpoint),
        *check_pool_metrics(clients.cloudwatch, settings, deployed),
        check_scaling_alarms(clients.cloudwatch, deployed, settings.environment_name),
    ]


def check_stack(
    cloudformation: CloudFormationClient, settings: Settings
) -> tuple[CheckResult, Deployed | None]:
    result, stack = check_route_stack(
        cloudformation, settings, ROUTE, (outputs.ENDPOINT_NAME, outputs.VARIANT_NAME)
    )
    if stack is None:
        return result, None
    deployed = Deployed(stack.outputs[outputs.ENDPOINT_NAME], stack.outputs[outputs.VARIANT_NAME])
    return passed(
        result.check, f"{stack.status}: endpoint {deployed.endpoint}, variant {deployed.variant}"
    ), deployed


def check_endpoint(
    sagemaker: SageMakerClient, deployed: Deployed
) -> tuple[CheckResult, DescribeEndpointOutputTypeDef | None]:
    """The endpoint exists, has the variant and is in service (or changing); its description for the rest."""
    name = deployed.endpoint
    check = f"endpoint {name}"
    try:
        endpoint = sagemaker.describe_endpoint(EndpointName=name)
    except ClientError as error:
        if NO_ENDPOINT in error_message(error):
            return failed(
                check,
                f"the stack names it, SageMaker has none ({error_message(error)})",
                "it was deleted outside CloudFormation, which does not re-create it: `make destroy` and "
                "`make deploy` the route (`aws cloudformation detect-stack-drift` confirms it)",
            ), None
        return aws_error(check, error, "sagemaker:DescribeEndpoint"), None
    status = endpoint.get("EndpointStatus", "unknown")
    variant = _variant(endpoint, deployed.variant)
    if status == "Creating":
        wait = f"aws sagemaker wait endpoint-in-service --endpoint-name {name}"
        return failed(check, "Creating", f"wait until it is InService (`{wait}`), then re-run"), None
    if status not in ("InService", *CHANGING):
        reason = endpoint.get("FailureReason")
        return failed(check, status + (f": {reason}" if reason else ""), SAY_WHY.format(name)), None
    if variant is None:
        return failed(check, f"{status}, without the variant {deployed.variant}", SAY_WHY.format(name)), None
    count = variant.get("CurrentInstanceCount", "?")
    return passed(check, f"{status}: variant {deployed.variant}, {count} instance(s)"), endpoint


def check_instance_pools(
    sagemaker: SageMakerClient,
    settings: Settings,
    deployed: Deployed,
    endpoint: DescribeEndpointOutputTypeDef,
) -> CheckResult:
    """The variant has the configured pools, by priority as configured (DescribeEndpointConfig: the summary
    has no priority), and names the configured training plan."""
    check = f"instance pools of {deployed.endpoint}"
    wanted = [pool.instance_type for pool in settings.sagemaker_pools]
    plan = settings.environment.sagemaker.capacity.ml_reservation_arn
    if len(wanted) == 1 and plan is None:
        return skipped(
            check,
            f"none configured (no sagemaker.capacity fallback_types or ml_reservation_arn): {wanted[0]} only",
        )
    if endpoint.get("EndpointStatus") in CHANGING:  # EndpointConfigName is still the one being replaced
        return skipped(
            check, f"the endpoint is {endpoint.get('EndpointStatus')}: re-run once it is InService"
        )
    variant = _variant(endpoint, deployed.variant)  # there: check_endpoint passed
    problems: list[str] = []
    found: list[str] = []
    if len(wanted) > 1:
        config_name = endpoint.get("EndpointConfigName", "")
        try:
            config = sagemaker.describe_endpoint_config(EndpointConfigName=config_name)
        except ClientError as error:
            return aws_error(check, error, "sagemaker:DescribeEndpointConfig")
        pools = [
            pool
            for v in config.get("ProductionVariants", [])
            if v.get("VariantName") == deployed.variant
            for pool in v.get("InstancePools", [])
        ]
        by_priority = [p.get("InstanceType", "?") for p in sorted(pools, key=lambda p: p.get("Priority", 0))]
        summaries = variant.get("InstancePools", []) if variant else []
        running = {str(p.get("InstanceType")): p.get("CurrentInstanceCount", 0) for p in summaries}
        if by_priority != wanted:
            shown = ", ".join(by_priority) or "none"
            problems.append(
                f"endpoint config {config_name} has pools {shown} by priority, not {', '.join(wanted)}"
            )
        if not running:
            problems.append("describe-endpoint shows no InstancePools on the variant")
        elif lacking := [t for t in wanted if t not in running]:
            problems.append(f"describe-endpoint shows no pool of {', '.join(lacking)}")
        found.append(", ".join(f"{t} ({running.get(t, 0)} running)" for t in wanted) + " by priority")
    if plan is not None:
        applied = variant.get("CapacityReservationConfig", {}).get("MlReservationArn") if variant else None
        if applied != plan:
            problems.append(f"its CapacityReservationConfig names {applied or 'no reservation'}, not {plan}")
        found.append(f"instances from {plan}")
    if problems:
        return failed(
            check,
            "; ".join(problems),
            f"`make diff ENV={settings.environment_name} ROUTE={ROUTE} LIVE=1`: deploy what differs; if a deploy "
            "leaves them off, SageMaker does not apply them here: remove them from [sagemaker.capacity] in "
            f"{settings.environment_file}",
        )
    return passed(check, "; ".join(found))


def check_pool_metrics(
    cloudwatch: CloudWatchClient, settings: Settings, deployed: Deployed
) -> list[CheckResult]:
    """Per pool type, a ConcurrentRequestsPerModel series of exactly the stack's metric math's dimensions
    (docs/capacity.md, First deploy: UNVERIFIED). None with one type: its policies read the variant's own."""
    wanted = [pool.instance_type for pool in settings.sagemaker_pools]
    if len(wanted) == 1:
        return []
    try:
        series = list(_dimension_sets(cloudwatch, deployed.endpoint))
    except ClientError as error:
        return [aws_error(f"{CONCURRENCY} by instance type", error, "cloudwatch:ListMetrics")]
    return [_type_series(instance_type, series, deployed, settings) for instance_type in wanted]


def _type_series(
    instance_type: str, series: list[dict[str, str]], deployed: Deployed, settings: Settings
) -> CheckResult:
    check = f"{CONCURRENCY} of {instance_type}"
    exact = dict(zip(PER_TYPE, (deployed.endpoint, deployed.variant, instance_type), strict=True))
    if exact in series:
        return passed(check, f"a series with exactly {', '.join(PER_TYPE)}, as the pools' scaling reads it")
    of_type = [s for s in series if s.get("InstanceType") == instance_type]
    if of_type:
        return failed(
            check,
            f"no series with exactly {', '.join(PER_TYPE)}; its series have {_names(of_type)}",
            f"the pools' scaling and alarms match none of them: remove sagemaker.capacity.fallback_types in "
            f"{settings.environment_file}, "
            "deploy, and report the dimensions (docs/capacity.md, First deploy)",
        )
    return skipped(
        check,
        f"no data yet (the endpoint's series have {_names(series) or 'none'}): a type without instances has "
        "none; send traffic and re-run",
    )


def check_scaling_alarms(cloudwatch: CloudWatchClient, deployed: Deployed, environment: str) -> CheckResult:
    """Each metric the variant's target-tracking policies watch has an alarm with data: a policy whose alarms
    all lack data never scales (with pools: its metric math matches no series)."""
    prefix = deployed.alarm_prefix
    check = f"target-tracking alarms of {deployed.resource_id}"
    try:
        alarms = list(_alarms(cloudwatch, prefix))
    except ClientError as error:
        return aws_error(check, error, "cloudwatch:DescribeAlarms")
    if not alarms:
        return failed(
            check,
            f"no alarm named {prefix}*: the stack's scaling policies made none",
            "`aws application-autoscaling describe-scaling-policies --service-namespace sagemaker --resource-id "
            f"{deployed.resource_id}` lists the policies and their alarms; deploy again if it lists none",
        )
    states: dict[str, list[str]] = defaultdict(list)
    for alarm in alarms:
        kind = str(alarm.get("AlarmName", ""))[len(prefix) :].split("-")[0]  # High or Low
        states[_watches(alarm)].append(f"{kind} {alarm.get('StateValue', '?')}")
    shown = "; ".join(f"{metric}: {', '.join(sorted(seen))}" for metric, seen in sorted(states.items()))
    if len(states) < POLICIES:  # by what each watches: a predefined metric's alarm name is UNVERIFIED
        return failed(
            check,
            f"alarms of {len(states)} of the variant's {POLICIES} target-tracking policies (streams, GPU): {shown}",
            "`aws application-autoscaling describe-scaling-policies --service-namespace sagemaker --resource-id "
            f"{deployed.resource_id}` lists the policies and their alarms; deploy again if one is missing",
        )
    blind = [metric for metric, seen in sorted(states.items()) if all("INSUFFICIENT_DATA" in s for s in seen)]
    if blind:
        return failed(
            check,
            f"no data for {', '.join(blind)} ({shown})",
            f"send traffic (`sonic-deploy probe sagemaker --in-vpc {environment}`) and re-run in a few minutes; if it stays "
            "so with pools, the checks above say which series is missing",
        )
    return passed(check, shown)


def _variant(endpoint: DescribeEndpointOutputTypeDef, name: str) -> ProductionVariantSummaryTypeDef | None:
    return next((v for v in endpoint.get("ProductionVariants", []) if v.get("VariantName") == name), None)


def _dimension_sets(cloudwatch: CloudWatchClient, endpoint: str) -> Iterator[dict[str, str]]:
    """The dimensions of each ConcurrentRequestsPerModel series of the endpoint (ListMetrics, every page)."""
    pages = cloudwatch.get_paginator("list_metrics").paginate(
        Namespace=NAMESPACE, MetricName=CONCURRENCY, Dimensions=[{"Name": "EndpointName", "Value": endpoint}]
    )
    for page in pages:
        for metric in page.get("Metrics", []):
            yield {d["Name"]: d.get("Value", "") for d in metric.get("Dimensions", [])}


def _alarms(cloudwatch: CloudWatchClient, prefix: str) -> Iterator[MetricAlarmTypeDef]:
    for page in cloudwatch.get_paginator("describe_alarms").paginate(AlarmNamePrefix=prefix):
        yield from page.get("MetricAlarms", [])


def _names(series: list[dict[str, str]]) -> str:
    """Each distinct set of dimension names, e.g. {EndpointName, InstanceType, VariantName}."""
    return " and ".join("{" + ", ".join(names) + "}" for names in sorted({tuple(sorted(s)) for s in series}))


def _watches(alarm: MetricAlarmTypeDef) -> str:
    """The metric an alarm watches: its MetricName, or the metrics its math reads (a pooled policy's)."""
    if alarm.get("MetricName"):
        return str(alarm["MetricName"])
    queries = alarm.get("Metrics", [])
    names = {q.get("MetricStat", {}).get("Metric", {}).get("MetricName") for q in queries}
    return "+".join(sorted(name for name in names if name)) or "metric math"
