"""A moto account for preflight, with botocore Stubbers for the calls moto does not implement
(Service Quotas' list and get calls; SageMaker's Marketplace subscription errors), and an account with no
capacity reservations for EC2's DescribeCapacityReservations (moto raises NotImplementedError)."""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Iterator
from typing import Any

import boto3
import botocore.session
import pytest
from botocore.awsrequest import AWSResponse, HTTPHeaders
from botocore.stub import Stubber
from moto import mock_aws

from sonic_deploy.config import Settings, load_settings
from sonic_deploy.preflight import AwsClients
from sonic_deploy.routes.ecs.preflight_targets import EcsTargets
from tests.cdk_context import ROOT
from tests.preflight.deployed_aws import Aws, stubbed

REGION = "us-east-2"
MOTO_ACCOUNT = "123456789012"
SONIC_ARN = "arn:aws:sagemaker:us-east-2:570011132906:model-package/Sonic3-Sagemaker-V5"


@dataclasses.dataclass
class FakeAws:
    clients: AwsClients
    quotas: Stubber
    _sagemaker: Stubber
    sagemaker_stubbed: bool = False

    @property
    def sagemaker(self) -> Stubber:
        """The SageMaker client answers from moto until a test stubs a call; then every call is stubbed."""
        if not self.sagemaker_stubbed:
            self._sagemaker.activate()
            self.sagemaker_stubbed = True
        return self._sagemaker

    def stub_sagemaker_package(self, status: str = "Completed") -> None:
        self.sagemaker.add_response(
            "describe_model_package",
            {
                "ModelPackageName": "Sonic3-Sagemaker-V5",
                "ModelPackageArn": SONIC_ARN,
                "CreationTime": "2026-01-01T00:00:00Z",
                "ModelPackageStatus": status,
                "ModelPackageStatusDetails": {"ValidationStatuses": [], "ImageScanStatuses": []},
                "CertifyForMarketplace": True,
            },
            {"ModelPackageName": SONIC_ARN},
        )

    def stub_sagemaker_error(self, code: str, message: str) -> None:
        self.sagemaker.add_client_error(
            "describe_model_package", service_error_code=code, service_message=message, http_status_code=400
        )

    def stub_other_endpoints(self, *endpoints: tuple[str, str, str, int]) -> None:
        """ListEndpoints and, for each active endpoint but ours, DescribeEndpoint and DescribeEndpointConfig.
        Each endpoint: (name, status, instance type, current instance count). moto cannot: it rejects
        ml.g6e types."""
        summaries = [
            {
                "EndpointName": name,
                "EndpointArn": f"arn:aws:sagemaker:{REGION}:{MOTO_ACCOUNT}:endpoint/{name}",
                "CreationTime": "2026-01-01T00:00:00Z",
                "LastModifiedTime": "2026-01-01T00:00:00Z",
                "EndpointStatus": status,
            }
            for name, status, _, _ in endpoints
        ]
        self.sagemaker.add_response("list_endpoints", {"Endpoints": summaries}, {})
        for name, status, instance_type, count in endpoints:
            if name == "sonic-dev" or status not in ("InService", "Updating"):
                continue
            self.sagemaker.add_response(
                "describe_endpoint",
                {
                    "EndpointName": name,
                    "EndpointArn": f"arn:aws:sagemaker:{REGION}:{MOTO_ACCOUNT}:endpoint/{name}",
                    "EndpointConfigName": f"{name}-config",
                    "ProductionVariants": [
                        {
                            "VariantName": "AllTraffic",
                            "CurrentInstanceCount": count,
                            "DesiredInstanceCount": count,
                        }
                    ],
                    "EndpointStatus": status,
                    "CreationTime": "2026-01-01T00:00:00Z",
                    "LastModifiedTime": "2026-01-01T00:00:00Z",
                },
                {"EndpointName": name},
            )
            self.sagemaker.add_response(
                "describe_endpoint_config",
                {
                    "EndpointConfigName": f"{name}-config",
                    "EndpointConfigArn": f"arn:aws:sagemaker:{REGION}:{MOTO_ACCOUNT}:endpoint-config/{name}-config",
                    "ProductionVariants": [
                        {"VariantName": "AllTraffic", "ModelName": "m", "InstanceType": instance_type}
                    ],
                    "CreationTime": "2026-01-01T00:00:00Z",
                },
                {"EndpointConfigName": f"{name}-config"},
            )

    def stub_endpoint_quota(self, name: str, value: float, applied: bool = True) -> None:
        quota = {
            "ServiceCode": "sagemaker",
            "ServiceName": "Amazon SageMaker",
            "QuotaArn": f"arn:aws:servicequotas:{REGION}:{MOTO_ACCOUNT}:sagemaker/L-TEST0001",
            "QuotaCode": "L-TEST0001",
            "QuotaName": name,
            "Value": value,
            "Unit": "None",
            "Adjustable": True,
            "GlobalQuota": False,
        }
        other = {
            **quota,
            "QuotaCode": "L-OTHER001",
            "QuotaName": "ml.g5.xlarge for endpoint usage",
            "Value": 9.0,
        }
        params = {"ServiceCode": "sagemaker"}
        if applied:
            # Two pages, the wanted quota on the second: the look-up must follow NextToken.
            self.quotas.add_response("list_service_quotas", {"Quotas": [other], "NextToken": "2"}, params)
            self.quotas.add_response("list_service_quotas", {"Quotas": [quota]}, {**params, "NextToken": "2"})
        else:
            self.quotas.add_response("list_service_quotas", {"Quotas": [other]}, params)
            self.quotas.add_response("list_aws_default_service_quotas", {"Quotas": [quota]}, params)

    def stub_vcpu_quota(self, value: float | None, applied: bool = True) -> None:
        params = {"ServiceCode": "ec2", "QuotaCode": "L-DB2E81BA"}
        quota = {
            "ServiceCode": "ec2",
            "QuotaCode": "L-DB2E81BA",
            "QuotaName": "Running On-Demand G and VT instances",
            "Value": value,
            "Unit": "None",
        }
        if applied:
            self.quotas.add_response("get_service_quota", {"Quota": quota}, params)
            return
        self.quotas.add_client_error("get_service_quota", "NoSuchResourceException", "no applied value")
        if value is None:
            self.quotas.add_client_error(
                "get_aws_default_service_quota", "NoSuchResourceException", "unknown"
            )
        else:
            self.quotas.add_response("get_aws_default_service_quota", {"Quota": quota}, params)


