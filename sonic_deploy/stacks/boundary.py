"""The permissions boundary on every IAM role the stacks create (CDK's own custom-resource and provider roles
too): the customer-managed policy `make bootstrap` creates from config/bootstrap/permissions-boundary.json.
The bootstrap policy lets CloudFormation create a role only with it (`iam:PermissionsBoundary`), so no role
of the stacks can hold more than the boundary allows, whatever its own policies say."""

from __future__ import annotations

from aws_cdk import Stack
from aws_cdk import aws_iam as iam

from sonic_deploy.config.bootstrap import PERMISSIONS_BOUNDARY_CONTEXT_KEY, PERMISSIONS_BOUNDARY_NAME


def boundary_name(stack: Stack) -> str:
    name = stack.node.try_get_context(PERMISSIONS_BOUNDARY_CONTEXT_KEY)
    return str(name) if name else PERMISSIONS_BOUNDARY_NAME


def apply_permissions_boundary(stack: Stack) -> None:
    """aws-iam's PermissionsBoundary aspect sets PermissionsBoundary on every AWS::IAM::Role in the scope,
    the CfnResource-based provider roles included (aws-cdk-lib/aws-iam/lib/permissions-boundary.ts)."""
    policy = iam.ManagedPolicy.from_managed_policy_name(stack, "PermissionsBoundary", boundary_name(stack))
    iam.PermissionsBoundary.of(stack).apply(policy)
