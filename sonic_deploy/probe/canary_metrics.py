"""The canary's CloudWatch metrics: what the probe publishes (`--publish-metrics`) and what the stacks'
alarms and dashboards read. One place for both sides; no aws_cdk here."""

from __future__ import annotations

NAMESPACE = "SonicDeploy/Canary"
# Dimensions of every datum: the environment's name and the route ("ecs" or "sagemaker").
ENVIRONMENT_DIMENSION = "Environment"
ROUTE_DIMENSION = "Route"

# Milliseconds from the request to its first audio, one value per measured request that succeeded.
TTFA = "TimeToFirstAudio"
# Per run: measured requests, those that succeeded, those that failed, and of those the ones refused for
# want of capacity (HTTP 429, or the WebSocket API's equivalent).
REQUESTS = "Requests"
SUCCEEDED = "Succeeded"
FAILED = "Failed"
THROTTLED = "Throttled"
METRICS = (TTFA, REQUESTS, SUCCEEDED, FAILED, THROTTLED)
