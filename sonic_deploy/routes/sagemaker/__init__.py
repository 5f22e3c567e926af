"""The SageMaker route: Sonic's model package from AWS Marketplace on a SageMaker endpoint. Nothing here
imports aws_cdk when the package is imported: the config imports this route's models and rules."""

from sonic_deploy.routes.route import Route, Wire
from sonic_deploy.routes.sagemaker import outputs

ROUTE = Route(
    name="sagemaker",
    title="SageMaker",
    stack_id="SonicSageMaker",
    stack="sonic_deploy.routes.sagemaker.stack:SageMakerStack",
    wire=Wire.SAGEMAKER,
    connect_outputs=outputs.FOR_CONNECT,
    probe_outputs=outputs.FOR_PROBE,
    preflight="sonic_deploy.routes.sagemaker.preflight",
    rules="sonic_deploy.routes.sagemaker.rules",
    network_half=0,
)
