"""The interface endpoints the EKS route's VPC needs, by licence mode (no aws_cdk: the network builds them,
preflight checks an existing VPC has them). Sources: docs/eks.md, "Air-gapped: the network and Karpenter"."""

from __future__ import annotations

# What nodes and pods call most, kept off the NAT gateway (connected mode has one for the rest: licensing,
# model artefacts, the charts' images, EKS, EC2 and Pod Identity's eks-auth): images, secrets, metrics, logs.
CONNECTED = ("ecr.api", "ecr.dkr", "secretsmanager", "monitoring", "logs")
# Air-gapped, the rest of what the stack runs calls: Karpenter's private-cluster list less sts (IRSA only), Pod
# Identity's eks-auth, the load balancer controller's elasticloadbalancing, lambda (CDK's provider framework).
AIR_GAPPED = (*CONNECTED, "ec2", "ssm", "sqs", "eks", "eks-auth", "elasticloadbalancing", "lambda")


def needed(licence_mode: str) -> tuple[str, ...]:
    return CONNECTED if licence_mode == "connected" else AIR_GAPPED
