"""Property-based: any stream of events (tests/fuzz/probe_streams.py), however a transport cuts its bytes,
is counted once, in the kind docs/probe.md gives it, and the same whatever the cuts."""

from __future__ import annotations

from hypothesis import given, settings

from sonic_deploy.audio import AudioFormat
from sonic_deploy.probe.metrics import MalformedEventError, StreamRecorder
from sonic_deploy.probe.stats import LevelStats
from sonic_deploy.probe.targets.sagemaker import PartReader
from tests.fuzz import examples
from tests.fuzz.probe_streams import Event, cuts, events, expected_kind, render


def _count(stream: list[Event], where: list[int]) -> StreamRecorder:
    """The stream as SageMaker's JSON lines in parts cut at `where` (cycled), read as the boto3 target
    reads them (`SageMakerTarget._read`)."""
    data = b"".join(render(event) + b"\n" for event in stream)
    recorder = StreamRecorder(audio=AudioFormat(), scheduled_at=0.0, open_loop=False)
    parts, offset, step = PartReader(recorder), 0, 0
    try:
        while offset < len(data) and not parts.finished:
            size = where[step % len(where)] if where else len(data)
            parts.feed(data[offset : offset + size], 1.0)
            offset, step = offset + size, step + 1
        parts.ended()
    except MalformedEventError as error:
        recorder.fail("malformed", str(error))
    return recorder


@settings(max_examples=examples(300))
@given(events(), cuts())
def test_any_stream_is_counted_once_in_its_documented_kind_whatever_the_cuts(
    stream: list[Event], where: list[int]
) -> None:
    whole, cut = _count(stream, []), _count(stream, where)
    assert (cut.ok, cut.error) == (whole.ok, whole.error)
    assert whole.error == expected_kind(stream)
    assert whole.ok is (whole.error is None)
    stats = LevelStats()
    stats.add(whole.record())
    assert stats.ok + sum(stats.errors.values()) == stats.requests == 1
