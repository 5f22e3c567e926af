"""The pipecat examples, run as a user runs them against `probe serve`: a WAV of the sentence, or a
message that says what to fix (no traceback)."""

from __future__ import annotations

import os
import subprocess
import sys
import wave
from pathlib import Path

import pytest
from aws_cdk.assertions import Template

from tests.cdk_context import ROOT
from tests.examples.agent_row import agent_row
from tests.standins.harness import ServerFactory
from tests.standins.real_clients import FAST, KEY, stream_bytes

TEXT = "Your table is booked for eight."


def _example(name: str, *argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, str(ROOT / "examples" / name), *argv]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # this checkout's sonic_deploy
    return subprocess.run(command, capture_output=True, text=True, cwd=cwd, env=env, timeout=60)


@pytest.mark.parametrize("route", ["sagemaker", "ecs"])
def test_an_example_speaks_the_sentence_into_a_wav(
    route: str, reference_server: ServerFactory, tmp_path: Path, documented: dict[str, Template]
) -> None:
    server = reference_server(*FAST)
    where = (
        ["--endpoint-url", server.base, "--region", "us-east-1"]
        if route == "sagemaker"
        else ["--api-url", server.ws_url, "--api-key", KEY]
    )
    telemetry = ["--telemetry", str(tmp_path / "agent.jsonl")] if route == "sagemaker" else []
    run = _example(
        f"pipecat_{route}.py", *where, *telemetry, "--sample-rate", "16000", "--text", TEXT, cwd=tmp_path
    )
    assert run.returncode == 0, run.stderr
    if telemetry:  # what the dashboard's agent row draws: the utterance's first audio, pipecat's TTS hop
        drawn = agent_row(documented["sagemaker"], tmp_path / "agent.jsonl")
        assert drawn["Agent: first audio its callers got (ms)"] and drawn["Agent: turn hops"]
    with wave.open(str(tmp_path / "speech.wav")) as wav:
        assert (wav.getnchannels(), wav.getsampwidth(), wav.getframerate()) == (1, 2, 16000)
        assert wav.getnframes() * 2 == stream_bytes(TEXT, rate=16000)
    assert run.stdout.startswith("wrote speech.wav")


def test_a_mistake_is_a_message_with_the_fix(
    reference_server: ServerFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = reference_server(*FAST)
    wrong_key = _example("pipecat_ecs.py", "--api-url", server.ws_url, "--api-key", "wrong", cwd=tmp_path)
    assert wrong_key.returncode == 1 and "HTTP 401" in wrong_key.stderr.splitlines()[-1]
    not_ws = _example("pipecat_ecs.py", "--api-url", server.base, "--api-key", KEY, cwd=tmp_path)
    assert not_ws.returncode == 2 and "Fix: the stack output ApiUrl" in not_ws.stderr
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    no_region = _example("pipecat_sagemaker.py", "--endpoint-url", server.base, cwd=tmp_path)
    assert no_region.returncode == 2 and "Fix: pass region=" in no_region.stderr
    for run in (wrong_key, not_ws, no_region):
        assert "Traceback" not in run.stderr
    assert not (tmp_path / "speech.wav").exists()
