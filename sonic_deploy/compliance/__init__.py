"""The compliance gate (`make compliance`, and `make test` through tests/compliance/): cdk-nag's AwsSolutions,
NIST 800-53 rev 5, HIPAA Security and PCI DSS 3.2.1 packs, checkov and cfn-lint over the templates of every
environment in config/environments/ and the air-gapped variant of each that deploys the ECS route.

Imports aws_cdk (it synthesizes the stacks): a development tool, like the stacks, not an operator tool."""
