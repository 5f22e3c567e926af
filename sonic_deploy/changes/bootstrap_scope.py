"""Why config/bootstrap/cloudformation-execution-policy.json grants what it grants beyond the stacks' own
resource names (tests/changes/test_execution_policy_scope.py holds the file to these lists).

Every other Allow statement names the stacks' resources: CloudFormation names what the stacks leave unnamed
after the stack, `sonic-<env>-<route>-...`, and the stacks name the rest `sonic-...`/`Sonic...`."""

from __future__ import annotations

# Statements on a whole resource type (or on `*` for a service's write actions), by Sid: IAM can scope these
# actions to a resource, but the resource's ID is one AWS draws at random, or its name is not the stacks' to
# choose (an existing EKS cluster named in config, a Lambda layer CloudFormation names), so no `sonic-` name
# pattern can; each is held by a condition or a narrower pattern instead, said here.
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
    # The EKS route on an existing cluster ([eks.cluster] existing): the bootstrap policy is one file for every
    # environment of the account, rendered from no config, so it cannot name that cluster. What the stack adds
    # to it is held to the stacks' own roles instead.
    "AccessEntriesOnANamedClusterOnlyForTheStacksRoles": "an existing cluster's name is the user's (config, not "
    "the bootstrap): CreateAccessEntry is allowed on any cluster only for a principal that is a role of the "
    "stacks (condition eks:principalArn, Service Authorization Reference for Amazon EKS); the entry's own ARN "
    "names that role, so every later action on it is scoped by name (AccessEntriesOfTheStacksRoles)",
    "PodIdentityOnANamedClusterOnlyForTheStacksRoles": "an existing cluster's name is the user's: "
    "CreatePodIdentityAssociation takes only the cluster as resource and has no condition key for the role, but "
    "it needs iam:PassRole to pods.eks.amazonaws.com, which this policy allows only for the stacks' roles",
    "PodIdentityAssociationsCloudFormationMadeForTheStacks": "an association's ARN is the cluster's name and a "
    "random ID: allowed only on those CloudFormation tagged with a stack of ours (aws:cloudformation:stack-name "
    "sonic-*, a tag only CloudFormation can write; the type's schema sets cloudFormationSystemTags)",
    "KubectlLayersNamedAfterTheirLogicalIds": "CloudFormation names a layer version with no LayerName after its "
    "logical ID alone, not the stack (aws/aws-cdk#18563), and aws_eks_v2's kubectl provider makes its AWS CLI "
    "layer without a name: the kubectl and AWS CLI layers, matched by the `Kubectl` both logical IDs carry",
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
