"""The managed route: Sonic's Marketplace model package as a private, autoscaled SageMaker endpoint."""

from __future__ import annotations

from typing import Any

from aws_cdk import CfnOutput, Fn
from constructs import Construct

from sonic_deploy.config import Settings
from sonic_deploy.constructs.encryption import EncryptionKey
from sonic_deploy.routes.sagemaker import outputs
from sonic_deploy.routes.sagemaker.parts import endpoint_network, operate, scaled_endpoint
from sonic_deploy.stacks.common import SonicStack, log_retention, network_props


class SageMakerStack(SonicStack):
    """The route's parts (routes/sagemaker/parts.py), each building its children straight under the stack, in
    the order the template has always had: the network, the endpoint, what operates it, the outputs."""

    def __init__(self, scope: Construct, construct_id: str, *, settings: Settings, **kwargs: Any) -> None:
        super().__init__(scope, construct_id, settings=settings, **kwargs)
        env = settings.environment
        assert settings.model_package_arn is not None  # the loader guarantees it for this route

        key = EncryptionKey(self, "Encryption", alias=f"alias/{settings.resource_prefix}-sagemaker").key
        network = endpoint_network(
            self,
            key=key,
            flow_log_retention=log_retention(env.network.flow_log_retention_days),
            turn_hops=env.probe.turn_hops,
            client_cidrs=env.network.client_cidrs,
            placement=network_props(self, settings, "sagemaker"),
        )
        endpoint = scaled_endpoint(
            self,
            env.sagemaker,
            model_package_arn=settings.model_package_arn,
            endpoint_name=settings.endpoint_name,
            instance=settings.sagemaker_instance,
            pools=settings.sagemaker_pools,
            network=network,
            key=key,
            log_retention=log_retention(env.log_retention_days),
        )
        operate(self, settings, endpoint=endpoint, network=network, key=key)

        runtime = network.endpoints["sagemaker.runtime"]
        CfnOutput(self, outputs.ENDPOINT_NAME, value=endpoint.endpoint.attr_endpoint_name)
        CfnOutput(self, outputs.VARIANT_NAME, value=endpoint.variant_name)
        # DnsEntries are "hostedzoneid:dnsname"; the first is the Regional name.
        CfnOutput(
            self,
            outputs.RUNTIME_VPC_ENDPOINT_DNS,
            value=Fn.select(1, Fn.split(":", Fn.select(0, runtime.vpc_endpoint_dns_entries))),
        )
        CfnOutput(self, outputs.REGION, value=self.region)
