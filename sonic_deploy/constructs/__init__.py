"""Constructs shared by the two routes. Inside the package, not at the top level: a top-level folder named
`constructs/` would shadow the `constructs` library that aws-cdk-lib imports."""
