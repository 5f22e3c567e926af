"""The offline dashboard picture: Fn::Join resolved, every widget drawn, probe data only where a probe run
measures it, "no data offline" everywhere else."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import numpy
import pytest
from aws_cdk.assertions import Template
from hypothesis import given, settings
from syrupy.assertion import SnapshotAssertion

from sonic_deploy import dashboard_render
from sonic_deploy.dashboard_inputs import TEMPLATE_FIX
from sonic_deploy.dashboard_render import STREAM_LABEL, dashboards, render, resolve
from sonic_deploy.dashboard_series import Line, Sample, bins, lines, load_samples, offline_series
from tests.conftest import CONFIG_DIR
from tests.fuzz import dashboard as fuzz
from tests.fuzz import examples


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


@pytest.fixture
def canary_template(documented: dict[str, Template]) -> Template:
    return documented["ecs"]


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
    # The ECS streams widget graphs load / capacity, which a probe run does not measure.
    streams = next(line for line in drawn if line.startswith("Active streams"))
    assert streams.endswith("no data offline: load / capacity")
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


# docs/operate.md's picture: dev's ECS dashboard with the canary and agent on, and the samples of the run it
# quotes.
EXAMPLE_PICTURE = CONFIG_DIR.parent / "docs" / "dashboard-example.png"
EXAMPLE_SAMPLES = CONFIG_DIR.parent / "docs" / "dashboard-example.samples.jsonl"
EXAMPLE_TITLE = (
    "SonicEcs dashboard (dev, canary and agent on), drawn offline: canary widgets from a probe run against "
    "probe serve --capacity 8"
)


def test_the_documented_picture_is_the_current_dashboard(
    canary_template: Template, tmp_path: Path, request: pytest.FixtureRequest, snapshot: SnapshotAssertion
) -> None:
    """A snapshot of what the picture draws, widget by widget (the renderer's own account, not the PNG's
    bytes, which a new matplotlib changes): a dashboard change fails it, and `make regenerate` (pytest
    --snapshot-update) redraws the picture with the snapshot."""
    ((body,),) = [list(dashboards(canary_template.to_json()).values())]
    drawn = tmp_path / "dashboard.png"
    summary = render(body, load_samples(EXAMPLE_SAMPLES), drawn, title=EXAMPLE_TITLE)
    if request.config.getoption("--snapshot-update"):
        shutil.copyfile(drawn, EXAMPLE_PICTURE)
    assert summary == snapshot, (
        f"the dashboard changed: run `make regenerate` and commit {EXAMPLE_PICTURE.name}"
    )


def test_a_template_without_a_dashboard_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    template = tmp_path / "t.json"
    template.write_text(json.dumps({"Resources": {}}))
    assert dashboard_render.main([str(template), str(_samples(tmp_path / "s.jsonl"))]) == 2
    assert capsys.readouterr().err == (
        f"{dashboard_render.PROG}: {template}: Resources = '(0 dashboards)': not one AWS::CloudWatch::Dashboard. "
        f"Fix: {TEMPLATE_FIX}\n"
    )


def _write(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _record(
    end: float,
    *,
    ok: bool = True,
    ttfa: float | None = 100.0,
    total_ms: float = 1000.0,
    error: str | None = None,
) -> dict[str, Any]:
    return {
        "warmup": False,
        "time": end,
        "ok": ok,
        "error": error,
        "ttfa_ms": ttfa if ok else None,
        "total_ms": total_ms,
    }


def _widget_lines(body: dict[str, Any], title: str) -> list[Line]:
    (widget,) = [w for w in body["widgets"] if w["properties"].get("title", "").startswith(title)]
    return lines(widget["properties"])


def test_plotted_values_are_the_samples_percentiles_and_counts(
    canary_template: Template, tmp_path: Path
) -> None:
    """Each bin's p50/p95 is the nearest-rank percentile (numpy's inverted_cdf) of the first audio of the
    requests that ended in it; the counts over all bins add up to the run's, its last request included."""
    ((body,),) = [list(dashboards(canary_template.to_json()).values())]
    records = [
        _record(
            1000.0 + 0.7 * i,
            ok=i % 9 != 4,
            ttfa=50.0 + (i * 37) % 101,
            error="status_429" if i % 9 == 4 else None,
        )
        for i in range(120)
    ]
    samples = load_samples(_write(tmp_path / "s.jsonl", records))
    windows = bins(samples)
    ttfa_lines = _widget_lines(body, "Canary: time to first audio")
    assert [line.stat for line in ttfa_lines] == ["p50", "p95"]
    for line in ttfa_lines:
        series = offline_series(line, samples)
        assert series is not None
        xs, ys = series
        expected = []
        for index, (lo, hi) in enumerate(windows):
            last = index == len(windows) - 1
            values = [
                s.ttfa_ms
                for s in samples
                if s.ok and s.ttfa_ms is not None and (lo <= s.end < hi or (last and s.end == hi))
            ]
            if values:
                expected.append(float(numpy.percentile(values, float(line.stat[1:]), method="inverted_cdf")))
        assert ys == expected
        assert len(xs) == len(ys)
    counts = {}
    for line in _widget_lines(body, "Canary: requests per run"):
        series = offline_series(line, samples)
        assert series is not None
        counts[line.name] = sum(series[1])
    failed = [r for r in records if not r["ok"]]
    assert counts == {"Succeeded": 120 - len(failed), "Failed": len(failed), "Throttled": len(failed)}


