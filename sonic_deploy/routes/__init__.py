"""The deployment routes, one package each (`sagemaker`, `ecs`): each route's own config model and rules, and
in time its stack, constructs, outputs and preflight. A route package imports no aws_cdk when imported: the
operator tools load the config, which imports the routes' models and rules."""
