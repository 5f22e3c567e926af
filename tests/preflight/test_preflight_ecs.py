"""ECS route checks against an `EcsTargets`: vCPU quota (Stubber), AZ offering, ECR images and secrets (moto)."""

from __future__ import annotations

import dataclasses

from sonic_deploy.config import Settings
from sonic_deploy.routes.ecs.preflight import (
    check_gpu_vcpu_quota,
    check_images,
    check_instance_offered,
    check_secrets,
)
from tests.preflight.conftest import ECS, FakeAws, push_image, run_gpu_instances


def test_vcpu_quota_covers_max_capacity_plus_blue_green(fake_aws: FakeAws, settings: Settings) -> None:
    # 4 instances x 2 (blue/green) x 4 vCPUs (g6e.xlarge) = 32 vCPUs.
    fake_aws.stub_vcpu_quota(32.0)
    result = check_gpu_vcpu_quota(fake_aws.clients.service_quotas, fake_aws.clients.ec2, settings, ECS)
    assert result.status == "pass"
    assert result.detail.startswith(
        "32 vCPUs (applied); needs 32: max_instances 4 x 2 (blue/green) x 4 vCPUs"
    )


def test_vcpu_quota_counts_gpu_instances_outside_our_stack(fake_aws: FakeAws, settings: Settings) -> None:
    run_gpu_instances(fake_aws.clients, "g6e.xlarge", 2, stack="sonic-dev-ecs")  # ours: inside the 32
    run_gpu_instances(fake_aws.clients, "g5.2xlarge", 1, stack="another-team")  # 8 vCPUs
    run_gpu_instances(fake_aws.clients, "m5.large", 3, stack="another-team")  # not a G instance
    fake_aws.stub_vcpu_quota(36.0)
    result = check_gpu_vcpu_quota(fake_aws.clients.service_quotas, fake_aws.clients.ec2, settings, ECS)
    assert result.status == "fail"
    assert result.detail == (
        "36 vCPUs (applied); needs 40: max_instances 4 x 2 (blue/green) x 4 vCPUs of g6e.xlarge, "
        "+ 8 vCPUs on 1 G/VT instances outside sonic-dev-ecs"
    )


def test_vcpu_quota_falls_back_to_the_default_and_fails_when_short(
    fake_aws: FakeAws, settings: Settings
) -> None:
    fake_aws.stub_vcpu_quota(8.0, applied=False)
    result = check_gpu_vcpu_quota(fake_aws.clients.service_quotas, fake_aws.clients.ec2, settings, ECS)
    assert result.status == "fail"
    assert result.detail.startswith("8 vCPUs (AWS default); needs 32")
    assert result.fix == (
        "request 32: aws service-quotas request-service-quota-increase --region us-east-2 --service-code ec2 "
        "--quota-code L-DB2E81BA --desired-value 32"
    )


def test_vcpu_quota_unknown_in_the_region(fake_aws: FakeAws, settings: Settings) -> None:
    fake_aws.stub_vcpu_quota(None, applied=False)
    result = check_gpu_vcpu_quota(fake_aws.clients.service_quotas, fake_aws.clients.ec2, settings, ECS)
    assert (result.status, result.detail) == ("fail", "Service Quotas does not know L-DB2E81BA in us-east-2")


def test_vcpu_quota_needs_the_type_in_the_catalogue(fake_aws: FakeAws, settings: Settings) -> None:
    result = check_gpu_vcpu_quota(
        fake_aws.clients.service_quotas,
        fake_aws.clients.ec2,
        settings,
        dataclasses.replace(ECS, instance_type="g5.12xlarge"),
    )
    assert result.status == "fail"
    assert result.fix == "add a row for g5.12xlarge (gpus, gpu, vcpus, memory_gib)"


def test_instance_type_offered_in_the_zone(fake_aws: FakeAws) -> None:
    (result,) = check_instance_offered(fake_aws.clients.ec2, ECS)
    assert (result.check, result.status) == ("g6e.xlarge offered in us-east-2a", "pass")
    (missing_zone,) = check_instance_offered(
        fake_aws.clients.ec2, dataclasses.replace(ECS, availability_zone="us-east-2z")
    )
    assert missing_zone.status == "fail"
    assert missing_zone.detail == "not offered in us-east-2z; offered in us-east-2a, us-east-2b, us-east-2c"
    (unknown,) = check_instance_offered(
        fake_aws.clients.ec2, dataclasses.replace(ECS, instance_type="g99.xlarge")
    )
    assert (unknown.status, unknown.detail) == ("fail", "g99.xlarge is not offered in any AZ of this Region")


