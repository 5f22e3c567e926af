"""The latency probe: time to first audio under load, against either route. Never imports aws_cdk."""