def test_a_one_request_run_is_one_bin_with_its_request(canary_template: Template, tmp_path: Path) -> None:
    ((body,),) = [list(dashboards(canary_template.to_json()).values())]
    samples = load_samples(_write(tmp_path / "s.jsonl", [_record(1000.0, ttfa=123.0)]))
    (p50, _) = _widget_lines(body, "Canary: time to first audio")
    assert offline_series(p50, samples) == ([0.5], [123.0])
    succeeded = next(
        line for line in _widget_lines(body, "Canary: requests per run") if line.name == "Succeeded"
    )
    assert offline_series(succeeded, samples) == ([0.5], [1.0])


def test_requests_in_flight_are_time_weighted(tmp_path: Path) -> None:
    """One request over 10 s and one over its second half: 1 in flight, then 2."""
    samples = load_samples(
        _write(tmp_path / "s.jsonl", [_record(1010.0, total_ms=10_000.0), _record(1010.0, total_ms=5000.0)])
    )
    line = Line("AWS/SageMaker", "ConcurrentRequestsPerModel", "Average", "concurrent requests", True)
    assert offline_series(line, samples) == ([i + 0.5 for i in range(10)], [1.0] * 5 + [2.0] * 5)


@pytest.mark.parametrize(
    ("error", "counted"),
    [
        ("status_429", True),
        ("error_event_429", True),
        ("closed_1013", True),
        ("client_error_ThrottlingException", True),
        ("status_422", False),
        ("closed_1011", False),
    ],
)
def test_throttled_as_the_canary_counts_it(tmp_path: Path, error: str, counted: bool) -> None:
    (sample,) = load_samples(_write(tmp_path / "s.jsonl", [_record(1000.0, ok=False, error=error)]))
    assert sample.throttled is counted


def test_a_line_without_values_says_no_data(canary_template: Template, tmp_path: Path) -> None:
    """Every request failed: no first audio to draw, so the widget says so rather than "drew"."""
    ((body,),) = [list(dashboards(canary_template.to_json()).values())]
    records = [_record(1000.0 + i, ok=False, error="status_429") for i in range(3)]
    drawn = render(body, load_samples(_write(tmp_path / "s.jsonl", records)), tmp_path / "d.png")
    ttfa = next(line for line in drawn if line.startswith("Canary: time to first audio"))
    assert "drew" not in ttfa
    assert ttfa.endswith(
        "no data offline: SonicDeploy/Canary TimeToFirstAudio p50; SonicDeploy/Canary TimeToFirstAudio p95"
    )


def test_no_samples_draws_every_widget_without_data(ecs_template: Template, tmp_path: Path) -> None:
    ((body,),) = [list(dashboards(ecs_template.to_json()).values())]
    drawn = render(body, [], tmp_path / "d.png")
    assert len(drawn) == len(body["widgets"])
    assert not any("drew" in line for line in drawn)


def test_sagemaker_streams_are_the_clients_total_without_the_per_instance_line(
    sagemaker_template: Template, tmp_path: Path
) -> None:
    ((body,),) = [list(dashboards(sagemaker_template.to_json()).values())]
    drawn = render(body, load_samples(_samples(tmp_path / "s.jsonl")), tmp_path / "d.png")
    streams = next(line for line in drawn if line.startswith("Active streams per instance"))
    assert streams == f"Active streams per instance vs capacity: drew {STREAM_LABEL}"


def test_a_log_widget_is_a_placeholder_naming_its_log_group(ecs_template: Template, tmp_path: Path) -> None:
    """The ECS dashboard's Logs Insights widget: drawn as "no data offline", its log group named."""
    ((body,),) = [list(dashboards(ecs_template.to_json()).values())]
    drawn = render(body, load_samples(_samples(tmp_path / "s.jsonl")), tmp_path / "d.png")
    (log,) = [line for line in drawn if line.startswith("Why GPU capacity is short")]
    assert re.fullmatch(
        r"Why GPU capacity is short: no data offline: Logs Insights query over <OperationsCapacityEventsLogs\w+>",
        log,
    ), log


