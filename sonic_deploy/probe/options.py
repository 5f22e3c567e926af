"""The options of `probe ws|http|sagemaker`, typed: what a run is asked for, read from its checked command
line at the edge (arguments.py) and run by run.py. Named as the command line's options are, so that the
in-VPC run's defaults from the stack's outputs (`Session.filled`) replace them by name."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sonic_deploy.audio import AudioFormat
from sonic_deploy.in_vpc.options import InVpcOptions
from sonic_deploy.probe.requests import PRESETS, AgentTraffic, RequestTemplate, load_transcripts
from sonic_deploy.probe.slo import Slo


@dataclass(frozen=True)
class ProbeOptions:
    route: str  # ws, http or sagemaker
    argv: tuple[str, ...]  # the command line as given: --in-vpc passes it on to its tasks
    # The target (a route's own options; the others' are their defaults).
    url: str | None
    endpoint: str | None
    region: str | None
    endpoint_url: str | None
    api_key: str
    cartesia_version: str
    multiplex: int
    client: str
    ca_bundle: str | None
    agent: AgentTraffic | None
    # The request.
    transcript: str | None
    transcripts: tuple[str, ...] | None
    voice_id: str
    model_id: str
    language: str
    preset: str | None
    encoding: str | None
    sample_rate: int | None
    # The load.
    concurrency: tuple[int, ...]
    requests: int
    warmup: int | None
    ramp_up: float | None
    error_backoff_ms: float
    rate: tuple[float, ...] | None
    duration: float
    arrivals: str
    workers: int
    max_in_flight: int
    # Measurement and output.
    timeout: float
    audible_threshold_db: float
    playback_delay_ms: float
    out: Path | None
    no_report: bool
    quiet: bool
    seed: int
    # The capacity search, the in-VPC run and the canary.
    slo: Slo | None
    slo_start: int
    slo_max: int
    slo_resolution: int | None
    in_vpc: InVpcOptions
    publish_metrics: str | None
    publish_route: str | None = None

    def template(self) -> RequestTemplate:
        encoding, rate = PRESETS[self.preset] if self.preset else PRESETS["studio"]
        audio = AudioFormat(self.encoding or encoding, self.sample_rate or rate)
        transcripts = self.transcripts or load_transcripts(self.transcript, None)
        return RequestTemplate(transcripts, self.voice_id, self.model_id, self.language, audio)
