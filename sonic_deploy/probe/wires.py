"""The wire each of the probe's targets speaks (`probe ws|http|sagemaker`), and so the route whose stack an
in-VPC run starts from (sonic_deploy.routes)."""

from __future__ import annotations

from sonic_deploy.routes import Wire

WIRES = {"ws": Wire.CARTESIA, "http": Wire.CARTESIA, "sagemaker": Wire.SAGEMAKER}
