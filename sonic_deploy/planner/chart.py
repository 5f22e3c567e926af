"""`--plot FILE.png`: monthly cost per route, instance type and pricing, as a bar chart (needs matplotlib)."""

from __future__ import annotations

from pathlib import Path

from sonic_deploy.arguments import write_output
from sonic_deploy.config import ConfigError
from sonic_deploy.planner.plan import Plan
from sonic_deploy.routes import ROUTES

# One colour per route, in the registry's order.
COLOURS = ("tab:blue", "tab:orange", "tab:green", "tab:purple")


def write_chart(plan: Plan, path: Path) -> None:
    if path.suffix.lower() != ".png":
        raise ConfigError(
            file="command line",
            field="--plot",
            value=str(path),
            problem="not a .png file name",
            fix="give a file name ending in .png, e.g. --plot plan.png",
        )
    try:
        import matplotlib

        matplotlib.use("Agg")
        from matplotlib import pyplot
    except ImportError:
        raise ConfigError(
            file="command line",
            field="--plot",
            value=str(path),
            problem="matplotlib is not installed",
            fix="pip install 'sonic-deploy[plan]' (or pip install matplotlib)",
        ) from None

    rows = [row for row in plan.rows if row.usd_per_month is not None]
    labels = [f"{row.route}\n{row.instance_type}\n{row.pricing}" for row in rows]
    values = [row.usd_per_month or 0.0 for row in rows]
    colours = [COLOURS[list(ROUTES).index(row.route) % len(COLOURS)] for row in rows]
    figure, axes = pyplot.subplots(figsize=(max(6.0, 1.3 * len(rows)), 4.5))
    bars = axes.bar(range(len(rows)), values, color=colours)
    for bar, row in zip(bars, rows, strict=True):
        axes.annotate(
            f"{row.peak_instances} inst.",
            (bar.get_x() + bar.get_width() / 2, bar.get_height()),
            ha="center",
            va="bottom",
            fontsize=8,
        )
    axes.set_xticks(range(len(rows)), labels, fontsize=8)
    axes.set_ylabel("USD per month")
    workload = plan.workload
    caveat = f", {plan.unverified_prices} unverified" if plan.unverified_prices else ""
    axes.set_title(
        f"Sonic in {plan.region}: {workload.peak_calls} concurrent calls at peak "
        f"(oldest price {plan.oldest_price}{caveat})",
        fontsize=10,
    )
    figure.tight_layout()
    try:
        write_output(path, "--plot", lambda to: figure.savefig(to, dpi=120))
    finally:
        pyplot.close(figure)
