"""ApiLoadBalancer: on a bare stack, what a route hands it (the API server's port, security group, targets);
in the ECS stack, the TLS listener (policy, certificate), access logs to the stack's bucket, deletion
protection by environment, the security group's CIDR, and the URL the stack outputs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App, Duration, Environment, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk.assertions import Annotations, Match, Template

from sonic_deploy.constructs.api_load_balancer import ApiLoadBalancer
from sonic_deploy.constructs.placement import SingleAzPlacement
from tests.conftest import CONFIG_DIR, rendered, resources_of, synthesize_from

PRIVATE_CA = (
    "arn:aws:acm-pca:us-east-2:210987654321:certificate-authority/0b4f6e3a-1c2d-4e5f-8a9b-0c1d2e3f4a5b"
)
CERTIFICATE = "arn:aws:acm:us-east-2:210987654321:certificate/5e6f7a8b-9c0d-4e1f-a2b3-c4d5e6f7a8b9"
DOMAIN = "sonic.stage.internal.example.com"


def _bare(stack: Stack, api_group: ec2.ISecurityGroup) -> ApiLoadBalancer:
    """A plain listener in front of port 5000 behind `api_group`, no targets: what a route whose own
    controller registers the API server into the target group (by its ARN) hands it."""
    vpc = ec2.Vpc.from_vpc_attributes(
        stack,
        "Vpc",
        vpc_id="vpc-0123456789abcdef0",
        availability_zones=["us-east-2a", "us-east-2b"],
        private_subnet_ids=["subnet-0aaaaaaaaaaaaaaa0", "subnet-0bbbbbbbbbbbbbbb0"],
    )
    placement = SingleAzPlacement(
        stack, "Placement", subnets=vpc.private_subnets, availability_zone="us-east-2a"
    )
    return ApiLoadBalancer(
        stack,
        "Api",
        vpc=vpc,
        vpc_cidr="10.0.0.0/16",
        placement=placement,
        api_port=5000,
        api_security_group=api_group,
        api_targets=[],
        config_table="route.api",
        listener_port=80,
        idle_timeout=Duration.seconds(400),
        deregistration_delay=Duration.seconds(300),
        certificate=None,
        access_logs=None,
        deletion_protection=False,
    )


def test_on_a_bare_stack_it_fronts_the_port_and_group_it_is_handed_with_no_targets_of_its_own() -> None:
    stack = Stack(App(), "Test", env=Environment(account="111111111111", region="us-east-2"))
    api_group = ec2.SecurityGroup(stack, "ApiGroup", vpc=ec2.Vpc(stack, "Other"), allow_all_outbound=False)
    load_balancer = _bare(stack, api_group)
    template = Template.from_stack(stack)
    (target_group,) = resources_of(template, "AWS::ElasticLoadBalancingV2::TargetGroup").values()
    props = target_group["Properties"]
    assert (props["Port"], props["HealthCheckPort"], props["TargetType"]) == (5000, "5000", "ip")
    assert "Targets" not in props
    lb_group = stack.resolve(load_balancer.security_group.security_group_id)
    (ingress,) = resources_of(template, "AWS::EC2::SecurityGroupIngress").values()
    assert ingress["Properties"]["SourceSecurityGroupId"] == lb_group
    assert ingress["Properties"]["GroupId"] == stack.resolve(api_group.security_group_id)
    assert ingress["Properties"]["FromPort"] == ingress["Properties"]["ToPort"] == 5000
    (egress,) = resources_of(template, "AWS::EC2::SecurityGroupEgress").values()
    assert egress["Properties"]["Description"] == "to the API server"
    # The findings and the warning name the route's table, not the ECS route's.
    listener = load_balancer.listener.node
    (warning,) = Annotations.from_stack(stack).find_warning(f"/{listener.path}", Match.any_value())
    assert "(route.api.tls)" in str(warning.entry.data)
    reasons = json.dumps([m.data for m in load_balancer.load_balancer.node.metadata])
    assert "route.api.access_logs = false" in reasons and "route.api.deletion_protection" in reasons
    assert "ecs." not in reasons


def _environment(tmp: Path, name: str, api_table: str) -> Path:
    """config/ with environment `name`: dev's ECS route with its [ecs.api] table replaced by `api_table`,
    an account and an on-call address (required outside dev)."""
    config = tmp / "config"
    shutil.copytree(CONFIG_DIR, config)
    text = (config / "environments/dev.toml").read_text()
    start = text.index("[ecs.api]")
    end = text.index("[ecs.secrets]")
    text = 'account = "210987654321"\n' + text[:start] + api_table + "\n" + text[end:]
    text = text.replace("[sagemaker.alarms]\n", '[sagemaker.alarms]\nemail = ["oncall@sonic.test"]\n')
    text = text.replace("[ecs.secrets]\n", '[ecs.alarms]\nemail = ["oncall@sonic.test"]\n\n[ecs.secrets]\n')
    (config / f"environments/{name}.toml").write_text(text)
    return config


@pytest.fixture(scope="module")
def private_ca_stack(tmp_path_factory: pytest.TempPathFactory) -> Stack:
    """A non-dev environment left at the defaults: TLS and deletion protection on, a Private CA's certificate
    (and the canary off: its probe task trusts public CAs only, and config refuses it with a private one)."""
    table = f'[ecs.api]\nprivate_ca_arn = "{PRIVATE_CA}"\ndomain_name = "{DOMAIN}"\n'
    config = _environment(tmp_path_factory.mktemp("private-ca"), "stage", table)
    stage = config / "environments/stage.toml"
    stage.write_text(stage.read_text().replace("# enabled = true", "enabled = false", 1))
    return synthesize_from(config, "stage", routes=["ecs"])["ecs"]


@pytest.fixture(scope="module")
def private_ca(private_ca_stack: Stack) -> Template:
    return Template.from_stack(private_ca_stack)


@pytest.fixture(scope="module")
def plain_stage(tmp_path_factory: pytest.TempPathFactory) -> Stack:
    """Outside dev, plain text accepted on purpose."""
    table = "[ecs.api]\ntls = false\nallow_plaintext_outside_dev = true\n"
    return synthesize_from(
        _environment(tmp_path_factory.mktemp("plain"), "stage", table), "stage", routes=["ecs"]
    )["ecs"]


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> Template:
    table = (
        f'[ecs.api]\ncertificate_arn = "{CERTIFICATE}"\ndomain_name = "{DOMAIN}"\n'
        "access_logs = false\ndeletion_protection = false\n"
    )
    config = _environment(tmp_path_factory.mktemp("imported"), "stage", table)
    return Template.from_stack(synthesize_from(config, "stage", routes=["ecs"])["ecs"])


def _listener(template: Template) -> dict[str, Any]:
    (listener,) = resources_of(template, "AWS::ElasticLoadBalancingV2::Listener").values()
    return dict(listener["Properties"])


def _load_balancer_attributes(template: Template) -> dict[str, str]:
    (lb,) = resources_of(template, "AWS::ElasticLoadBalancingV2::LoadBalancer").values()
    return {a["Key"]: a["Value"] for a in lb["Properties"].get("LoadBalancerAttributes", [])}


def test_a_tls_listener_with_the_current_tls13_policy_and_the_private_cas_certificate(
    private_ca: Template,
) -> None:
    listener = _listener(private_ca)
    assert listener["Protocol"] == "TLS" and listener["Port"] == 443
    assert listener["SslPolicy"] == "ELBSecurityPolicy-TLS13-1-2-Res-PQ-2025-09"
    (certificate,) = listener["Certificates"]
    (issued_id,) = resources_of(private_ca, "AWS::CertificateManager::Certificate")
    assert certificate == {"CertificateArn": {"Ref": issued_id}}
    private_ca.has_resource_properties(
        "AWS::CertificateManager::Certificate",
        {"DomainName": DOMAIN, "CertificateAuthorityArn": PRIVATE_CA},
    )
    # TLS ends at the load balancer: the API server's target group stays TCP, health-checked over HTTP.
    private_ca.has_resource_properties(
        "AWS::ElasticLoadBalancingV2::TargetGroup",
        {"Protocol": "TCP", "Port": 5000, "HealthCheckProtocol": "HTTP", "HealthCheckPath": "/status"},
    )
    # A TLS listener's idle timeout is AWS's fixed 350 s: the TCP attribute is not set on it.
    assert "ListenerAttributes" not in listener


def test_an_imported_certificate_is_attached_by_its_arn(imported: Template) -> None:
    listener = _listener(imported)
    assert listener["Protocol"] == "TLS"
    assert listener["Certificates"] == [{"CertificateArn": CERTIFICATE}]
    assert resources_of(imported, "AWS::CertificateManager::Certificate") == {}


def test_dev_keeps_plain_tcp(ecs_template: Template) -> None:
    listener = _listener(ecs_template)
    assert listener["Protocol"] == "TCP" and listener["Port"] == 80
    assert "Certificates" not in listener and "SslPolicy" not in listener


def _access_log(template: Template, type_name: str) -> dict[str, Any]:
    """The stack's resources of that type but the probe's (its bucket, probe_task.py)."""
    return {i: r for i, r in resources_of(template, type_name).items() if not i.startswith("Probe")}


def test_access_logs_go_to_the_stacks_own_bucket(private_ca: Template, ecs_template: Template) -> None:
    for template in (private_ca, ecs_template):
        attributes = _load_balancer_attributes(template)
        assert attributes["access_logs.s3.enabled"] == "true"
        assert attributes["access_logs.s3.prefix"] == "api"
        (bucket_id,) = _access_log(template, "AWS::S3::Bucket")
        (lb,) = resources_of(template, "AWS::ElasticLoadBalancingV2::LoadBalancer").values()
        bucket_attribute = next(
            a for a in lb["Properties"]["LoadBalancerAttributes"] if a["Key"] == "access_logs.s3.bucket"
        )
        assert bucket_attribute["Value"] == {"Ref": bucket_id}


def test_the_log_bucket_is_encrypted_private_versioned_tls_only_and_expires_logs(
    private_ca: Template,
) -> None:
    (bucket,) = _access_log(private_ca, "AWS::S3::Bucket").values()
    props = bucket["Properties"]
    (rule,) = props["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert rule["ServerSideEncryptionByDefault"]["SSEAlgorithm"] == "aws:kms"
    (key_id,) = resources_of(private_ca, "AWS::KMS::Key")
    assert rule["ServerSideEncryptionByDefault"]["KMSMasterKeyID"] == {"Fn::GetAtt": [key_id, "Arn"]}
    assert rule["BucketKeyEnabled"] is True
    assert props["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True,
        "BlockPublicPolicy": True,
        "IgnorePublicAcls": True,
        "RestrictPublicBuckets": True,
    }
    assert props["VersioningConfiguration"] == {"Status": "Enabled"}
    (lifecycle,) = props["LifecycleConfiguration"]["Rules"]
    assert lifecycle["ExpirationInDays"] == 365 and lifecycle["Status"] == "Enabled"
    assert bucket["DeletionPolicy"] == "RetainExceptOnCreate"
    (policy,) = _access_log(private_ca, "AWS::S3::BucketPolicy").values()
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    denials = [s for s in statements if s["Effect"] == "Deny"]
    assert {"Bool": {"aws:SecureTransport": "false"}} in [s["Condition"] for s in denials]
    assert {"NumericLessThan": {"s3:TlsVersion": 1.2}} in [s["Condition"] for s in denials]
    writes = [s for s in statements if s.get("Principal") == {"Service": "delivery.logs.amazonaws.com"}]
    assert {s["Action"] for s in writes} == {"s3:PutObject", "s3:GetBucketAcl"}


def test_the_key_lets_log_delivery_encrypt_for_this_account_only(private_ca: Template) -> None:
    (key,) = resources_of(private_ca, "AWS::KMS::Key").values()
    (statement,) = [
        s for s in key["Properties"]["KeyPolicy"]["Statement"] if s.get("Sid") == "AllowElbAccessLogDelivery"
    ]
    assert statement["Principal"] == {"Service": "delivery.logs.amazonaws.com"}
    assert set(statement["Condition"]) == {"StringEquals", "ArnLike"}
    assert statement["Condition"]["StringEquals"] == {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}


def test_access_logs_can_be_turned_off(imported: Template) -> None:
    assert "access_logs.s3.enabled" not in _load_balancer_attributes(imported)
    assert _access_log(imported, "AWS::S3::Bucket") == {}


def test_deletion_protection_on_outside_dev_off_in_dev_unless_configured(
    private_ca: Template, imported: Template, ecs_template: Template
) -> None:
    assert _load_balancer_attributes(private_ca)["deletion_protection.enabled"] == "true"
    assert _load_balancer_attributes(imported).get("deletion_protection.enabled", "false") == "false"
    assert _load_balancer_attributes(ecs_template).get("deletion_protection.enabled", "false") == "false"


def test_the_ingress_cidr_is_the_vpcs_range_as_written_not_a_token(ecs_template: Template) -> None:
    (group,) = [
        g["Properties"]
        for g in resources_of(ecs_template, "AWS::EC2::SecurityGroup").values()
        if g["Properties"]["GroupDescription"].startswith("Sonic API load balancer")
    ]
    (ingress,) = group["SecurityGroupIngress"]
    assert ingress["CidrIp"] == "10.60.128.0/17"  # the ECS route's half of network.cidr
    assert ingress["FromPort"] == ingress["ToPort"] == 80


def test_the_api_url_is_wss_on_the_certificates_name_with_tls(
    private_ca: Template, ecs_template: Template
) -> None:
    outputs = private_ca.to_json()["Outputs"]
    assert outputs["ApiUrl"]["Value"] == f"wss://{DOMAIN}:443/tts/websocket"
    assert rendered(outputs["LoadBalancerDnsName"]["Value"]) == "CFN_Fn_GetAtt"
    dev = ecs_template.to_json()["Outputs"]
    assert rendered(dev["ApiUrl"]["Value"]) == "ws://CFN_Fn_GetAtt:80/tts/websocket"


def _listener_findings(stack: Stack) -> tuple[dict[str, str], list[str]]:
    """The listener's acknowledged rules (rule -> reason) and the synth warnings on it."""
    listener = stack.node.find_child("Api").node.find_child("LoadBalancer").node.find_child("Listener")
    acknowledged = {
        rule: reason
        for entry in listener.node.metadata
        if entry.type == "aws:cdk:acknowledged-rules"
        for rule, reason in entry.data.items()
    }
    warnings = Annotations.from_stack(stack).find_warning(
        f"/{stack.node.path}/Api/LoadBalancer/Listener", Match.any_value()
    )
    return acknowledged, [str(w.entry.data) for w in warnings]


CERTIFICATE_RULES = {
    f"{pack}::{pack}-ELBv2ACMCertificateRequired"
    for pack in ("NIST.800.53.R5", "HIPAA.Security", "PCI.DSS.321")
}


def test_a_plain_listener_warns_at_synth_and_its_acknowledgement_names_the_setting(
    ecs_stack: Stack, plain_stage: Stack
) -> None:
    for stack, accepted_by in (
        (ecs_stack, "dev, whose listener is plain unless ecs.api.tls = true"),
        (plain_stage, "ecs.api.allow_plaintext_outside_dev = true in stage"),
    ):
        acknowledged, warnings = _listener_findings(stack)
        assert {rule for rule in acknowledged if "Certificate" in rule} == CERTIFICATE_RULES
        assert all(accepted_by in acknowledged[rule] for rule in CERTIFICATE_RULES)
        (warning,) = warnings
        assert (
            warning.startswith("plain TCP listener on port 80: ws://")
            and "sonic-deploy:plaintext-listener" in warning
        )


def test_a_tls_listener_has_no_plaintext_warning_or_acknowledgement(private_ca_stack: Stack) -> None:
    acknowledged, warnings = _listener_findings(private_ca_stack)
    assert acknowledged == {} and warnings == []
