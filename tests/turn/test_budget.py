"""The latency budget: the file and its sources, bad fields named with the fix, and a verdict naming the hop."""

from __future__ import annotations

from pathlib import Path

import pytest

from sonic_deploy.turn.budget import DEFAULT_BUDGET, BudgetError, judge, load_budget
from sonic_deploy.turn.run import percentiles, summarize

ROOT = Path(__file__).resolve().parents[2]


def _hops(**p50: float) -> dict[str, dict[str, float | None]]:
    return {hop: {"p50": value, "p95": value * 1.1} for hop, value in p50.items()}


def test_the_shipped_budget_has_a_source_for_every_figure() -> None:
    budget = load_budget(ROOT / DEFAULT_BUDGET)
    assert (budget.target_at, budget.limit_at, budget.telephony_ms) == ("p50", "p95", 0.0)
    assert budget.turn is not None and (budget.turn.target_ms, budget.turn.limit_ms) == (1115, 1400)
    assert set(budget.hops) == {"stt", "llm", "tts"}
    assert all("Twilio" in line.source for line in [budget.turn, *budget.hops.values()])


def test_within_budget_says_so() -> None:
    budget = load_budget(ROOT / DEFAULT_BUDGET)
    verdict = judge(
        budget, _hops(stt=300, llm=350, aggregate=150, tts=90, audible=0), {"p50": 890, "p95": 980}
    )
    assert verdict["within"] and verdict["verdict"] == "within budget"


def test_a_hop_over_its_own_budget_is_named_and_blamed_for_the_turn() -> None:
    budget = load_budget(ROOT / DEFAULT_BUDGET)
    verdict = judge(
        budget, _hops(stt=300, llm=800, aggregate=150, tts=90, audible=0), {"p50": 1340, "p95": 1474}
    )
    assert not verdict["within"]
    assert "llm p50 800 ms > target 375 ms" in verdict["verdict"]
    assert "llm p95 880 ms > limit 750 ms" in verdict["verdict"]
    assert verdict["turn"]["blame"] == ["llm"]
    assert verdict["verdict"].endswith("(the turn breaks it through llm)")


def test_a_turn_over_budget_with_every_hop_within_blames_the_largest_share() -> None:
    budget = load_budget(ROOT / DEFAULT_BUDGET)
    verdict = judge(
        budget, _hops(stt=340, llm=370, aggregate=420, tts=95, audible=0), {"p50": 1225, "p95": 1300}
    )
    assert verdict["turn"]["blame"] == ["aggregate"]
    assert verdict["turn"]["largest_share"] == {"hop": "aggregate", "at": "p50", "ms": 420}


def test_telephony_is_added_to_the_turn(tmp_path: Path) -> None:
    text = (ROOT / DEFAULT_BUDGET).read_text().replace("telephony_ms = 0", "telephony_ms = 500")
    (tmp_path / "b.toml").write_text(text)
    verdict = judge(
        load_budget(tmp_path / "b.toml"), _hops(stt=300, llm=350, tts=90), {"p50": 700, "p95": 800}
    )
    assert verdict["turn"]["target"]["measured_ms"] == 1200
    assert "turn p50 1200 ms > target 1115 ms" in verdict["verdict"]


@pytest.mark.parametrize(
    ("edit", "says"),
    [
        (("target_ms = 350", 'target_ms = "fast"'), "[hops.stt] target_ms = 'fast' is not a number"),
        (("limit_ms = 500", "limit_ms = 300"), "[hops.stt] limit_ms 300 is below target_ms 350"),
        (('target = "p50"', 'target = "p42"'), "[judge] target = 'p42'. Fix: one of p50, p90, p95, p99, max"),
        (
            ("[hops.stt]", "[hops.vad]"),
            "[hops.vad] is not a hop. Fix: one of stt, llm, aggregate, tts, audible",
        ),
        (
            ('source = "Twilio, same guide: speech', 'sauce = "Twilio, same guide: speech'),
            "[hops.stt] has sauce",
        ),
        (
            ("telephony_ms = 0", "telephony_ms = -5"),
            "telephony_ms = -5 is not a number of ms from 0 to 3600000",
        ),
        (("target_ms = 1115", "target_ms = nan"), "[turn] target_ms = nan is not a number of ms from 0 to "),
        (("target_ms = 1115", "target_ms = inf"), "[turn] target_ms = inf is not a number of ms from 0 to "),
        (
            ("limit_ms = 1400", "limit_ms = 1e300"),
            "[turn] limit_ms = 1e+300 is not a number of ms from 0 to ",
        ),
        (("telephony_ms = 0", "telephony_ms = nan"), "telephony_ms = nan is not a number"),
        (('[judge]\ntarget = "p50"\nlimit = "p95"', 'judge = "p50"'), "judge = 'p50' is not a table"),
        (('limit = "p95"', 'limt = "p99"'), "[judge] has limt. Fix: only target and limit"),
    ],
)
def test_a_bad_field_is_named_with_its_value_and_the_fix(
    tmp_path: Path, edit: tuple[str, str], says: str
) -> None:
    text = (ROOT / DEFAULT_BUDGET).read_text()
    assert edit[0] in text
    path = tmp_path / "budget.toml"
    path.write_text(text.replace(edit[0], edit[1], 1))
    with pytest.raises(BudgetError) as raised:
        load_budget(path)
    assert str(path) in str(raised.value) and says in str(raised.value)


def test_percentiles_are_observed_values_by_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentiles(values) == {
        "n": 100.0,
        "p50": 50.0,
        "p90": 90.0,
        "p95": 95.0,
        "p99": 99.0,
        "max": 100.0,
        "mean": 50.5,
    }
    assert percentiles([])["p50"] is None


def test_the_summary_leaves_out_warm_up_and_counts_errors_by_hop_and_kind() -> None:
    ok = {
        "warmup": False,
        "hops_ms": dict(stt=300.0, llm=400.0, aggregate=180.0, tts=90.0, audible=0.0),
        "turn_ms": 970.0,
    }
    lines = [
        {**ok, "warmup": True, "turn_ms": 5000.0},
        ok,
        {**ok, "turn_ms": 980.0},
        {"warmup": False, "error": {"hop": "llm", "kind": "status_429", "message": ""}},
    ]
    summary = summarize(lines, None)
    assert (summary["turns"], summary["ok"], summary["warmup_turns"]) == (3, 2, 1)
    assert summary["errors"] == {"llm:status_429": 1}
    assert summary["turn_ms"]["max"] == 980.0 and summary["hops_ms"]["llm"]["p50"] == 400.0
