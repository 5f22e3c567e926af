"""`sonic-deploy connect`: what a voice agent needs to reach a deployed route, from its stack's outputs
(read-only; no aws_cdk here)."""
