"""AWS FIS experiment templates for the ECS route's resilience rehearsal (docs/operate.md): one GPU worker task,
one API server task, one GPU instance, and the GPU group's launches refused for lack of capacity. Each stops
on the route's alarms; the experiments log to an encrypted log group.

Action ids, target resource types, parameters and permissions are those of the FIS actions reference,
https://docs.aws.amazon.com/fis/latest/userguide/fis-actions-reference.html ("Amazon ECS actions",
"Amazon EC2 actions"); target parameters, tags and selection modes those of
https://docs.aws.amazon.com/fis/latest/userguide/targets.html. FIS has no action for SageMaker endpoints (the
reference lists none): docs/operate.md says how that route is rehearsed instead.
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Aws, Duration, Stack
from aws_cdk import aws_autoscaling as autoscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_fis as fis
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from constructs import Construct, IConstruct

from sonic_deploy.constructs.findings import acknowledge
from sonic_deploy.constructs.retention import KEEP_ONCE_CREATED

# FIS evaluates at most five stop conditions per template (quota L-872EC72B, not adjustable).
MAX_STOP_CONDITIONS = 5
ICE_ACTION = "aws:ec2:asg-insufficient-instance-capacity-error"
# The tag EC2 Auto Scaling puts on each instance it launches, naming its group.
GROUP_TAG = "aws:autoscaling:groupName"

Template = fis.CfnExperimentTemplate


class ResilienceExperiments(Construct):
    """Four experiment templates (`self.templates`, by name), one role they share, one log group.

    The role may stop tasks of this cluster only, terminate instances of this group only, and inject
    capacity errors into this group only; what FIS needs to resolve targets (Describe*, tag:GetResources)
    and to set up log delivery takes no resource ARN.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster: ecs.ICluster,
        workers: ecs.BaseService,
        api_server: ecs.BaseService,
        gpu_group: autoscaling.AutoScalingGroup,
        availability_zone: str,
        stop_alarms: Sequence[cloudwatch.IAlarm],
        key: kms.IKey,
        log_retention: logs.RetentionDays,
        insufficient_capacity_duration: Duration,
        insufficient_capacity_percent: int,
    ) -> None:
        super().__init__(scope, construct_id)
        if not 1 <= len(stop_alarms) <= MAX_STOP_CONDITIONS:
            raise ValueError(f"FIS takes 1 to {MAX_STOP_CONDITIONS} stop conditions, not {len(stop_alarms)}")
        stack = Stack.of(self)

        self.log_group = logs.LogGroup(
            self, "Logs", encryption_key=key, retention=log_retention, removal_policy=KEEP_ONCE_CREATED
        )
        self.role = iam.Role(
            self,
            "Role",
            description="AWS FIS: the ECS route's resilience experiments",
            # The confused-deputy guard FIS documents for its experiment role: only this account's experiments.
            assumed_by=iam.ServicePrincipal(
                "fis.amazonaws.com",
                conditions={
                    "StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID},
                    "ArnLike": {
                        "aws:SourceArn": f"arn:{Aws.PARTITION}:fis:{Aws.REGION}:{Aws.ACCOUNT_ID}:experiment/*"
                    },
                },
            ),
        )
        policy = iam.ManagedPolicy(
            self,
            "Policy",
            roles=[self.role],
            statements=_statements(cluster, gpu_group),
        )
        acknowledge(
            policy,
            "AwsSolutions-IAM5[Resource::*]",
            reason="tag:GetResources, ec2:DescribeInstances, autoscaling:DescribeAutoScalingGroups and "
            "logs:CreateLogDelivery take no resource ARN (Service Authorization Reference); "
            "ec2:InjectApiError takes none either and is held to this group's ARN and the one FIS action by "
            "its ec2:FisTargetArns and ec2:FisActionId conditions; ecs:ListTasks (read-only) to this "
            "cluster by its ecs:cluster condition",
        )
        acknowledge(
            policy,
            f"AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:ecs:<AWS::Region>:<AWS::AccountId>:task/<{_ref_id(cluster)}>/*]",
            "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:ec2:<AWS::Region>:<AWS::AccountId>:instance/*]",
            "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:logs:<AWS::Region>:<AWS::AccountId>:*]",
            reason="which task or instance FIS picks is decided at each run (COUNT(1)): the ARNs are this "
            "cluster's tasks (also held by the ecs:cluster condition) and instances "
            "tagged with this group's name; the logs wildcard is the account's CloudWatch Logs, what the "
            "vended-log delivery set-up (PutResourcePolicy, DescribeResourcePolicies, DescribeLogGroups: no "
            "resource type) acts on, as AWS's policy for vended logs grants it",
        )

        stop_conditions = [
            Template.ExperimentTemplateStopConditionProperty(
                source="aws:cloudwatch:alarm", value=alarm.alarm_arn
            )
            for alarm in stop_alarms
        ]
        common = {
            "role_arn": self.role.role_arn,
            "stop_conditions": stop_conditions,
            # Schema version 2 is the current one (monitoring-logging.html); the ARN ends in ':*', as
            # CloudFormation's Arn of a log group does.
            "log_configuration": Template.ExperimentTemplateLogConfigurationProperty(
                log_schema_version=2,
                cloud_watch_logs_configuration={"LogGroupArn": self.log_group.log_group_arn},
            ),
            # A target that resolves to nothing (no running task, no instance) fails the experiment rather
            # than passing it vacuously.
            "experiment_options": Template.ExperimentTemplateExperimentOptionsProperty(
                account_targeting="single-account", empty_target_resolution_mode="fail"
            ),
        }

        def template(
            name: str,
            description: str,
            *,
            targets: dict[str, Template.ExperimentTemplateTargetProperty],
            actions: dict[str, Template.ExperimentTemplateActionProperty],
        ) -> Template:
            made = Template(
                self,
                name,
                description=description,
                targets=targets,
                actions=actions,
                # The stack's own tags reach these too (CDK's tag aspect); these name the experiment.
                tags={"Name": f"{stack.stack_name}-{name}", "sonic-deploy:experiment": name},
                **common,  # type: ignore[arg-type]
            )
            made.node.add_dependency(policy)  # never a template without the permissions it runs with
            return made

        def one_task(service: ecs.BaseService) -> Template.ExperimentTemplateTargetProperty:
            # aws:ecs:task takes `cluster` and `service` as target parameters (targets.html).
            return Template.ExperimentTemplateTargetProperty(
                resource_type="aws:ecs:task",
                selection_mode="COUNT(1)",
                parameters={"cluster": cluster.cluster_name, "service": service.service_name},
            )

        def stop_task(description: str) -> Template.ExperimentTemplateActionProperty:
            # aws:ecs:stop-task: resource type aws:ecs:task, no parameters; StopTask sends SIGTERM and, after
            # the container's stopTimeout, SIGKILL, as a scale-in would.
            return Template.ExperimentTemplateActionProperty(
                action_id="aws:ecs:stop-task", description=description, targets={"Tasks": "Task"}
            )

        one_instance = Template.ExperimentTemplateTargetProperty(
            resource_type="aws:ec2:instance",
            selection_mode="COUNT(1)",
            resource_tags={GROUP_TAG: gpu_group.auto_scaling_group_name},
            filters=[Template.ExperimentTemplateTargetFilterProperty(path="State.Name", values=["running"])],
        )
        terminate = Template.ExperimentTemplateActionProperty(
            # aws:ec2:terminate-instances: resource type aws:ec2:instance, no parameters.
            action_id="aws:ec2:terminate-instances",
            description="Terminate one GPU instance of the group",
            targets={"Instances": "Instance"},
        )
        minutes = int(insufficient_capacity_duration.to_minutes())
        self.templates: dict[str, Template] = {
            "StopGpuWorkerTask": template(
                "StopGpuWorkerTask",
                "Stop one GPU worker task: the others keep serving and ECS starts a replacement",
                targets={"Task": one_task(workers)},
                actions={"StopTask": stop_task("Stop one GPU worker task")},
            ),
            "StopApiServerTask": template(
                "StopApiServerTask",
                "Stop one API server task: the NLB drains it, the other keeps serving, ECS starts a replacement",
                targets={"Task": one_task(api_server)},
                actions={"StopTask": stop_task("Stop one API server task")},
            ),
            "TerminateGpuInstance": template(
                "TerminateGpuInstance",
                "Terminate one GPU instance: its worker is rescheduled and the capacity provider replaces it",
                targets={"Instance": one_instance},
                actions={"Terminate": terminate},
            ),
            "GpuInsufficientCapacity": template(
                "GpuInsufficientCapacity",
                f"Refuse the GPU group's launches in {availability_zone} for {minutes} min "
                "(InsufficientInstanceCapacity), with one GPU instance terminated a minute in: the other "
                "workers keep serving and scaling waits rather than loops",
                targets={
                    # The group carries the tags CloudFormation puts on every Auto Scaling group it makes
                    # (AWS::AutoScaling::AutoScalingGroup TagProperty): stack name and logical id name it
                    # alone.
                    "Group": Template.ExperimentTemplateTargetProperty(
                        resource_type="aws:ec2:autoscaling-group",
                        selection_mode="ALL",
                        resource_tags={
                            "aws:cloudformation:stack-name": Aws.STACK_NAME,
                            "aws:cloudformation:logical-id": _ref_id(gpu_group),
                        },
                    ),
                    "Instance": one_instance,
                },
                actions={
                    # aws:ec2:asg-insufficient-instance-capacity-error: resource type aws:ec2:autoscaling-group;
                    # duration (ISO 8601), availabilityZoneIdentifiers (names or ids), percentage (1-100).
                    "RefuseLaunches": Template.ExperimentTemplateActionProperty(
                        action_id=ICE_ACTION,
                        description="InsufficientInstanceCapacity on the GPU group's launches",
                        parameters={
                            "availabilityZoneIdentifiers": availability_zone,
                            "duration": f"PT{minutes}M",
                            "percentage": str(insufficient_capacity_percent),
                        },
                        targets={"AutoScalingGroups": "Group"},
                    ),
                    # Without a launch to refuse the fault shows nothing: lose one instance once the fault
                    # is in place (aws:fis:wait, one minute at least), so that its replacement is refused.
                    "SettleFault": Template.ExperimentTemplateActionProperty(
                        action_id="aws:fis:wait", parameters={"duration": "PT1M"}
                    ),
                    "Terminate": Template.ExperimentTemplateActionProperty(
                        action_id="aws:ec2:terminate-instances",
                        description="Terminate one GPU instance, whose replacement the fault refuses",
                        targets={"Instances": "Instance"},
                        start_after=["SettleFault"],
                    ),
                },
            ),
        }


