"""The SageMaker route's own constructs, used by SageMakerStack alone; what both routes use is in
sonic_deploy/constructs/. The package imports no aws_cdk itself (its modules do), like the route package."""
