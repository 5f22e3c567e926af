"""Why config/bootstrap/cloudformation-execution-policy.json grants what it grants beyond the stacks' own
resource names (tests/changes/test_execution_policy_scope.py holds the file to these lists).

Every other Allow statement names the stacks' resources: CloudFormation names what the stacks leave unnamed
after the stack, `sonic-<env>-<route>-...`, and the stacks name the rest `sonic-...`/`Sonic...`."""

from __future__ import annotations

# Statements on a whole resource type (or on `*` for a service's write actions), by Sid: IAM can scope these
# actions to a resource, but the resource's ID is one AWS draws at random, so no name pattern can.
TYPE_WIDE_STATEMENTS = {
    "NetworkOfTheStacksRandomIds": "VPCs, subnets, route tables, gateways, security groups, endpoints, launch "
    "templates and placement groups get random IDs (vpc-0abc...); RunInstances is how EC2 checks a launch "
    "template and an Auto Scaling group's launch, with only roles of the stacks to pass (iam:PassRole below)",
    "ScalableTargetsRandomIds": "Application Auto Scaling names a scalable target by a random ID, drawn when "
    "RegisterScalableTarget creates it: on `*`, for the actions on scalable targets only",
    "KeysRandomIds": "KMS key IDs are random UUIDs; the aliases are the stacks' own (alias/sonic-...). Tags on "
    "CreateKey need kms:TagResource on every key of the account (AWS KMS Developer Guide, 'Controlling access "
    "to tags')",
    "FileSystemsCertificatesExperimentsNamespacesRandomIds": "EFS file systems and access points, ACM "
    "certificates, FIS experiment templates and actions, Route 53 hosted zones and Cloud Map namespaces and "
    "services all have random IDs",
    "SageMakerModelsAndConfigsNamedByCloudFormation": "CloudFormation names SageMaker models and endpoint "
    "configurations without the stack's name; the Marketplace model package is the seller's",
    "CertificatesFromYourPrivateCa": "the Private CA is yours, named by ARN in config (ecs.api.private_ca_arn)",
    "ServiceLinkedRolesTheServicesCreateOnFirstUse": "AWS names service-linked roles; only the service can "
    "use them",
}

# Actions on Resource `*` that IAM can scope to some resource type, each with why it is on `*` anyway (every
# other action on `*` takes no resource at all: cfn-lint's copy of the Service Authorization Reference).
WILDCARD_RESOURCE_ACTIONS = {
    "ec2:Describe*": "read-only; the EC2 resource schemas' handlers ask for ec2:Describe* themselves, and the "
    "Describe calls they make take no resource",
    "ec2:Get*": "read-only; asked for as ec2:Get* by the EC2 resource schemas' handlers",
    "cloudwatch:GetMetricData": "read-only metric data (the alarm handlers'), scoped only to metric datasets",
    "route53:GetChange": "the status of a record change, whose ID is random",
    "elasticfilesystem:TagResource": "tags given to CreateFileSystem, before the file system's ID exists",
}

# Services granted whole (svc:*) on Resource `*`: none.
WHOLE_SERVICES_ON_EVERYTHING: dict[str, str] = {}
