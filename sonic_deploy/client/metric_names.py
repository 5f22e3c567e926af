"""The names the clients' telemetry publishes under (telemetry.py) and the stacks' dashboards and alarms read
(constructs/agent_telemetry.py): here, with no dependency, so that a synth needs nothing of the client."""

NAMESPACE = "SonicDeploy/Agent"
ENVIRONMENT, ROUTE, ERROR_KIND = "Environment", "Route", "ErrorKind"
FIRST_AUDIO, STREAM_TIME, REAL_TIME_FACTOR, UNDERRUNS = (
    "FirstAudio",
    "StreamTime",
    "RealTimeFactor",
    "Underruns",
)
REQUESTS, ERRORS = "Requests", "Errors"
