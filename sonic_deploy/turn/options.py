"""The options of `probe turn`, typed: read from its checked command line at the edge (arguments.py), run by
command.py and build.py. Named as the command line's options are."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sonic_deploy.in_vpc.options import InVpcOptions


@dataclass(frozen=True)
class TurnOptions:
    argv: tuple[str, ...]  # the command line as given: --in-vpc passes it on to its tasks
    # Speech to text.
    stt: str
    stt_url: str
    stt_model: str
    transcribe_region: str | None
    transcribe_endpoint_url: str | None
    language_code: str
    # The language model.
    llm: str
    llm_url: str | None  # given with --llm openai (arguments.py checks)
    llm_model: str
    bedrock_region: str | None
    bedrock_endpoint_url: str | None
    max_tokens: int
    system: str
    # Text to speech: the route's options (the other route's are their defaults).
    route: str
    tts_url: str | None  # ecs: given, or from the stack's outputs with --in-vpc
    model_id: str
    cartesia_version: str
    ca_bundle: str | None
    endpoint: str | None  # sagemaker: given, or from the stack's outputs with --in-vpc
    region: str | None
    endpoint_url: str | None
    voice_id: str
    # Caller audio.
    audio: str
    wav: tuple[Path, ...] | None
    frame_ms: int
    # The load.
    concurrency: int
    calls: int | None
    rate: float | None
    ramp_up: float
    duration: float
    turns: int
    warmup_turns: int
    gap_ms: float
    seed: int
    # Measurement and output.
    stt_timeout: float
    reply_timeout: float
    audible_threshold_db: float
    budget: Path
    out: Path | None
    no_plot: bool
    quiet: bool
    in_vpc: InVpcOptions
