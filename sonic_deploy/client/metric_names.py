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
# The turn's hops as the agent framework measures them (pipecat's TTFB metrics, LiveKit's per-turn metrics):
# end of the caller's speech to the final transcript, the language model's first token, the TTS's first audio.
STT_FINAL, LLM_FIRST_TOKEN, TTS_FIRST_BYTE = "STTFinal", "LLMFirstToken", "TTSFirstByte"
HOPS = (STT_FINAL, LLM_FIRST_TOKEN, TTS_FIRST_BYTE)
