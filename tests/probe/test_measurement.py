"""Per-request measurement on synthetic timestamps: TTFA origin, gaps, underruns, audible audio."""

from __future__ import annotations

import base64

import pytest

from sonic_deploy.audio import ALAW_TABLE, MULAW_TABLE, AudibleDetector, AudioFormat, tone
from sonic_deploy.probe.metrics import MalformedEventError, StreamRecorder

S16 = AudioFormat("pcm_s16le", 8000)  # 16 bytes per millisecond


def _recorder(open_loop: bool = False, scheduled_at: float = 0.0, delay_ms: float = 0.0) -> StreamRecorder:
    recorder = StreamRecorder(
        audio=S16, scheduled_at=scheduled_at, open_loop=open_loop, playback_delay_ms=delay_ms
    )
    recorder.sent_at = 10.0
    return recorder


def test_chunks_faster_than_real_time_never_underrun() -> None:
    recorder = _recorder()
    for index in range(10):  # 20 ms of audio every 10 ms
        recorder.audio_bytes(tone(S16, 20, False), 10.09 + index * 0.01)
    recorder.done()
    record = recorder.record()
    assert record["ttfa_ms"] == pytest.approx(90.0)
    assert record["underruns"] == 0
    assert record["audio_ms"] == pytest.approx(200.0)
    assert record["max_gap_ms"] == pytest.approx(10.0)


def test_a_stall_longer_than_the_buffer_is_one_underrun_of_the_right_length() -> None:
    recorder = _recorder()
    arrivals = [10.1 + i * 0.01 for i in range(5)] + [10.5 + i * 0.01 for i in range(5)]
    for at in arrivals:
        recorder.audio_bytes(tone(S16, 20, False), at)
    recorder.done()
    record = recorder.record()
    # 100 ms of audio played from 10.1 runs out at 10.2; the next chunk comes at 10.5.
    assert record["underruns"] == 1
    assert record["underrun_ms"] == pytest.approx(300.0)
    assert record["max_gap_ms"] == pytest.approx(360.0)


def test_a_playback_buffer_absorbs_a_short_stall() -> None:
    recorder = _recorder(delay_ms=400)
    for at in [10.1 + i * 0.01 for i in range(5)] + [10.5]:
        recorder.audio_bytes(tone(S16, 20, False), at)
    assert recorder.record()["underruns"] == 0


def test_open_loop_latency_counts_from_the_scheduled_start() -> None:
    recorder = _recorder(open_loop=True, scheduled_at=9.0)
    recorder.audio_bytes(b"\x01\x00" * 8, 10.09)
    recorder.done()
    record = recorder.record()
    assert record["ttfa_ms"] == pytest.approx(1090.0)
    assert record["service_ttfa_ms"] == pytest.approx(90.0)


def test_first_audible_audio_skips_leading_silence() -> None:
    recorder = _recorder()
    recorder.audio_bytes(tone(S16, 20, True), 10.1)
    recorder.audio_bytes(tone(S16, 20, True), 10.12)
    recorder.audio_bytes(tone(S16, 20, False), 10.14)
    record = recorder.record()
    assert record["ttfa_ms"] == pytest.approx(100.0)
    assert record["ttfa_audible_ms"] == pytest.approx(140.0)


@pytest.mark.parametrize("encoding", ["pcm_s16le", "pcm_f32le", "pcm_mulaw", "pcm_alaw"])
def test_audible_detection_in_every_encoding_across_odd_chunk_boundaries(encoding: str) -> None:
    audio = AudioFormat(encoding, 8000)
    silence, sound = tone(audio, 10, True), tone(audio, 10, False)
    detector = AudibleDetector(audio, threshold_db=-40)
    stream = silence + sound
    cut = len(silence) + 1  # inside the first audible sample for multi-byte encodings
    assert not detector.feed(stream[: cut - 2])
    assert detector.feed(stream[cut - 2 :])
    assert not AudibleDetector(audio, threshold_db=-6).feed(sound)  # the tone is at -12 dBFS


def test_g711_tables_decode_known_codes() -> None:
    assert MULAW_TABLE[0xFF] == 0
    assert MULAW_TABLE[0x00] == -32124
    assert MULAW_TABLE[0x80] == 32124
    assert ALAW_TABLE[0xD5] == 8
    assert ALAW_TABLE[0x55] == -8
    assert ALAW_TABLE[0xAA] == 32256


# Whatever the standard library's strict decoder refuses (and its ValueError on non-ASCII text).
NOT_BASE64 = ["%%% not base64", "aGk", "aG k=", "aGk=\n", "aGk=aGk=", "aGk\u00e9="]
# What it accepts, the fast decoder's stricter cases among them (padding after a whole group).
BASE64 = ["", "aGk=", "AAAA", "AAAA=", "AAAA==", "AAAAAAAA=", base64.b64encode(bytes(range(256))).decode()]


@pytest.mark.parametrize("data", NOT_BASE64)
def test_chunk_data_the_standard_library_refuses_is_malformed(data: str) -> None:
    with pytest.raises(ValueError):
        base64.b64decode(data, validate=True)
    with pytest.raises(MalformedEventError):
        _recorder().audio_b64(data, 10.1)


@pytest.mark.parametrize("data", BASE64)
def test_chunk_data_the_standard_library_accepts_is_audio(data: str) -> None:
    recorder = _recorder()
    recorder.audio_b64(data, 10.1)
    assert recorder.bytes == len(base64.b64decode(data, validate=True))


def test_chunk_data_is_decoded_exactly() -> None:
    recorder = _recorder()
    with pytest.raises(MalformedEventError):
        recorder.audio_b64(None, 10.1)
    raw = bytes(range(256)) * 7
    recorder.audio_b64(base64.b64encode(raw).decode(), 10.1)
    recorder.audio_b64(base64.b64encode(b"\x00\x10").decode(), 10.2)
    assert recorder.bytes == len(raw) + 2


def test_a_stream_that_ends_without_audio_is_no_audio_not_ok() -> None:
    for chunks in ([], [b""]):  # nothing, or only empty chunks
        recorder = _recorder()
        for data in chunks:
            recorder.audio_bytes(data, 10.1)
        recorder.done()
        assert (recorder.ok, recorder.error) == (False, "no_audio")


@pytest.mark.parametrize("cut", [1, 4, 5, 11, 12, 100])
def test_a_wav_header_on_raw_audio_is_malformed_however_the_chunks_cut_it(cut: int) -> None:
    wav = b"RIFF\x24\x00\x00\x00WAVEfmt " + bytes(40)
    recorder = _recorder()
    with pytest.raises(MalformedEventError, match="WAV header"):
        for offset in range(0, len(wav), cut):
            recorder.audio_bytes(wav[offset : offset + cut], 10.1)


def test_audio_that_is_not_whole_samples_is_malformed_and_chunks_that_cut_samples_are_not() -> None:
    whole, cut_samples = _recorder(), _recorder()
    for data in (b"\x01", b"\x02\x03", b"\x04"):  # two s16 samples over three chunks
        whole.audio_bytes(data, 10.1)
        cut_samples.audio_bytes(data, 10.1)
    cut_samples.audio_bytes(b"\x05", 10.2)
    whole.done()
    cut_samples.done()
    assert (whole.ok, whole.error) == (True, None)
    assert (cut_samples.ok, cut_samples.error) == (False, "malformed")
