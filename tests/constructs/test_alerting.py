"""Alerting and the SageMaker alarms: encrypted topic, the five alarms (no actions of their own), the one
composite (Page) that notifies on alarm and recovery."""

from __future__ import annotations

from aws_cdk.assertions import Match, Template

from sonic_deploy.config import Settings
from tests.conftest import resources_of


def test_topic_is_encrypted(sagemaker_template: Template) -> None:
    sagemaker_template.has_resource_properties("AWS::SNS::Topic", {"KmsMasterKeyId": Match.any_value()})


def _alarm(template: Template, metric: str) -> dict[str, object]:
    props: dict[str, object] = next(
        a["Properties"]
        for a in resources_of(template, "AWS::CloudWatch::Alarm").values()
        if a["Properties"].get("MetricName") == metric
    )
    return props


def test_only_the_page_composite_notifies_on_alarm_and_recovery(
    sagemaker_template: Template, ecs_template: Template
) -> None:
    alarms = resources_of(sagemaker_template, "AWS::CloudWatch::Alarm").values()
    assert len(alarms) == 5  # the canary is off in dev
    for template in (sagemaker_template, ecs_template):
        for alarm in resources_of(template, "AWS::CloudWatch::Alarm").values():
            assert not {"AlarmActions", "OKActions", "InsufficientDataActions"} & set(alarm["Properties"])
        composites = resources_of(template, "AWS::CloudWatch::CompositeAlarm")
        notifying = {
            key: c["Properties"] for key, c in composites.items() if "AlarmActions" in c["Properties"]
        }
        ((key, page),) = notifying.items()
        assert key.startswith("AlertingPage")
        assert page["AlarmActions"] == page["OKActions"]
        assert page["AlarmActions"][0]["Ref"].startswith("AlertingTopic")


def test_concurrency_above_what_the_instances_serve(
    sagemaker_template: Template, dev_settings: Settings
) -> None:
    concurrency = _alarm(sagemaker_template, "ConcurrentRequestsPerModel")
    assert concurrency["Threshold"] == dev_settings.sagemaker_streams_per_instance
    assert concurrency["EvaluationPeriods"] == dev_settings.environment.sagemaker.alarms.capacity_minutes
    assert (concurrency["Statistic"], concurrency["Period"]) == ("Average", 60)


def test_error_alarms(sagemaker_template: Template) -> None:
    five_xx = _alarm(sagemaker_template, "Invocation5XXErrors")
    assert (five_xx["Statistic"], five_xx["Period"], five_xx["Threshold"]) == ("Sum", 300, 1)
    four_xx = _alarm(sagemaker_template, "Invocation4XXErrors")
    assert (four_xx["Statistic"], four_xx["Threshold"]) == ("Sum", 5)
    assert "429" in str(four_xx["AlarmDescription"]) and "Does not page" in str(four_xx["AlarmDescription"])


def test_model_latency_p95_in_microseconds(sagemaker_template: Template) -> None:
    latency = _alarm(sagemaker_template, "ModelLatency")
    assert (latency["ExtendedStatistic"], latency["Threshold"]) == ("p95", 500_000)


def test_gpu_pinned(sagemaker_template: Template) -> None:
    gpu = _alarm(sagemaker_template, "GPUUtilization")
    assert (gpu["Namespace"], gpu["Threshold"], gpu["EvaluationPeriods"]) == (
        "/aws/sagemaker/Endpoints",
        95,
        15,
    )
    assert gpu["ComparisonOperator"] == "GreaterThanThreshold"


def test_alarms_may_publish_to_the_topic_and_use_its_key(
    sagemaker_template: Template, ecs_template: Template
) -> None:
    for template in (sagemaker_template, ecs_template):
        template.has_resource_properties(
            "AWS::SNS::TopicPolicy",
            {
                "PolicyDocument": {
                    "Statement": Match.array_with(
                        [
                            Match.object_like(
                                {
                                    "Effect": "Allow",
                                    "Action": "sns:Publish",
                                    "Principal": {"Service": "cloudwatch.amazonaws.com"},
                                    "Condition": Match.object_like(
                                        {"StringEquals": {"aws:SourceAccount": Match.any_value()}}
                                    ),
                                }
                            )
                        ]
                    )
                },
            },
        )
        template.has_resource_properties(
            "AWS::KMS::Key",
            {
                "KeyPolicy": {
                    "Statement": Match.array_with(
                        [
                            Match.object_like(
                                {
                                    "Sid": "AllowThisAccountsAlarmsToEncrypt",
                                    "Principal": {"Service": "cloudwatch.amazonaws.com"},
                                    "Condition": {
                                        "StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}
                                    },
                                }
                            )
                        ]
                    )
                },
            },
        )


def test_the_key_lets_the_alarms_and_the_accounts_publishers_encrypt(sagemaker_template: Template) -> None:
    [key] = resources_of(sagemaker_template, "AWS::KMS::Key").values()
    statements = {s["Sid"]: s for s in key["Properties"]["KeyPolicy"]["Statement"]}
    assert statements["AllowThisAccountsAlarmsToEncrypt"]["Principal"] == {
        "Service": "cloudwatch.amazonaws.com"
    }
    via = statements["UseThroughSns"]["Condition"]["StringEquals"]["kms:ViaService"]
    assert via == {"Fn::Join": ["", ["sns.", {"Ref": "AWS::Region"}, ".amazonaws.com"]]}
