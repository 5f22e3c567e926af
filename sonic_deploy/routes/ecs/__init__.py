"""The ECS route: Cartesia's self-hosted Sonic containers on ECS, the GPU workers on EC2. Nothing here imports
aws_cdk when the package is imported: the config imports this route's models and rules."""
