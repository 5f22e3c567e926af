"""The AWS account whose ECR holds the EKS add-ons' images in each Region (vpc-cni, kube-proxy, CoreDNS, the Pod
Identity Agent): every node pulls from it through the VPC's ECR endpoints, whose policy must name it. From the
EKS guide's "View Amazon container image registries for Amazon EKS add-ons" (workloads/add-ons-images.adoc at
4d52b4d). No aws_cdk: the config's rules read it."""

from __future__ import annotations

_MOST_REGIONS = "602401143452"
_OTHERS = {
    "af-south-1": "877085696533",
    "ap-east-1": "800184023465",
    "ap-south-2": "900889452093",
    "ap-southeast-3": "296578399912",
    "ap-southeast-4": "491585149902",
    "ca-west-1": "761377655185",
    "cn-north-1": "918309763551",
    "cn-northwest-1": "961992271922",
    "eu-central-2": "900612956339",
    "eu-south-1": "590381155156",
    "eu-south-2": "455263428931",
    "il-central-1": "066635153087",
    "me-central-1": "759879836304",
    "me-south-1": "558608220178",
    "us-gov-east-1": "151742754352",
    "us-gov-west-1": "013241004608",
}
_MOST = (
    "ap-northeast-1 ap-northeast-2 ap-northeast-3 ap-south-1 ap-southeast-1 ap-southeast-2 ca-central-1 "
    "eu-central-1 eu-north-1 eu-west-1 eu-west-2 eu-west-3 sa-east-1 us-east-1 us-east-2 us-west-1 us-west-2"
)
ADD_ON_REGISTRY_ACCOUNTS: dict[str, str] = {**dict.fromkeys(_MOST.split(), _MOST_REGIONS), **_OTHERS}
"""Region -> the account of its EKS add-on registry (<account>.dkr.ecr.<region>.amazonaws.com)."""
