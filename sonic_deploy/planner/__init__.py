"""`sonic-deploy plan`: how many GPU instances and dollars each route takes for a call volume (no aws_cdk)."""
