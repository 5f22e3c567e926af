"""How stateful resources (keys, repositories, log groups, file systems, secrets) outlive their stack."""

from __future__ import annotations

from aws_cdk import RemovalPolicy

# DeletionPolicy RetainExceptOnCreate (with UpdateReplacePolicy Retain): kept when the stack is deleted or the
# resource replaced, but deleted when the create that made it rolls back. A first deploy that fails halfway
# (a missing subscription, a wrong image tag) then leaves nothing behind, and the retry does not stop on
# "already exists" for the named ECR repositories. CloudFormation accepts it on every resource type that
# takes a DeletionPolicy ("RetainExceptOnCreate behaves like Retain for stack operations, except for the
# stack operation that initially created the resource"; AWS CloudFormation User Guide, DeletionPolicy).
KEEP_ONCE_CREATED = RemovalPolicy.RETAIN_ON_UPDATE_OR_DELETE