def no_capacity_reservations(**_: Any) -> tuple[AWSResponse, dict[str, Any]]:
    """Answers DescribeCapacityReservations before the call reaches moto, as a Stubber does (a before-call
    handler's answer replaces the request): an account that has reserved nothing."""
    return AWSResponse("https://ec2.us-east-2.amazonaws.com/", 200, HTTPHeaders(), None), {
        "CapacityReservations": []
    }


@functools.cache
def _botocore() -> botocore.session.Session:
    """One botocore session for all the tests' clients: it reads each service's model once (a fresh
    session's nine clients cost 0.3-0.6 CPU-s), and moto answers whichever session asks."""
    return botocore.session.get_session()


@pytest.fixture
def fake_aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeAws]:
    # moto would load its 1,288 default images into each region's EC2 at the first EC2 call of each test
    # (1.3-2 CPU-s); no check reads images.
    monkeypatch.setenv("MOTO_EC2_LOAD_DEFAULT_AMIS", "false")
    with mock_aws():
        session = boto3.Session(botocore_session=_botocore(), region_name=REGION)
        clients = AwsClients.from_session(session, REGION)
        clients.ec2.meta.events.register(
            "before-call.ec2.DescribeCapacityReservations",
            no_capacity_reservations,  # type: ignore[arg-type]  # botocore-stubs types handlers as -> None
        )
        with Stubber(clients.service_quotas) as quotas:
            fake = FakeAws(clients, quotas, Stubber(clients.sagemaker))
            yield fake
            quotas.assert_no_pending_responses()
            if fake.sagemaker_stubbed:
                fake.sagemaker.assert_no_pending_responses()
                fake.sagemaker.deactivate()


@pytest.fixture
def settings() -> Settings:
    return load_settings(ROOT / "config", "dev")


def with_account(settings: Settings, account: str | None) -> Settings:
    environment = settings.environment.model_copy(update={"account": account})
    return dataclasses.replace(settings, environment=environment)


def with_capacity(settings: Settings, **capacity: Any) -> Settings:
    """`settings` with `[sagemaker.capacity]` fields replaced (fallback_types, ml_reservation_arn, ...)."""
    sagemaker = settings.environment.sagemaker
    changed = sagemaker.model_copy(update={"capacity": sagemaker.capacity.model_copy(update=capacity)})
    environment = settings.environment.model_copy(update={"sagemaker": changed})
    return dataclasses.replace(settings, environment=environment)


def bootstrap_template(version: str) -> str:
    return json.dumps(
        {
            "Resources": {
                "CdkBootstrapVersion": {
                    "Type": "AWS::SSM::Parameter",
                    "Properties": {
                        "Type": "String",
                        "Name": "/cdk-bootstrap/hnb659fds/version",
                        "Value": version,
                    },
                }
            },
            "Outputs": {"BootstrapVersion": {"Value": version}},
        }
    )


def push_image(clients: AwsClients, repository: str, tag: str) -> None:
    clients.ecr.create_repository(repositoryName=repository)
    manifest: dict[str, Any] = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
        "config": {
            "mediaType": "application/vnd.docker.container.image.v1+json",
            "size": 1,
            "digest": "sha256:1",
        },
        "layers": [],
    }
    clients.ecr.put_image(repositoryName=repository, imageManifest=json.dumps(manifest), imageTag=tag)


def run_gpu_instances(clients: AwsClients, instance_type: str, count: int, stack: str) -> None:
    """Instances as an Auto Scaling group of stack `stack` leaves them: tagged with the stack's name."""
    clients.ec2.run_instances(
        ImageId="ami-0123456789abcdef0",  # moto runs any image id; its default images are not loaded
        InstanceType=instance_type,  # type: ignore[arg-type]
        MinCount=count,
        MaxCount=count,
        TagSpecifications=[
            {"ResourceType": "instance", "Tags": [{"Key": "aws:cloudformation:stack-name", "Value": stack}]}
        ],
    )


ECS = EcsTargets(
    instance_type="g6e.xlarge",
    availability_zone="us-east-2a",
    max_instances=4,
    images=[("sonic-api", "1.2.3"), ("sonic-worker", "1.2.3")],
    secret_names=["sonic/cartesia-api-key"],
)


@pytest.fixture
def aws() -> Iterator[Aws]:
    """STS, CloudFormation, SageMaker, CloudWatch and ECS answered by Stubbers alone (tests/preflight/deployed_aws.py)."""
    with stubbed() as answered:
        yield answered
