"""The EKS route: Cartesia's self-hosted Sonic containers on Amazon EKS, the GPU workers on Karpenter's nodes in
one AZ (docs/eks.md). Nothing here imports aws_cdk when the package is imported: the config imports this
route's models and rules."""

from sonic_deploy.routes.eks import outputs
from sonic_deploy.routes.route import Route, Wire

ROUTE = Route(
    name="eks",
    title="EKS",
    stack_id="SonicEks",
    stack="sonic_deploy.routes.eks.stack:EksStack",
    wire=Wire.CARTESIA,
    connect_outputs=outputs.FOR_CONNECT,
    probe_outputs=outputs.FOR_PROBE,
    preflight="sonic_deploy.routes.eks.preflight",
    rules="sonic_deploy.routes.eks.rules",
    runs_licence_proxy=True,
    licence_reloads=True,
    ecr_segment="eks",
)
