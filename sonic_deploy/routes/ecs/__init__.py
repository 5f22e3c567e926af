"""The ECS route: Cartesia's self-hosted Sonic containers on ECS, the GPU workers on EC2. Nothing here imports
aws_cdk when the package is imported: the config imports this route's models and rules."""

from sonic_deploy.routes.ecs import outputs
from sonic_deploy.routes.route import Route, Wire

ROUTE = Route(
    name="ecs",
    title="ECS",
    stack_id="SonicEcs",
    stack="sonic_deploy.routes.ecs.stack:EcsStack",
    wire=Wire.CARTESIA,
    connect_outputs=outputs.FOR_CONNECT,
    probe_outputs=outputs.FOR_PROBE,
    preflight="sonic_deploy.routes.ecs.preflight",
    rules="sonic_deploy.routes.ecs.rules",
    network_half=1,
    runs_licence_proxy=True,
)
