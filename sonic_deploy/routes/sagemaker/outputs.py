"""The SageMaker stack's outputs, by name: the stack writes them, the tools read them (no aws_cdk here)."""

from __future__ import annotations

ENDPOINT_NAME = "EndpointName"
VARIANT_NAME = "VariantName"
RUNTIME_VPC_ENDPOINT_DNS = "RuntimeVpcEndpointDns"
REGION = "Region"

FOR_CONNECT = (ENDPOINT_NAME, REGION, RUNTIME_VPC_ENDPOINT_DNS)
FOR_PROBE = (ENDPOINT_NAME, REGION)
