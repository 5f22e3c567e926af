"""What the dashboard's agent row draws from an example's telemetry file."""

from __future__ import annotations

from pathlib import Path

from aws_cdk.assertions import Template

from sonic_deploy.dashboard_render import dashboards
from sonic_deploy.dashboard_series import agent_series, lines, load_agent


def agent_row(template: Template, telemetry: Path) -> dict[str, list[str]]:
    """Each agent widget's title (up to its first comma) -> the labels of the lines it draws from the file."""
    records = load_agent(telemetry)
    ((body,),) = [list(dashboards(template.to_json()).values())]
    drawn: dict[str, list[str]] = {}
    for widget in body["widgets"]:
        title = str(widget["properties"].get("title", ""))
        if title.startswith("Agent: "):
            found = [
                line.label
                for line in lines(widget["properties"])
                if (agent_series(line, records) or ([],))[0]
            ]
            drawn[title.split(",")[0]] = found
    return drawn
