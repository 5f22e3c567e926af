"""The LiveKit examples (examples/livekit_*.py), run as their docstrings say, against `probe serve`: each
speaks a sentence into a WAV file; a user's mistake is a message, not a traceback."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import wave
from pathlib import Path
from types import ModuleType

import pytest
from aws_cdk.assertions import Template

from tests.examples.agent_row import agent_row
from tests.standins.harness import ServerFactory
from tests.standins.real_clients import FAST, KEY, RATE, stream_bytes

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TEXT = "Hello from Sonic, spoken through LiveKit Agents."
# LiveKit ends a stream with a final frame: 10 ms of silence of its own when no audio is left for it.
MARKER_BYTES = RATE // 100 * 2


def _example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("example", "route"),
    [
        (
            "livekit_sagemaker",
            ["--endpoint", "sonic-dev", "--region", "us-east-2", "--endpoint-url", "{base}"],
        ),
        ("livekit_ecs", ["--api-url", "{ws_url}"]),
    ],
)
def test_an_example_speaks_a_sentence_into_a_wav_file(
    example: str,
    route: list[str],
    reference_server: ServerFactory,
    tmp_path: Path,
    documented: dict[str, Template],
) -> None:
    server = reference_server(*FAST)
    out = tmp_path / "speech.wav"
    argv = [arg.format(base=server.base, ws_url=server.ws_url) for arg in route]
    telemetry = ["--telemetry", str(tmp_path / "agent.jsonl")] if example == "livekit_sagemaker" else []
    done = subprocess.run(
        [
            sys.executable,
            str(EXAMPLES / f"{example}.py"),
            *argv,
            *telemetry,
            "--text",
            TEXT,
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "CARTESIA_API_KEY": KEY},  # as the examples' docstrings pass it
    )
    assert done.returncode == 0, done.stderr
    if telemetry:  # what the dashboard's agent row draws: the utterances' first audio and count
        drawn = agent_row(documented["sagemaker"], tmp_path / "agent.jsonl")
        assert drawn["Agent: first audio its callers got (ms)"] and drawn["Agent: utterances and underruns"]
    assert out.read_bytes()[:4] == b"RIFF" and out.read_bytes()[8:12] == b"WAVE"
    with wave.open(str(out)) as wav:
        assert (wav.getframerate(), wav.getnchannels(), wav.getsampwidth()) == (RATE, 1, 2)
        # The whole sentence: the server's schedule for it (LiveKit's Cartesia plugin sends it with a
        # trailing space), and LiveKit's own 10 ms final frame when no audio was left to carry it.
        spoken = stream_bytes(TEXT + (" " if example == "livekit_ecs" else ""))
        assert wav.getnframes() * 2 - spoken in (0, MARKER_BYTES)
    assert done.stdout.startswith(f"wrote {out}: ")


def test_a_mistake_is_a_message_with_the_fix(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = str(tmp_path / "speech.wav")
    cases = [
        (
            "livekit_ecs",
            ["--api-url", "http://127.0.0.1:8080", "--api-key", "k"],
            "ws://HOST:PORT/tts/websocket",
        ),
        (
            "livekit_sagemaker",
            ["--endpoint", "e", "--region", "us-east-2", "--sample-rate", "11025"],
            "8000, 16000",
        ),
        (
            "livekit_sagemaker",
            ["--endpoint", "e", "--region", "us-east-2", "--telemetry", str(tmp_path)],
            "a folder, not a file. Fix: give a path to write the telemetry lines to",
        ),
    ]
    for example, argv, fix in cases:
        with pytest.raises(SystemExit) as exited:
            _example(example).main([*argv, "--out", out])
        assert exited.value.code == 2
        assert fix in capsys.readouterr().err
