"""The offline dashboard picture: Fn::Join resolved, every widget drawn, probe data only where a probe run
measures it, "no data offline" everywhere else."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from aws_cdk.assertions import Template

from sonic_deploy import dashboard_render
from sonic_deploy.dashboard_render import dashboards, load_samples, render, resolve
from tests.conftest import CONFIG_DIR, synthesize_from


def _samples(path: Path) -> Path:
    """Eight requests over 40 s: two in flight at a time, one throttled."""
    lines = []
    for i in range(8):
        end = 1000.0 + 5 * i + 2
        ok = i != 6
        lines.append(
            {
                "warmup": False,
                "time": end,
                "ok": ok,
                "error": None if ok else "error_event_429",
                "ttfa_ms": 100.0 + 10 * i if ok else None,
                "total_ms": 4000.0 if ok else 1.0,
            }
        )
    lines.append(
        {"warmup": True, "time": 999.0, "ok": True, "error": None, "ttfa_ms": 900.0, "total_ms": 1.0}
    )
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


@pytest.fixture(scope="module")
def canary_template(tmp_path_factory: pytest.TempPathFactory) -> Template:
    config = tmp_path_factory.mktemp("render") / "config"
    shutil.copytree(CONFIG_DIR, config)
    dev = config / "environments/dev.toml"
    dev.write_text(dev.read_text().replace("# enabled = true", "enabled = true"))
    return Template.from_stack(synthesize_from(config)["ecs"])


def test_resolve_joins_and_shows_references() -> None:
    assert (
        resolve({"Fn::Join": ["", ["a", {"Ref": "Cluster"}, {"Fn::GetAtt": ["Alarm", "Arn"]}]]})
        == "a<Cluster><Alarm.Arn>"
    )


def test_load_samples_drops_warmups_and_starts_at_zero(tmp_path: Path) -> None:
    samples = load_samples(_samples(tmp_path / "samples.jsonl"))
    assert len(samples) == 8
    assert min(s.start for s in samples) == 0
    assert sum(s.throttled for s in samples) == 1


def test_every_widget_is_drawn_and_says_what_it_is(canary_template: Template, tmp_path: Path) -> None:
    ((body,),) = [list(dashboards(canary_template.to_json()).values())]
    samples = load_samples(_samples(tmp_path / "samples.jsonl"))
    out = tmp_path / "dashboard.png"
    drawn = render(body, samples, out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(drawn) == len(body["widgets"])
    ttfa = next(line for line in drawn if line.startswith("Canary: time to first audio"))
    assert "drew canary TTFA p50, canary TTFA p95" in ttfa
    runs = next(line for line in drawn if line.startswith("Canary: requests per run"))
    assert "drew canary succeeded, canary failed, canary throttled" in runs
    streams = next(line for line in drawn if line.startswith("Active streams"))
    assert "drew worker load" in streams and "no data offline: Sonic/ECS inferno_worker_capacity" in streams
    worker = next(line for line in drawn if line.startswith("Workers: time to first audio"))
    assert worker.endswith("no data offline: Sonic/ECS inferno_worker_ttfa p95")
    assert any("no data offline: alarm states" in line for line in drawn)


def test_the_canary_note_is_drawn_as_text(ecs_template: Template, tmp_path: Path) -> None:
    ((body,),) = [list(dashboards(ecs_template.to_json()).values())]
    drawn = render(body, load_samples(_samples(tmp_path / "samples.jsonl")), tmp_path / "d.png")
    assert any(line.startswith("text: Canary: off") for line in drawn)


def test_the_command_writes_the_picture(
    canary_template: Template, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    template = tmp_path / "SonicEcs.template.json"
    template.write_text(json.dumps(canary_template.to_json()))
    out = tmp_path / "out.png"
    assert dashboard_render.main([str(template), str(_samples(tmp_path / "s.jsonl")), "-o", str(out)]) == 0
    assert out.exists() and f"wrote {out}" in capsys.readouterr().out


def test_a_template_without_a_dashboard_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    template = tmp_path / "t.json"
    template.write_text(json.dumps({"Resources": {}}))
    assert dashboard_render.main([str(template), str(_samples(tmp_path / "s.jsonl"))]) == 2
    assert capsys.readouterr().err == f"dashboard_render: {template}: 0 dashboards, expected one per stack\n"
