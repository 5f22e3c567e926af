"""The SageMaker route: Sonic's model package from AWS Marketplace on a SageMaker endpoint. Nothing here
imports aws_cdk when the package is imported: the config imports this route's models and rules."""