def test_a_log_widget_without_a_title_or_source_still_draws(tmp_path: Path) -> None:
    body = {"widgets": [{"type": "log", "x": 0, "y": 0, "width": 24, "height": 6, "properties": {}}]}
    assert render(body, [], tmp_path / "d.png") == [
        "log: no data offline: Logs Insights query over no log group"
    ]


def test_a_body_without_widgets_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="the dashboard body has no widgets: nothing to draw"):
        render({"widgets": []}, [Sample(0, 1, True, False, 100.0)], tmp_path / "d.png")


def test_a_widget_without_a_place_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    body = {"widgets": [{"type": "text", "width": 6, "height": 6, "properties": {"markdown": "x"}}]}
    template = tmp_path / "t.json"
    template.write_text(
        json.dumps(
            {
                "Resources": {
                    "D": {
                        "Type": "AWS::CloudWatch::Dashboard",
                        "Properties": {"DashboardBody": json.dumps(body)},
                    }
                }
            }
        )
    )
    assert dashboard_render.main([str(template), str(_samples(tmp_path / "s.jsonl"))]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(
        f"{dashboard_render.PROG}: {template}: Resources.D.Properties.DashboardBody.widgets[0].x = (missing): "
        "not a whole number from 0 to 23. Fix: "
    ), line


# ------------------------------------------------------------------------------------ bad input ----


@pytest.mark.parametrize("which", ["template", "samples"])
@pytest.mark.parametrize("shape", ["missing", "folder", "fifo", "link loop", "binary", "nan"])
def test_an_input_that_is_not_a_file_of_ours_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], which: str, shape: str
) -> None:
    """No hang on a FIFO, no traceback on a folder or a link loop, no raw exception text: file, value, fix."""
    paths = {"template": tmp_path / "t.json", "samples": _samples(tmp_path / "s.jsonl")}
    paths["template"].write_text(json.dumps(fuzz.template(fuzz.GOOD_WIDGET_BODY)))
    bad = paths[which]
    bad.unlink()
    if shape == "folder":
        bad.mkdir()
    elif shape == "fifo":
        os.mkfifo(bad)
    elif shape == "link loop":
        bad.symlink_to(bad.name)
    elif shape == "binary":
        bad.write_bytes(b"\x89PNG\x00\xff")
    elif shape == "nan":
        bad.write_text('{"time": NaN, "ok": true}\n' if which == "samples" else '{"Resources": NaN}')
    assert (
        dashboard_render.main([str(paths["template"]), str(paths["samples"]), "-o", str(tmp_path / "d.png")])
        == 2
    )
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"{dashboard_render.PROG}: {bad}: ") and ". Fix: pass " in line, line


@pytest.mark.parametrize("out", ["folder", "picture.jpg", "picture"])
def test_out_is_a_png_file(tmp_path: Path, capsys: pytest.CaptureFixture[str], out: str) -> None:
    """-o FOLDER printed "wrote FOLDER" and wrote FOLDER.png beside it."""
    (tmp_path / "folder").mkdir()
    template = tmp_path / "t.json"
    template.write_text(json.dumps(fuzz.template(fuzz.GOOD_WIDGET_BODY)))
    with pytest.raises(SystemExit) as exited:
        dashboard_render.main([str(template), str(_samples(tmp_path / "s.jsonl")), "-o", str(tmp_path / out)])
    assert exited.value.code == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"{dashboard_render.PROG}: -o/--out ") and "Fix: " in line, line
    assert not list(tmp_path.glob("*.png"))


@settings(max_examples=examples(60), deadline=None)
@given(template=fuzz.templates(), samples=fuzz.samples())
def test_any_input_draws_or_fails_in_one_line(
    tmp_path_factory: pytest.TempPathFactory, template: bytes, samples: bytes
) -> None:
    folder = tmp_path_factory.mktemp("render")
    (folder / "t.json").write_bytes(template)
    (folder / "s.jsonl").write_bytes(samples)
    out = folder / "d.png"
    with contextlib.redirect_stderr(io.StringIO()) as stderr, contextlib.redirect_stdout(io.StringIO()):
        status = dashboard_render.main([str(folder / "t.json"), str(folder / "s.jsonl"), "-o", str(out)])
    if status == 0:
        assert out.is_file()
        return
    [line] = stderr.getvalue().splitlines()
    assert status == 2 and line.startswith(f"{dashboard_render.PROG}: ") and "Fix: " in line, line
