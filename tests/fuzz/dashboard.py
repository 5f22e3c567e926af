"""Generators for what `python -m sonic_deploy.dashboard_render` may be given: a template and a samples file
that are whole, of the wrong shape at any level, or not JSON at all."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

from tests.fuzz.assembly import json_values

GOOD_WIDGET = {
    "type": "metric",
    "x": 0,
    "y": 0,
    "width": 12,
    "height": 6,
    "properties": {
        "title": "TTFA",
        "metrics": [["SonicDeploy/Canary", "TimeToFirstAudio", {"stat": "p95"}]],
        "annotations": {"horizontal": [{"value": 500, "label": "SLO"}]},
    },
}
GOOD_WIDGET_BODY = {"widgets": [GOOD_WIDGET]}
GOOD_SAMPLE: dict[str, Any] = {"time": 1.0, "total_ms": 300.0, "ok": True, "ttfa_ms": 120.0}
# Values that break a renderer that trusts its input: huge, negative, not finite, of another type.
HOSTILE: st.SearchStrategy[Any] = (
    st.sampled_from([None, True, -1, 0, 10**9, 1e308, "x", [], {}, [[]], [1, 2], {"a": 1}]) | json_values
)


def template(body: Any) -> dict[str, Any]:
    dashboard = {"Type": "AWS::CloudWatch::Dashboard", "Properties": {"DashboardBody": json.dumps(body)}}
    return {"Resources": {"Dashboard": dashboard}}


@st.composite
def templates(draw: st.DrawFn) -> bytes:
    """The bytes of a template file: a good dashboard with one value replaced at some level, or junk."""
    widget = json.loads(json.dumps(GOOD_WIDGET))
    body: Any = {"widgets": [widget]}
    level = draw(st.sampled_from(["widget", "properties", "metric", "annotation", "body", "file", "none"]))
    value = draw(HOSTILE)
    if level == "widget":
        widget[draw(st.sampled_from(["type", "x", "y", "width", "height", "properties"]))] = value
    elif level == "properties":
        widget["properties"][draw(st.sampled_from(["title", "metrics", "annotations", "stat", "alarms"]))] = (
            value
        )
    elif level == "metric":
        widget["properties"]["metrics"] = [value, *widget["properties"]["metrics"]]
    elif level == "annotation":
        widget["properties"]["annotations"]["horizontal"] = [value]
    elif level == "body":
        body = value if draw(st.booleans()) else {"widgets": value}
    elif level == "file":
        return draw(st.binary(max_size=40) | st.just(json.dumps(value).encode()))
    return json.dumps(template(body)).encode()


@st.composite
def samples(draw: st.DrawFn) -> bytes:
    """The bytes of a samples.jsonl: good lines with one field of one line replaced, or junk."""
    lines: list[Any] = [dict(GOOD_SAMPLE, time=float(n)) for n in range(3)]
    choice = draw(st.sampled_from(["field", "line", "bytes", "none"]))
    if choice == "field":
        lines[draw(st.integers(0, 2))][draw(st.sampled_from(["time", "total_ms", "ok", "ttfa_ms"]))] = draw(
            HOSTILE
        )
    elif choice == "line":
        lines[1] = draw(HOSTILE)
    elif choice == "bytes":
        return draw(st.binary(max_size=40))
    return "".join(json.dumps(line) + "\n" for line in lines).encode()
