"""The EKS stack's outputs, by name: the stack writes them, the tools read them (no aws_cdk here)."""

from __future__ import annotations

API_URL = "ApiUrl"
LOAD_BALANCER_DNS_NAME = "LoadBalancerDnsName"
MODEL_ID = "ModelId"
CARTESIA_VERSION = "CartesiaVersion"
API_KEY_SECRET = "ApiKeySecret"
REGION = "Region"
CLUSTER_NAME = "ClusterName"
NAMESPACE = "Namespace"
AVAILABILITY_ZONE = "AvailabilityZone"
PLACEMENT_GROUP_NAME = "PlacementGroupName"
PLACEMENT_GROUP_ARN = "PlacementGroupArn"

FOR_CONNECT = (API_URL, MODEL_ID, CARTESIA_VERSION, API_KEY_SECRET, REGION)
FOR_PROBE = (API_URL, MODEL_ID, CARTESIA_VERSION, REGION)
