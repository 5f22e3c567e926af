"""Clients of Sonic's APIs, as a library (no aws_cdk): the Cartesia WebSocket API today, which the probe
measures through (`sonic-deploy[client]`)."""