def test_every_type_is_checked_in_the_zone_of_its_group(fake_aws: FakeAws) -> None:
    targets = dataclasses.replace(
        ECS,
        more_instance_types=["g6.xlarge", "g99.xlarge"],
        fallback_zone="us-east-2z",
        fallback_instance_types=["g6e.2xlarge"],
    )
    results = check_instance_offered(fake_aws.clients.ec2, targets)
    assert [(r.check, r.status) for r in results] == [
        ("g6e.xlarge offered in us-east-2a", "pass"),
        ("g6.xlarge offered in us-east-2a", "pass"),
        ("g99.xlarge offered in us-east-2a", "fail"),
        ("g6e.2xlarge offered in us-east-2z", "fail"),
    ]
    assert (
        results[2].fix
        == "choose another instance type (ecs.instance_type / ecs.capacity.instance_types) or Region"
    )
    assert results[3].fix == (
        "set ecs.capacity.fallback.availability_zone to one of us-east-2a, us-east-2b, us-east-2c, or drop "
        "g6e.2xlarge from ecs.capacity.fallback.instance_types"
    )


def test_vcpu_quota_sizes_each_group_for_its_largest_type_and_both_at_once(
    fake_aws: FakeAws, settings: Settings
) -> None:
    # First AZ: 4 x 2 x 8 (g6e.2xlarge, the largest of its types); fallback: 3 x 2 x 4 (g6.xlarge) = 64 + 24.
    targets = dataclasses.replace(
        ECS,
        more_instance_types=["g6e.2xlarge", "g6.xlarge"],
        fallback_zone="us-east-2b",
        fallback_instance_types=["g6.xlarge"],
        fallback_max_instances=3,
    )
    fake_aws.stub_vcpu_quota(87.0)
    result = check_gpu_vcpu_quota(fake_aws.clients.service_quotas, fake_aws.clients.ec2, settings, targets)
    assert result.status == "fail"
    assert result.detail == (
        "87 vCPUs (applied); needs 88: max_instances 4 x 2 (blue/green) x 8 vCPUs of g6e.2xlarge (the largest "
        "of g6e.xlarge, g6e.2xlarge, g6.xlarge) + fallback (us-east-2b) max_instances 3 x 2 (blue/green) x 4 "
        "vCPUs of g6.xlarge, + 0 vCPUs on 0 G/VT instances outside sonic-dev-ecs"
    )


def test_vcpu_quota_needs_every_type_in_the_catalogue(fake_aws: FakeAws, settings: Settings) -> None:
    targets = dataclasses.replace(ECS, fallback_zone="us-east-2b", fallback_instance_types=["g5.12xlarge"])
    result = check_gpu_vcpu_quota(fake_aws.clients.service_quotas, fake_aws.clients.ec2, settings, targets)
    assert (result.status, result.fix) == ("fail", "add a row for g5.12xlarge (gpus, gpu, vcpus, memory_gib)")


def test_images_present_missing_tag_and_missing_repository(fake_aws: FakeAws) -> None:
    push_image(fake_aws.clients, "sonic-api", "1.2.3")
    push_image(fake_aws.clients, "sonic-worker", "1.2.2")
    targets = dataclasses.replace(ECS, images=[*ECS.images, ("sonic-licence", "1.2.3")])
    results = check_images(fake_aws.clients.ecr, targets)
    assert [(r.check, r.status) for r in results] == [
        ("image sonic-api:1.2.3", "pass"),
        ("image sonic-worker:1.2.3", "fail"),
        ("image sonic-licence:1.2.3", "fail"),
    ]
    assert results[1].detail == "sonic-worker has no image tagged 1.2.3"
    assert results[2].detail == "no ECR repository sonic-licence"
    assert "aws ecr create-repository --repository-name sonic-licence" in results[2].fix


def test_secrets_present_missing_and_scheduled_for_deletion(fake_aws: FakeAws) -> None:
    secrets = fake_aws.clients.secretsmanager
    secrets.create_secret(Name="sonic/cartesia-api-key", SecretString="k")
    secrets.create_secret(Name="sonic/gcp-key", SecretString="k")
    secrets.delete_secret(SecretId="sonic/gcp-key", RecoveryWindowInDays=7)
    targets = dataclasses.replace(ECS, secret_names=["sonic/cartesia-api-key", "sonic/gcp-key", "sonic/none"])
    results = check_secrets(secrets, targets)
    assert [(r.check, r.status) for r in results] == [
        ("secret sonic/cartesia-api-key", "pass"),
        ("secret sonic/gcp-key", "fail"),
        ("secret sonic/none", "fail"),
    ]
    assert results[1].fix == "restore it: aws secretsmanager restore-secret --secret-id sonic/gcp-key"
    assert results[2].detail == "no secret named sonic/none"


def test_vcpu_quota_is_not_the_spot_one(fake_aws: FakeAws, settings: Settings) -> None:
    # No quota stubbed: a Spot group must not read (or pass on) the On-Demand quota.
    result = check_gpu_vcpu_quota(
        fake_aws.clients.service_quotas,
        fake_aws.clients.ec2,
        settings,
        dataclasses.replace(ECS, market="spot"),
    )
    assert result.status == "skipped"
    assert "All G and VT Spot Instance Requests" in result.detail
