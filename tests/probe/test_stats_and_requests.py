"""Histograms merged from several workers equal one histogram of everything; request bodies per route."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from sonic_deploy.audio import AudioFormat
from sonic_deploy.probe.level import Level
from sonic_deploy.probe.requests import PRESETS, RequestTemplate, load_transcripts
from sonic_deploy.probe.stats import LevelStats


def _record(chance: random.Random, ok: bool = True) -> dict[str, Any]:
    ttfa = chance.lognormvariate(4.5, 0.3)
    return {
        "ok": ok,
        "error": None if ok else "cut",
        "ttfa_ms": ttfa,
        "ttfa_audible_ms": ttfa + 5,
        "service_ttfa_ms": ttfa,
        "connect_ms": None,
        "total_ms": ttfa + 500,
        "rtf": chance.uniform(0.2, 0.9),
        "max_gap_ms": 12.0,
        "late_ms": None,
        "underruns": chance.choice([0, 0, 1]),
    }


def test_merged_worker_histograms_equal_a_single_histogram() -> None:
    chance = random.Random(7)
    records = [_record(chance, ok=chance.random() > 0.1) for _ in range(3000)]
    whole, parts = LevelStats(), [LevelStats() for _ in range(3)]
    for index, record in enumerate(records):
        whole.add(record)
        parts[index % 3].add(record)
    merged = LevelStats()
    for part in parts:
        merged.merge(part.encode())
    assert merged.summary(8, None) == whole.summary(8, None)
    summary = merged.summary(8, None)
    assert summary["requests"] == 3000
    assert summary["ok"] + summary["errors"]["cut"] == 3000
    ordered = sorted(r["ttfa_ms"] for r in records if r["ok"])
    exact_p50 = ordered[len(ordered) // 2]
    assert summary["ttfa_ms"]["p50"] == pytest.approx(exact_p50, rel=2e-3)  # 3 significant digits
    assert summary["ttfa_ms"]["max"] == pytest.approx(ordered[-1], rel=2e-3)


def test_level_shares_add_up_to_the_whole() -> None:
    level = Level(0, concurrency=7, requests=23, warmup=5)
    shares = [level.share(w, 3) for w in range(3)]
    assert sum(s.concurrency or 0 for s in shares) == 7
    assert sum(s.requests for s in shares) == 23
    assert sum(s.warmup for s in shares) == 5
    rates = [Level(0, rate=10.0).share(w, 4).rate for w in range(4)]
    assert sum(r or 0 for r in rates) == pytest.approx(10.0)
    # Fewer slots than workers: the requests go to the workers with a slot, none is left unrun.
    few = [Level(0, concurrency=2, requests=9, warmup=2).share(w, 3) for w in range(3)]
    assert [(s.concurrency, s.requests, s.warmup) for s in few] == [(1, 5, 1), (1, 4, 1), (0, 0, 0)]


def test_bodies_follow_each_route() -> None:
    template = RequestTemplate(audio=AudioFormat(*PRESETS["telephony"]))
    ws = template.body("Hello.", "ctx-1", "ws")
    assert ws["context_id"] == "ctx-1" and ws["continue"] is False and ws["model_id"]
    assert ws["output_format"] == {"container": "raw", "encoding": "pcm_mulaw", "sample_rate": 8000}
    assert ws["voice"]["mode"] == "id"
    sagemaker = template.body("Hello.", "ctx-2", "sagemaker")
    assert sagemaker["context_id"] == "ctx-2" and "model_id" not in sagemaker
    assert sagemaker["language"] == "en"
    http = template.body("Hello.", "ctx-3", "http")
    assert "context_id" not in http and http["transcript"] == "Hello."


def test_transcripts_from_a_file_skip_blank_lines(tmp_path: Path) -> None:
    path = tmp_path / "lines.txt"
    path.write_text("One.\n\n  Two.  \n")
    assert load_transcripts(None, path) == ("One.", "Two.")
    path.write_text("\n")
    with pytest.raises(ValueError, match="no transcript"):
        load_transcripts(None, path)
    with pytest.raises(ValueError, match="unknown encoding"):
        AudioFormat("mp3", 44100)


def test_sagemaker_probe_without_region_or_credentials_says_so(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from sonic_deploy.cli import main

    for name in (
        "AWS_REGION",
        "AWS_DEFAULT_REGION",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_PROFILE",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    args = [
        "probe",
        "sagemaker",
        "--endpoint",
        "e",
        "--endpoint-url",
        "http://127.0.0.1:9",
        "--out",
        str(tmp_path / "o"),
    ]
    assert main(args) == 2
    assert "no AWS Region for the SageMaker runtime. Fix: pass --region" in capsys.readouterr().err
    assert main([*args, "--region", "us-east-1"]) == 2
    assert "no AWS credentials found. Fix: sign in" in capsys.readouterr().err
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "x")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "y")
    bad_url = [*args[:5], "not a url", "--region", "us-east-1", "--out", str(tmp_path / "o")]
    with pytest.raises(SystemExit) as stopped:
        main(bad_url)
    assert stopped.value.code == 2
    assert "--endpoint-url 'not a url': a URL holds no spaces" in capsys.readouterr().err
    bad_region = [*args[:6], "--region", "us east", "--out", str(tmp_path / "o")]
    with pytest.raises(SystemExit) as stopped:
        main(bad_region)
    assert stopped.value.code == 2
    assert (
        "--region 'us east': not an AWS Region name. Fix: give an AWS Region (write a Region such as"
        in capsys.readouterr().err
    )
    assert not (tmp_path / "o").exists()  # nothing written for a run that could not start
