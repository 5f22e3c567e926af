"""The client core shared by the probe, the framework services and the turn harness (no aws_cdk)."""
