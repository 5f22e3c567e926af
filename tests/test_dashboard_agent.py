"""The agent row drawn offline from an agent's telemetry lines: each bin's figures as CloudWatch would compute
them from the same lines, the error-kind search one line per kind, the error share its expression, only the
lines of the widget's environment and route; and docs/operate.md's picture of it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from aws_cdk.assertions import Template
from syrupy.assertion import SnapshotAssertion

from sonic_deploy import dashboard_render
from sonic_deploy.client.telemetry import Telemetry
from sonic_deploy.dashboard_inputs import AGENT_FIX
from sonic_deploy.dashboard_render import dashboards, render
from sonic_deploy.dashboard_series import (
    AgentRecord,
    Line,
    agent_error_kinds,
    agent_series,
    lines,
    load_agent,
    ratio_series,
)
from tests.conftest import CONFIG_DIR

EXAMPLE_PICTURE = CONFIG_DIR.parent / "docs" / "dashboard-agent-example.png"
EXAMPLE_LINES = CONFIG_DIR.parent / "docs" / "dashboard-agent-example.telemetry.jsonl"
EXAMPLE_TITLE = (
    "SonicSageMaker dashboard (dev, agent on), drawn offline: the agent row from the pipecat and LiveKit "
    "examples' telemetry against probe serve --capacity 2"
)


def _agent_widget(template: Template, title: str) -> tuple[dict[str, Any], list[Line]]:
    ((body,),) = [list(dashboards(template.to_json()).values())]
    (widget,) = [w for w in body["widgets"] if w["properties"].get("title", "").startswith(title)]
    return body, lines(widget["properties"])


def _log(tmp_path: Path, route: str = "sagemaker") -> Path:
    """Twelve utterances over 12 s (first audio 100 + 10 i ms), two of them 429s, one timeout, a hop line
    each second; and one utterance of another route, which the widgets must leave out."""
    written: list[str] = []
    moments = iter(range(10**6))
    telemetry = Telemetry(route, environment="dev", endpoint="e", write=written.append)
    other = Telemetry("ecs", environment="dev", endpoint="e", write=written.append)
    for i in range(12):
        kind = {3: "model_error_429", 7: "model_error_429", 9: "timeout"}.get(i)
        if kind is None:
            telemetry.emit({"FirstAudio": 100.0 + 10 * i, "Underruns": i % 2}, None)
        else:
            telemetry.emit({}, kind)
        telemetry.hops({"TTSFirstByte": 90.0 + i}, framework="pipecat")
    other.emit({"FirstAudio": 5000.0, "Underruns": 9}, None)
    # One line a second, in order: the clock's own milliseconds replaced, so the bins are known.
    stamped = []
    for line in written:
        document = json.loads(line)
        document["_aws"]["Timestamp"] = 1_800_000_000_000 + 500 * next(moments)
        stamped.append(json.dumps(document))
    path = tmp_path / "agent.jsonl"
    path.write_text("\n".join(stamped) + "\n")
    return path


def test_percentiles_sums_and_the_route_filter(documented: dict[str, Template], tmp_path: Path) -> None:
    records = load_agent(_log(tmp_path))
    _, first_audio = _agent_widget(documented["sagemaker"], "Agent: first audio")
    p50, p99 = (next(line for line in first_audio if line.stat == stat) for stat in ("p50", "p99"))
    xs, ys = agent_series(p50, records) or ([], [])
    # 25 lines 0.5 s apart: 12 bins of 1 s; the ECS line's 5000 ms shares the last bin, and is another
    # route's: never drawn, not even as the bin's p99.
    assert max((agent_series(p99, records) or ([], [0.0]))[1]) < 5000 and len(xs) == len(ys) > 0
    by_bin = {int(x): y for x, y in zip(xs, ys, strict=True)}
    assert by_bin[0] == 100.0 and by_bin[1] == 110.0  # one utterance a bin here: its own figure
    _, counts = _agent_widget(documented["sagemaker"], "Agent: utterances")
    requests = next(line for line in counts if line.name == "Requests")
    assert sum((agent_series(requests, records) or ([], []))[1]) == 12


def test_errors_by_kind_and_their_share(documented: dict[str, Template], tmp_path: Path) -> None:
    records = load_agent(_log(tmp_path))
    body, errors = _agent_widget(documented["sagemaker"], "Agent: errors by kind")
    (search,) = [line for line in errors if "SEARCH(" in line.name]
    kinds = dict(agent_error_kinds(search, records))
    assert {kind: sum(ys) for kind, (_, ys) in kinds.items()} == {"model_error_429": 2, "timeout": 1}
    (widget,) = [w for w in body["widgets"] if w["properties"].get("title", "").startswith("Agent: errors")]
    every = lines(widget["properties"])
    (share,) = [line for line in every if line.namespace == "expression" and "100" in line.name]
    found = ratio_series(share, {line.id: line for line in every if line.id}, [], records)
    assert found is not None
    assert sorted(found[1]) == [0.0] * 9 + [100.0] * 3  # one utterance a bin: none or all of it failed
    # The same lines from another route: nothing on this route's widgets.
    assert agent_error_kinds(search, load_agent(_log(tmp_path, route="ecs"))) == []


def test_the_command_draws_from_the_agent_lines_alone(
    documented: dict[str, Template], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    template = tmp_path / "t.json"
    template.write_text(json.dumps(documented["sagemaker"].to_json()))
    out = tmp_path / "d.png"
    assert dashboard_render.main([str(template), "--agent", str(_log(tmp_path)), "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "Agent: first audio its callers got (ms): drew agent first audio p50" in printed
    assert "x: seconds" not in printed and out.is_file()


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ('{"FirstAudio": 1}\n', "not an embedded-metric-format object (no _aws)"),
        ('{"_aws": {"Timestamp": "soon"}}\n', "not a time in ms"),
        (
            '{"_aws": {"Timestamp": 1, "CloudWatchMetrics": [{"Metrics": [{"Name": "X"}]}]}, "X": "1"}\n',
            "a metric that is not a number",
        ),
        ('{"_aws": {"Timestamp": 1, "CloudWatchMetrics": "x"}}\n', "not a list of directives"),
        (
            '{"_aws": {"Timestamp": 1, "CloudWatchMetrics": [{"Metrics": ["X"]}]}}\n',
            "a metric without a Name",
        ),
        (
            '{"_aws": {"Timestamp": 1, "CloudWatchMetrics": [{"Metrics": [{"Name": ["X"]}]}]}}\n',
            "without a Name",
        ),
        ("", "no telemetry lines"),
    ],
)
def test_a_file_that_is_not_telemetry_is_one_line(
    documented: dict[str, Template],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    content: str,
    problem: str,
) -> None:
    template = tmp_path / "t.json"
    template.write_text(json.dumps(documented["sagemaker"].to_json()))
    given = tmp_path / "agent.jsonl"
    given.write_text(content)
    assert dashboard_render.main([str(template), "--agent", str(given)]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and problem in error and "Fix:" in error
    assert "Telemetry" in AGENT_FIX


def test_nothing_to_draw_from_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        dashboard_render.main([str(tmp_path / "t.json")])
    assert exit_.value.code == 2 and "nothing to draw from" in capsys.readouterr().err


def test_the_documented_agent_picture_is_the_current_dashboard(
    documented: dict[str, Template],
    tmp_path: Path,
    request: pytest.FixtureRequest,
    snapshot: SnapshotAssertion,
) -> None:
    """docs/operate.md's picture of the agent row, from the examples' telemetry (the command is there)."""
    ((body,),) = [list(dashboards(documented["sagemaker"].to_json()).values())]
    drawn = tmp_path / "dashboard.png"
    summary = render(body, [], drawn, title=EXAMPLE_TITLE, agent=load_agent(EXAMPLE_LINES))
    if request.config.getoption("--snapshot-update"):
        shutil.copyfile(drawn, EXAMPLE_PICTURE)
    agent_row = [line for line in summary if line.startswith("Agent: ")]
    assert len(agent_row) == 4 and all(": drew " in line for line in agent_row), agent_row
    assert summary == snapshot, (
        f"the dashboard changed: run `make regenerate` and commit {EXAMPLE_PICTURE.name}"
    )


def test_records_keep_their_dimensions(tmp_path: Path) -> None:
    (first, *_) = load_agent(_log(tmp_path))
    assert first == AgentRecord(
        0.0,
        {"Requests": 1, "Errors": 0, "FirstAudio": 100.0, "Underruns": 0},
        {"Environment": "dev", "Route": "sagemaker"},
    )
