"""`sonic-deploy licence upload`: the offline licence of an air-gapped ECS deployment (no aws_cdk here)."""
