"""The deployment routes, one package each: its config model and rules, its stack's outputs, and in time its
stack, constructs and preflight. A route package imports no aws_cdk when imported: the operator tools load
the config, which imports the routes' models and rules. A new route is a folder and one line below
(docs/architecture.md, "How to add a route")."""

from __future__ import annotations

from sonic_deploy.routes import ecs, eks, sagemaker
from sonic_deploy.routes.route import Route, Wire

ROUTES: dict[str, Route] = {route.name: route for route in (sagemaker.ROUTE, ecs.ROUTE, eks.ROUTE)}
"""Every route, by name, in the order the tools list them."""


__all__ = ["ROUTES", "Route", "Wire"]
