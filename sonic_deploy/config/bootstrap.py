"""Names `make bootstrap` creates and the stacks rely on, kept free of aws_cdk so that the operator tools
(`sonic_deploy.changes`) can read them without starting the CDK's Node process."""

from __future__ import annotations

# The permissions boundary on every role the stacks create (config/bootstrap/permissions-boundary.json).
# `-c sonic-deploy:permissions-boundary=NAME` names another policy, one you manage yourself.
PERMISSIONS_BOUNDARY_NAME = "sonic-deploy-permissions-boundary"
PERMISSIONS_BOUNDARY_CONTEXT_KEY = "sonic-deploy:permissions-boundary"
