"""Caller audio: the shipped utterances, a user's WAV files, the end of speech found in them."""

from __future__ import annotations

import struct
import wave
from pathlib import Path

import pytest

from sonic_deploy.audio import MULAW_TABLE
from sonic_deploy.turn.caller_audio import CallerAudioError, read_wav, shipped


def _pcm_wav(path: Path, rate: int, samples: list[int], channels: int = 1, width: int = 2) -> Path:
    with wave.open(str(path), "wb") as out:
        out.setnchannels(channels)
        out.setsampwidth(width)
        out.setframerate(rate)
        out.writeframes(struct.pack(f"<{len(samples)}h", *samples) if width == 2 else bytes(samples))
    return path


def _mulaw_wav(path: Path, rate: int, codes: bytes) -> Path:
    fmt = struct.pack("<HHIIHH", 7, 1, rate, rate, 1, 8) + b"\x00\x00"
    body = (
        b"WAVE"
        + b"fmt "
        + struct.pack("<I", len(fmt))
        + fmt
        + b"data"
        + struct.pack("<I", len(codes))
        + codes
    )
    path.write_bytes(b"RIFF" + struct.pack("<I", len(body)) + body)
    return path


@pytest.mark.parametrize(
    ("kind", "encoding", "rate"), [("telephony", "pcm_mulaw", 8000), ("wideband", "pcm_s16le", 16000)]
)
def test_the_shipped_utterances_are_the_two_lines_in_conversation_order(
    kind: str, encoding: str, rate: int
) -> None:
    utterances = shipped(kind)
    assert [item.name.split("-")[0] for item in utterances] == ["book", "time", "thanks"]
    for item in utterances:
        assert (item.encoding, item.sample_rate) == (encoding, rate)
        # Speech, then the 250 ms of silence the script pads it with (and eSpeak's own tail).
        assert 1.5 < item.speech_end_s <= item.duration_s - 0.25


def test_both_forms_of_an_utterance_end_their_speech_alike() -> None:
    for narrow, wide in zip(shipped("telephony"), shipped("wideband"), strict=True):
        assert abs(narrow.speech_end_s - wide.speech_end_s) < 0.005


def test_the_end_of_speech_is_the_last_loud_sample(tmp_path: Path) -> None:
    rate = 16000
    loud = [8000] * (rate // 2)  # -12 dBFS for 0.5 s, after 0.1 s of silence and before 0.4 s more
    audio = read_wav(_pcm_wav(tmp_path / "a.wav", rate, [0] * (rate // 10) + loud + [30] * (rate * 4 // 10)))
    assert audio.speech_end_s == pytest.approx(0.6, abs=1 / rate)
    assert audio.duration_s == pytest.approx(1.0)


def test_mu_law_files_are_read_and_decoded_for_a_pcm_only_service(tmp_path: Path) -> None:
    codes = bytes([0xFF] * 800 + [0x10] * 1600 + [0xFF] * 800)  # silence, loud, silence at 8 kHz
    audio = read_wav(_mulaw_wav(tmp_path / "m.wav", 8000, codes))
    assert audio.encoding == "pcm_mulaw" and audio.speech_end_s == pytest.approx(0.3)
    pcm = audio.as_pcm16()
    assert pcm.encoding == "pcm_s16le" and pcm.speech_end_s == audio.speech_end_s
    assert struct.unpack("<h", pcm.data[1600:1602])[0] == MULAW_TABLE[0x10]


def test_frames_are_whole_and_the_last_is_padded_with_silence(tmp_path: Path) -> None:
    audio = read_wav(_pcm_wav(tmp_path / "a.wav", 8000, [9000] * 500))  # 62.5 ms
    frames = audio.frames(20)
    assert [len(frame) for frame in frames] == [320] * 4
    assert frames[-1][:40] == struct.pack("<h", 9000) * 20 and frames[-1][40:] == b"\x00" * 280


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda p: _pcm_wav(p, 16000, [9000] * 100, channels=2), "2 channels"),
        (lambda p: _pcm_wav(p, 16000, [9] * 100, width=1), "8-bit samples"),
        (lambda p: _pcm_wav(p, 16000, [0] * 1600), "no sample reaches -40 dBFS"),
        (lambda p: p.write_bytes(b"ID3 not a wav at all") and p, "not a WAV file"),
        (lambda p: p, "cannot read it"),
        (
            lambda p: (
                _pcm_wav(p, 8000, [9000] * 100).write_bytes(
                    p.read_bytes()[:24] + b"\x00" * 4 + p.read_bytes()[28:]
                )
                and p
            ),
            "a sample rate of 0 Hz",
        ),
    ],
    ids=["stereo", "8-bit", "silent", "not-wav", "missing", "rate-0"],
)
def test_a_file_that_cannot_be_played_is_named_with_the_fix(tmp_path: Path, make: object, says: str) -> None:
    path = tmp_path / "caller.wav"
    assert callable(make)
    make(path)
    with pytest.raises(CallerAudioError) as raised:
        read_wav(path)
    assert str(path) in str(raised.value) and says in str(raised.value)
    if says not in ("cannot read it",):
        assert "Fix:" in str(raised.value)
