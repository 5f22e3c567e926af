"""waterfall.png: the median and the p95 turn, hop by hop, against the budget."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sonic_deploy.turn.call import HOPS

COLOURS = {"stt": "#4C72B0", "llm": "#DD8452", "aggregate": "#937860", "tts": "#55A868", "audible": "#8172B3"}
LABELS = {
    "stt": "speech to text",
    "llm": "model, first token",
    "aggregate": "first sentence",
    "tts": "TTS first byte",
    "audible": "first audible",
}


def write_waterfall(summary: dict[str, Any], path: Path, title: str) -> Path:
    """Each row starts at the end of the caller's speech; each hop begins where the one before ends. The p95
    row stacks each hop's own p95 (a turn as bad as that in every hop at once), so it ends beyond the turn's
    p95, which is marked on its own."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(10, 2.8), dpi=110)
    rows = (("p95", 0), ("p50", 1))
    for percentile, y in rows:
        left = 0.0
        for hop in HOPS:
            width = summary["hops_ms"][hop][percentile] or 0.0
            label = f"{LABELS[hop]}" if y == 1 else None
            axis.barh(y, width, left=left, color=COLOURS[hop], edgecolor="white", label=label, height=0.55)
            if width >= 40:
                axis.text(
                    left + width / 2, y, f"{width:.0f}", ha="center", va="center", color="white", fontsize=8
                )
            left += width
        turn = summary["turn_ms"][percentile]
        if turn is not None:
            axis.plot([turn, turn], [y - 0.35, y + 0.35], color="black", linewidth=2)
            axis.text(turn, y + 0.38, f"turn {percentile} {turn:.0f} ms", ha="center", fontsize=8)
    budget = summary.get("budget", {}).get("turn")
    if budget:
        for key, style in (("target", "--"), ("limit", ":")):
            allowed = budget[key]["budget_ms"] - summary["budget"]["telephony_ms"]
            axis.axvline(allowed, color="#C44E52", linestyle=style, linewidth=1)
            axis.text(allowed, 1.62, f"budget {key} {allowed:.0f}", color="#C44E52", fontsize=8, ha="center")
    axis.set_yticks([0, 1], ["p95 of each hop", "median (p50)"])
    axis.set_ylim(-0.6, 1.8)
    axis.set_xlabel("ms from the end of the caller's speech")
    axis.set_title(title, fontsize=10)
    axis.legend(loc="upper center", fontsize=7, ncols=5, bbox_to_anchor=(0.5, -0.25), frameon=False)
    figure.savefig(path, bbox_inches="tight")
    plt.close(figure)
    return path