def _ref_id(construct: IConstruct) -> str:
    """The logical id of a construct's CloudFormation resource (as cdk-nag prints it in finding ids)."""
    default = construct.node.default_child
    assert default is not None, f"{construct.node.path} has no CloudFormation resource"
    return Stack.of(construct).get_logical_id(default)  # type: ignore[arg-type]


def _statements(cluster: ecs.ICluster, gpu_group: autoscaling.AutoScalingGroup) -> list[iam.PolicyStatement]:
    """The permissions each action lists in the FIS actions reference, scoped as far as IAM allows."""
    arn = f"arn:{Aws.PARTITION}"
    here = f"{Aws.REGION}:{Aws.ACCOUNT_ID}"
    in_cluster = {"ArnEquals": {"ecs:cluster": cluster.cluster_arn}}
    return [
        iam.PolicyStatement(
            sid="StopThisClustersTasks",
            # aws:ecs:stop-task needs ecs:DescribeTasks, ecs:ListTasks, ecs:StopTask, tag:GetResources.
            actions=["ecs:StopTask", "ecs:DescribeTasks"],
            resources=[f"{arn}:ecs:{here}:task/{cluster.cluster_name}/*"],
            conditions=in_cluster,
        ),
        iam.PolicyStatement(
            sid="ListThisClustersTasks",
            # ListTasks authorizes on a container instance (Service Authorization Reference, Amazon ECS), which a
            # call by service names none of: any resource, this cluster's by the condition.
            actions=["ecs:ListTasks"],
            resources=["*"],
            conditions=in_cluster,
        ),
        iam.PolicyStatement(
            sid="TerminateThisGroupsInstances",
            actions=["ec2:TerminateInstances"],
            resources=[f"{arn}:ec2:{here}:instance/*"],
            conditions={"StringEquals": {f"aws:ResourceTag/{GROUP_TAG}": gpu_group.auto_scaling_group_name}},
        ),
        iam.PolicyStatement(
            sid="RefuseThisGroupsLaunches",
            actions=["ec2:InjectApiError"],
            resources=["*"],
            # Both keys in one statement (the FIS example policy has them in two, which allows either).
            conditions={
                "StringEquals": {"ec2:FisActionId": ICE_ACTION},
                "ForAllValues:ArnLike": {"ec2:FisTargetArns": gpu_group.auto_scaling_group_arn},
            },
        ),
        iam.PolicyStatement(
            sid="ResolveTargets",
            actions=["tag:GetResources", "ec2:DescribeInstances", "autoscaling:DescribeAutoScalingGroups"],
            resources=["*"],
        ),
        # Experiment logs are vended logs: the role sets up the delivery, and the log group's resource
        # policy on first use (CloudWatch Logs User Guide, "Logs sent to CloudWatch Logs").
        iam.PolicyStatement(sid="DeliverExperimentLogs", actions=["logs:CreateLogDelivery"], resources=["*"]),
        iam.PolicyStatement(
            sid="AllowLogDeliveryToTheLogGroup",
            actions=["logs:PutResourcePolicy", "logs:DescribeResourcePolicies", "logs:DescribeLogGroups"],
            # Account-level calls (the Service Authorization Reference lists no resource type for them):
            # the resource is the account's CloudWatch Logs, as AWS's vended-logs policy writes it
            # (CloudWatch Logs User Guide, "Enable logging from AWS services", logs sent to CloudWatch Logs).
            resources=[f"{arn}:logs:{here}:*"],
        ),
    ]
