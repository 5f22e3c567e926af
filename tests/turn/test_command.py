"""`sonic-deploy probe turn` end to end, against `probe serve`'s stand-ins for every hop: both routes, both
speech-to-text services, both kinds of language model; its outputs; its errors, named and counted."""

from __future__ import annotations

import json
import struct
import wave
from pathlib import Path
from typing import Any

import pytest

from sonic_deploy.cli import main
from sonic_deploy.turn.call import HOPS
from tests.standins.harness import ReferenceServer, ServerFactory

ROOT = Path(__file__).resolve().parents[2]
# Short delays and short replies: each hop's delay is still one the stand-in sets, and never beats.
STANDINS = (
    "--first-byte-ms", "30", "--jitter-ms", "0", "--chunk-ms", "20", "--pace", "0.5", "--ms-per-char", "2",
    "--stt-final-ms", "80", "--llm-first-token-ms", "60", "--llm-tokens-per-s", "400",
)  # fmt: skip
INJECTED = {"stt": 80.0, "llm": 60.0, "tts": 30.0}


def _utterance(path: Path, rate: int = 8000) -> Path:
    """0.1 s of silence, 0.3 s of a loud square wave, 0.2 s of silence: 16-bit PCM."""
    samples = (
        [0] * (rate // 10)
        + [6000 if (i // 8) % 2 else -6000 for i in range(rate * 3 // 10)]
        + [0] * (rate // 5)
    )
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(struct.pack(f"<{len(samples)}h", *samples))
    return path


def _turn(server: ReferenceServer, out: Path, *options: str, route: str = "ecs") -> int:
    base = server.base
    ws = base.replace("http://", "ws://")
    argv = ["probe", "turn", "--route", route, "--llm-model", "stand-in", "--out", str(out), "--quiet"]
    argv += (
        ["--tts-url", f"{ws}/tts/websocket"]
        if route == "ecs"
        else ["--endpoint", "sonic", "--endpoint-url", base]
    )
    if "--stt" not in options or "ink" in options:
        argv += ["--stt-url", ws]
    if "--llm" not in options:
        argv += ["--llm-url", f"{base}/v1"]
    argv += ["--gap-ms", "0", "--ramp-up", "0.2", "--budget", str(ROOT / "config/turn_budget.toml"), *options]
    return main(argv)


def _outputs(out: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    lines = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    return lines, json.loads((out / "summary.json").read_text())


@pytest.mark.parametrize(
    ("route", "hops"),
    [
        ("ecs", ()),
        ("sagemaker", ("--stt", "transcribe", "--llm", "bedrock")),
    ],
    ids=["ecs-ink-openai", "sagemaker-transcribe-bedrock"],
)
def test_a_run_times_every_hop_of_every_turn(
    route: str, hops: tuple[str, ...], reference_server: ServerFactory, tmp_path: Path
) -> None:
    server = reference_server(*STANDINS)
    wav = str(_utterance(tmp_path / "caller.wav"))
    extra: list[str] = []
    if "transcribe" in hops:
        extra += ["--transcribe-endpoint-url", server.base.replace("http://", "ws://")]
    if "bedrock" in hops:
        extra += ["--bedrock-endpoint-url", server.base]
    code = _turn(
        server,
        tmp_path / "out",
        *hops,
        *extra,
        "--wav",
        wav,
        "--concurrency",
        "2",
        "--turns",
        "3",
        route=route,
    )
    lines, summary = _outputs(tmp_path / "out")
    assert code == 0
    assert len(lines) == 6 and sum(line["warmup"] for line in lines) == 2
    assert all("error" not in line for line in lines), lines
    assert (summary["turns"], summary["ok"], summary["errors"]) == (4, 4, {})
    for hop, delay in INJECTED.items():  # never early; the upper bound is loose: a busy machine is late
        assert delay <= summary["hops_ms"][hop]["p50"] < delay + 500
    assert summary["turn_ms"]["p50"] >= sum(INJECTED.values())
    assert summary["hops"] == {
        "stt": hops[1] if hops else "ink",
        "llm": hops[3] if hops else "openai",
        "llm_model": "stand-in",
        "tts": route,
    }
    assert summary["budget"]["verdict"] == "within budget"
    assert (tmp_path / "out" / "waterfall.png").stat().st_size > 10_000
    for line in lines:
        assert sum(line["hops_ms"][hop] for hop in HOPS) == pytest.approx(line["turn_ms"], abs=0.01)
        assert line["reply"].startswith("Sure, your table") and line["transcript"]


def test_shipped_audio_plays_both_forms(reference_server: ServerFactory, tmp_path: Path) -> None:
    server = reference_server(*STANDINS)
    assert _turn(server, tmp_path / "out", "--audio", "wideband", "--turns", "2", "--warmup-turns", "0") == 0
    lines, summary = _outputs(tmp_path / "out")
    assert [line["utterance"] for line in lines] == ["book-16k", "time-16k"]
    assert summary["audio"] == {"encoding": "pcm_s16le", "sample_rate": 16000, "frame_ms": 20}


def test_a_hop_that_fails_is_named_counted_and_the_run_ends(
    reference_server: ServerFactory, tmp_path: Path
) -> None:
    server = reference_server(*STANDINS)
    wav = str(_utterance(tmp_path / "caller.wav"))
    code = _turn(
        server,
        tmp_path / "out",
        "--llm-url",
        "http://127.0.0.1:9/v1",
        "--wav",
        wav,
        "--turns",
        "2",
        "--warmup-turns",
        "0",
    )
    lines, summary = _outputs(tmp_path / "out")
    assert code == 1  # no turn was timed
    assert [line["error"]["hop"] for line in lines] == ["llm", "llm"]
    assert summary["errors"] == {"llm:refused": 2}


def test_a_speech_to_text_service_not_there_is_one_failed_turn_per_call(
    reference_server: ServerFactory, tmp_path: Path
) -> None:
    server = reference_server(*STANDINS)
    code = _turn(
        server,
        tmp_path / "out",
        "--stt-url",
        "ws://127.0.0.1:9",
        "--concurrency",
        "3",
        "--turns",
        "2",
        "--warmup-turns",
        "0",
    )
    _, summary = _outputs(tmp_path / "out")
    assert code == 1 and summary["errors"] == {"stt:refused": 3}


@pytest.mark.parametrize(
    ("options", "says"),
    [
        (("--turns", "2", "--warmup-turns", "2"), "--warmup-turns 2 leaves no turn to time of --turns 2"),
        (("--wav", "missing.wav"), "--wav 'missing.wav': cannot read it"),
        (("--calls", "3", "--rate", "1"), "--calls is the closed loop's"),
        (("--duration", "5"), "--duration is the open loop's"),
        (("--budget", "nowhere.toml"), "--budget 'nowhere.toml': cannot read it"),
        (("--concurrency", "0"), "--concurrency '0': out of range. Fix: give calls, from 1"),
        (
            ("--stt-model", "ink-3", "--stt", "transcribe"),
            "--stt-model is for --stt ink, not --stt transcribe: drop it",
        ),
        (("--endpoint", "sonic"), "--endpoint is for --route sagemaker, not --route ecs: drop it"),
        (("--bedrock-region", "us-east-1"), "--bedrock-region is for --llm bedrock, not --llm openai"),
        (("--rate", "1", "--concurrency", "4"), "--concurrency is the closed loop's"),
        (("--audio", "wideband", "--wav", "WAV11025"), "--audio chooses the shipped utterances"),
        (("--audible-threshold-db", "3"), "--audible-threshold-db '3': out of range"),
        (
            ("--frame-ms", "10", "--wav", "WAV11025"),
            "11025 Hz does not cut into whole samples of --frame-ms 10",
        ),
    ],
)
def test_a_mistake_is_one_line_naming_the_fix(
    options: tuple[str, ...], says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [
        "probe",
        "turn",
        "--route",
        "ecs",
        "--tts-url",
        "ws://127.0.0.1:9/tts/websocket",
        "--llm-url",
        "http://127.0.0.1:9/v1",
        "--llm-model",
        "m",
        "--out",
        str(tmp_path / "o"),
        *options,
    ]
    if "WAV11025" in argv:
        argv[argv.index("WAV11025")] = str(_utterance(tmp_path / "odd.wav", rate=11025))
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    (error,) = capsys.readouterr().err.splitlines()
    assert says in error and "Fix: " in error
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    ("missing", "says"),
    [
        (("--tts-url",), "--route ecs needs --tts-url"),
        (("--llm-url",), "--llm openai needs --llm-url"),
        (("--llm-model",), "--llm-model is needed"),
    ],
)
def test_a_missing_setting_names_what_to_give(
    missing: tuple[str, ...], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    given = {
        "--tts-url": "ws://127.0.0.1:9/tts/websocket",
        "--llm-url": "http://127.0.0.1:9/v1",
        "--llm-model": "m",
    }
    argv = ["probe", "turn", "--route", "ecs"]
    for option, value in given.items():
        if option not in missing:
            argv += [option, value]
    with pytest.raises(SystemExit):
        main(argv)
    assert says in capsys.readouterr().err


def test_ink_takes_its_own_key_and_the_ecs_route_its_own(
    reference_server: ServerFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = reference_server(*STANDINS, "--api-key", "deployment-key")
    wav = str(_utterance(tmp_path / "caller.wav"))
    monkeypatch.setenv("CARTESIA_API_KEY", "deployment-key")
    monkeypatch.setenv("CARTESIA_STT_API_KEY", "cloud-key")  # not what this server takes
    assert _turn(server, tmp_path / "wrong", "--wav", wav, "--turns", "1", "--warmup-turns", "0") == 1
    assert _outputs(tmp_path / "wrong")[1]["errors"] == {"stt:credentials": 1}
    monkeypatch.delenv("CARTESIA_STT_API_KEY")  # then Ink takes CARTESIA_API_KEY too
    assert _turn(server, tmp_path / "right", "--wav", wav, "--turns", "1", "--warmup-turns", "0") == 0


def test_the_ecs_tts_over_tls_with_a_private_ca(reference_server: ServerFactory, tmp_path: Path) -> None:
    """The TTS on wss:// (a certificate a private CA signed), speech-to-text and the model in the clear:
    `--ca-bundle` trusts that CA for the TTS, and without it each turn fails at the TTS as kind `tls`."""
    from tests.probe.private_ca import make_private_ca

    ca = make_private_ca(tmp_path)
    hops = reference_server(*STANDINS)
    tts = reference_server(*STANDINS, "--tls-cert", str(ca.cert), "--tls-key", str(ca.key), ca_file=ca.ca)
    wav = str(_utterance(tmp_path / "caller.wav"))

    def turn(out: Path, *options: str) -> int:
        ws = hops.base.replace("http://", "ws://")
        hop_urls = ["--tts-url", tts.ws_url, "--stt-url", ws, "--llm-url", f"{hops.base}/v1"]
        run = ["--out", str(out), "--quiet", "--gap-ms", "0", "--ramp-up", "0", "--wav", wav]
        load = ["--calls", "1", "--turns", "2"]
        return main(
            ["probe", "turn", "--route", "ecs", "--llm-model", "stand-in", *hop_urls, *run, *load, *options]
        )

    assert turn(tmp_path / "trusted", "--ca-bundle", str(ca.ca)) == 0
    _, summary = _outputs(tmp_path / "trusted")
    assert (summary["ok"], summary["errors"]) == (1, {})
    turn(tmp_path / "untrusted")
    lines, summary = _outputs(tmp_path / "untrusted")
    assert summary["ok"] == 0
    failed = [line for line in lines if "error" in line]
    assert failed and all(line["error"]["hop"] == "tts" and line["error"]["kind"] == "tls" for line in failed)
