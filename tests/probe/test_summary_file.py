"""A corrupt or hostile summary.json is refused by `probe compare` and `plan --probe`, naming the file, the
field and the fix; never taken as a measured capacity."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sonic_deploy.cli import main
from sonic_deploy.client.telemetry import Telemetry
from sonic_deploy.probe import report
from tests.cdk_context import ROOT
from tests.fuzz.arguments import CORRUPT_SUMMARIES, summary_json, summary_level

CORRUPT = sorted(name for name in CORRUPT_SUMMARIES if name != "valid")
# Where each one is refused: the field the error names.
FIELDS = {
    "truncated": "(syntax)",
    "binary": "(file)",
    "empty": "(syntax)",
    "not an object": "(top level)",
    "levels not a list": "levels",
    "NaN p95": "(syntax)",
    "Infinity p95": "(syntax)",
    "negative p95": "levels[0].ttfa_ms.p95",
    "p95 a string": "levels[0].ttfa_ms.p95",
    "negative requests": "levels[0].requests",
    "ok > requests": "levels[0].ok",
    "absurd concurrency": "levels[0].concurrency",
    "zero concurrency": "levels[0].concurrency",
    "fractional concurrency": "levels[0].concurrency",
    "boolean ok": "levels[0].ok",
    "concurrency a string": "levels[0].concurrency",
    "huge requests": "levels[0].requests",
    "level not an object": "levels[1]",
    "target not an object": "target",
    "client without host": "client",
    "rate missing": "levels[0].rate",
    "p50 missing": "levels[0].ttfa_ms.p50",
    "last piece p95 missing": "levels[0].ttfa_last_piece_ms.p95",
    "errors do not add up": "levels[0].errors",
    "duplicate level": "levels[1]",
    "negative foreign messages": "levels[0].foreign_messages",
    "slo answer not a level": "slo.max_concurrency",
}


def run(folder: Path, name: str) -> Path:
    (folder / name).mkdir(parents=True)
    (folder / name / "summary.json").write_bytes(CORRUPT_SUMMARIES[name])
    return folder / name


def one_line(capsys: pytest.CaptureFixture[str]) -> str:
    (line,) = capsys.readouterr().err.splitlines()
    assert line.isprintable()
    return line


def test_every_corrupt_case_has_its_field() -> None:
    assert set(FIELDS) == set(CORRUPT)


# compare has no use for an SLO search's answer (plan --probe does); plan has none for the target or the client
# (compare does).
@pytest.mark.parametrize("name", sorted(set(CORRUPT) - {"slo answer not a level"}))
def test_probe_compare_refuses_a_corrupt_summary(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad, good = run(tmp_path, name), run(tmp_path, "valid")
    with pytest.raises(SystemExit) as stopped:
        main(["probe", "compare", str(bad), str(good), "--png", str(tmp_path / "c.png")])
    assert stopped.value.code == 2
    line = one_line(capsys)
    assert f"{bad / 'summary.json'}: {FIELDS[name]} = " in line and "Fix: " in line
    assert not (tmp_path / "c.png").exists()


@pytest.mark.parametrize("name", sorted(set(CORRUPT) - {"target not an object", "client without host"}))
def test_plan_refuses_a_corrupt_summary_as_measured_capacity(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    summary = run(tmp_path, name) / "summary.json"
    argv = [
        "plan",
        "--config-dir",
        str(ROOT / "config"),
        "--probe",
        str(summary),
        "--probe-instance-type",
        "g6e.xlarge",
    ]
    try:
        code = main(argv)
    except SystemExit as stopped:  # the empty and the binary file are argparse's to refuse
        code = int(stopped.code or 0)
    assert code == 2
    line = one_line(capsys)
    assert str(summary) in line and "Fix: " in line
    if name not in ("empty", "binary"):
        assert f"{summary}: {FIELDS[name]} = " in line


def test_a_valid_summary_is_compared_and_planned(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = run(tmp_path, "valid")
    assert (
        main(["probe", "compare", str(good), str(good / "summary.json"), "--png", str(tmp_path / "c.png")])
        == 0
    )
    assert (tmp_path / "c.png").is_file()
    argv = ["plan", "--config-dir", str(ROOT / "config"), "--probe", str(good / "summary.json")]
    assert main([*argv, "--probe-instance-type", "g6e.xlarge"]) == 0
    assert "probe: summary.json, TTFA p95 120 ms <= 300 ms" in capsys.readouterr().out


@pytest.mark.parametrize("kind", ["missing", "a file", "no summary"])
def test_probe_compare_wants_a_run_folder(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = run(tmp_path, "valid")
    given = {"missing": tmp_path / "nope", "a file": tmp_path / "f.txt", "no summary": tmp_path}[kind]
    (tmp_path / "f.txt").write_text("x")
    with pytest.raises(SystemExit) as stopped:
        main(["probe", "compare", str(given), str(good)])
    assert stopped.value.code == 2
    assert "Fix: give the folder a probe run wrote (its --out)" in one_line(capsys)


def _compare(tmp_path: Path, summary: dict[str, object], png: Path) -> int:
    (tmp_path / "edited").mkdir()
    (tmp_path / "edited" / "summary.json").write_text(json.dumps(summary))
    good = run(tmp_path, "valid")
    return main(["probe", "compare", str(tmp_path / "edited"), str(good), "--png", str(png)])


def test_compare_shows_summary_text_escaped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    edited = summary_json([summary_level(4)])
    edited["target"] = {"route": "ws\n\x1b[31mRED", "url": "ws://x"}
    assert _compare(tmp_path, edited, tmp_path / "c.png") == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "ws\\n\\x1b[31mRED" in out


def test_compare_reads_each_summary_once_as_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def unchecked(folder: Path) -> dict[str, object]:
        raise AssertionError(f"{folder} read again, unchecked")

    monkeypatch.setattr(report, "read_summary", unchecked)
    assert _compare(tmp_path, summary_json([summary_level(4)]), tmp_path / "c.png") == 0


def test_compare_makes_the_png_s_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    png = tmp_path / "plots" / "today" / "c.png"  # output_file allows a folder not made yet
    assert _compare(tmp_path, summary_json([summary_level(4)]), png) == 0
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_messages_for_another_context_are_shown_when_there_are_any(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    quiet, mixed = summary_level(1), {**summary_level(4), "foreign_messages": 3}
    assert _compare(tmp_path, summary_json([quiet, mixed]), tmp_path / "c.png") == 0
    out = capsys.readouterr().out
    assert "A: messages for another context (not credited to any request): c=4 3" in out
    assert "B: messages for another context" not in out
    table = report.summary_table(summary_json([quiet, mixed]))
    assert table.splitlines()[-1] == "messages for another context (not credited to any request): c=4 3"
    assert "another context" not in report.summary_table(summary_json([quiet]))


def test_a_run_beside_an_agent_s_telemetry(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`probe compare RUN --agent FILE`: the run's table, then per route the agent's utterances, failures by
    kind, first audio percentiles (nearest rank) and the hops' medians, from the lines it wrote."""
    lines: list[str] = []
    telemetry = Telemetry("sagemaker", environment="dev", endpoint="sonic-dev", write=lines.append)
    for ms in (90.0, 110.0, 130.0, 400.0):
        telemetry.emit({"FirstAudio": ms}, None)
    telemetry.emit({}, "model_error_429")
    telemetry.hops({"TTSFirstByte": 80.0, "LLMFirstToken": 300.0}, framework="pipecat")
    agent = tmp_path / "agent.jsonl"
    agent.write_text("\n".join(lines) + "\n")
    good = run(tmp_path, "valid")
    assert main(["probe", "compare", str(good), "--agent", str(agent), "--png", str(tmp_path / "c.png")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("A=valid: ") and "B p50" not in out[1]
    start = out.index("agent=agent.jsonl dev/sagemaker: 5 utterances, 1 failed (model_error_429 1)")
    assert out[start + 1 : start + 3] == [
        "  first audio (ms): p50 110.0  p95 400.0  p99 400.0  (4 with audio)",
        "  hops, p50 (ms): LLMFirstToken 300.0, TTSFirstByte 80.0",
    ]


def test_compare_needs_a_second_run_or_an_agent(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = run(tmp_path, "valid")
    with pytest.raises(SystemExit) as stopped:
        main(["probe", "compare", str(good)])
    assert stopped.value.code == 2 and "Fix: give a second run's folder, or --agent FILE" in one_line(capsys)
    (tmp_path / "agent.jsonl").write_text('{"FirstAudio": 1}\n')
    with pytest.raises(SystemExit) as stopped:
        main(["probe", "compare", str(good), "--agent", str(tmp_path / "agent.jsonl")])
    assert "line 1" in one_line(capsys)
