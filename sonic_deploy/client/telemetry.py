"""What each request of a client gave its caller, as CloudWatch embedded metric format (EMF) lines: first
audio, stream time, real-time factor, underruns, and the error kind of a failed one, per environment and
route (docs/client.md,
"Telemetry": why EMF, and what each figure means). Off unless a client is given a `Telemetry`.

One line a request, written when it ends: in a container whose log driver sends stdout to CloudWatch Logs
(ECS's awslogs, Fargate), CloudWatch extracts the metrics with no call of the agent's own ("Specification:
Embedded metric format", Amazon CloudWatch User Guide).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson

from sonic_deploy.audio import BYTES_PER_SAMPLE
from sonic_deploy.client.errors import AudioChunk, SonicError
from sonic_deploy.client.metric_names import (
    ENVIRONMENT,
    ERROR_KIND,
    ERRORS,
    FIRST_AUDIO,
    HOPS,
    NAMESPACE,
    REAL_TIME_FACTOR,
    REQUESTS,
    ROUTE,
    STREAM_TIME,
    UNDERRUNS,
)

# Each dimension set is a metric of its own in CloudWatch (and a cost): the environment and route (what the
# stack's dashboard reads), and, for errors, with the kind. The endpoint is a property (Logs Insights reads it).
_DIMENSIONS = [ENVIRONMENT, ROUTE]
_TIMES = [
    {"Name": FIRST_AUDIO, "Unit": "Milliseconds"},
    {"Name": STREAM_TIME, "Unit": "Milliseconds"},
    {"Name": REAL_TIME_FACTOR, "Unit": "None"},
    {"Name": UNDERRUNS, "Unit": "Count"},
]
_COUNTS = [{"Name": REQUESTS, "Unit": "Count"}, {"Name": ERRORS, "Unit": "Count"}]


def _stdout(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


class Telemetry:
    """Where a client's requests are accounted: `environment` (dev, prod: the stacks' `-c env=`) and `route`
    (sagemaker, ecs) are the dimensions, `endpoint` (an endpoint name or URL) a property; `write` takes each
    line (default: stdout)."""

    def __init__(
        self,
        route: str,
        *,
        environment: str,
        endpoint: str,
        write: Callable[[str], None] = _stdout,
        namespace: str = NAMESPACE,
    ) -> None:
        self.route, self.environment, self.endpoint = route, environment, endpoint
        self.namespace, self._write = namespace, write

    def request(self, encoding: str, sample_rate: int) -> Request:
        """A request sent now, of audio in `encoding` at `sample_rate`."""
        return Request(self, BYTES_PER_SAMPLE.get(encoding, 2) * sample_rate)

    def emit(self, figures: dict[str, float], error_kind: str | None) -> None:
        directives = [self._directive(_DIMENSIONS, _COUNTS + [m for m in _TIMES if m["Name"] in figures])]
        line: dict[str, Any] = {REQUESTS: 1, **figures, ERRORS: 0 if error_kind is None else 1}
        if error_kind is not None:
            line[ERROR_KIND] = error_kind
            directives.append(self._directive([*_DIMENSIONS, ERROR_KIND], [_COUNTS[1]]))
        self._write_line(line, directives)

    def hops(self, figures_ms: Mapping[str, float], *, framework: str) -> None:
        """One line of a turn's hops as the agent framework measured them (names in metric_names.HOPS, in
        ms); `framework` (pipecat, livekit) is a property, not a dimension. Nothing is written for none."""
        unknown = set(figures_ms) - set(HOPS)
        if unknown:
            raise ValueError(f"not a hop: {', '.join(sorted(unknown))} (one of {', '.join(HOPS)})")
        if figures_ms:
            metrics = [{"Name": name, "Unit": "Milliseconds"} for name in figures_ms]
            figures = {name: round(ms, 1) for name, ms in figures_ms.items()}
            self._write_line({"Framework": framework, **figures}, [self._directive(_DIMENSIONS, metrics)])

    def _directive(self, dimensions: list[str], metrics: list[dict[str, str]]) -> dict[str, Any]:
        return {"Namespace": self.namespace, "Dimensions": [dimensions], "Metrics": metrics}

    def _write_line(self, fields: dict[str, Any], directives: list[dict[str, Any]]) -> None:
        line = {ENVIRONMENT: self.environment, ROUTE: self.route, "Endpoint": self.endpoint, **fields}
        line["_aws"] = {"Timestamp": int(time.time() * 1000), "CloudWatchMetrics": directives}
        self._write(orjson.dumps(line).decode())


class Request:
    """One request's figures as its audio arrives: `chunk` for each chunk, then `end` once."""

    def __init__(self, telemetry: Telemetry, bytes_per_second: int) -> None:
        self._telemetry, self._bytes_per_second = telemetry, bytes_per_second
        self.sent_at = time.perf_counter()
        self._first: float | None = None
        self._last = self.sent_at
        self._audio_s = 0.0
        self.underruns = 0
        self._ended = False

    def chunk(self, chunk: AudioChunk) -> None:
        if self._first is None:
            self._first = chunk.at
        # Played from the first chunk on: a chunk that arrives after the audio before it has played out is
        # a gap the caller hears.
        elif chunk.at > self._first + self._audio_s:
            self.underruns += 1
        self._audio_s += len(chunk.data) / self._bytes_per_second
        self._last = chunk.at

    def end(self, error: BaseException | None = None) -> None:
        """Writes the request's line: every figure of one that played audio to its end; the error kind of one
        that failed (a request its caller left early is not written: nothing failed, nothing finished)."""
        if self._ended:
            return
        self._ended = True
        kind = error.kind if isinstance(error, SonicError) else None if error is None else "client"
        figures: dict[str, float] = {}
        if self._first is not None:
            figures[FIRST_AUDIO] = round((self._first - self.sent_at) * 1000, 1)
            if kind is None:
                stream_s = self._last - self.sent_at
                figures[STREAM_TIME] = round(stream_s * 1000, 1)
                figures[REAL_TIME_FACTOR] = round(stream_s / self._audio_s, 3) if self._audio_s else 0.0
                figures[UNDERRUNS] = self.underruns
        self._telemetry.emit(figures, kind)


@contextmanager
def appending_to(path: Path, route: str, *, environment: str, endpoint: str) -> Iterator[Telemetry]:
    """A Telemetry whose lines are appended to `path`, each flushed as written, the file closed on exit: for an
    agent whose stdout is not the log CloudWatch reads (the examples' `--telemetry FILE`)."""
    with path.open("a", encoding="utf-8") as lines:
        yield Telemetry(
            route,
            environment=environment,
            endpoint=endpoint,
            write=lambda line: print(line, file=lines, flush=True),
        )
