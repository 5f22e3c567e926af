"""What `python -m sonic_deploy.dashboard_render` reads, checked before anything is drawn: a synthesized
template holding one dashboard whose body has the shape CloudWatch's dashboard body structure gives it, and a
probe run's samples.jsonl. Anything else is one ConfigError line (file, field, value, fix), never a
traceback, a hang on a FIFO or a figure sized by a hostile number."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

from sonic_deploy.config.errors import MISSING, ConfigError
from sonic_deploy.config.explain import toml_path
from sonic_deploy.user_files import RefusedFileError, read_regular

LARGEST_INPUT = 64 * 2**20  # as sonic_deploy.arguments.MAX_TEXT_BYTES: larger is not one of ours
GRID_COLUMNS = 24
# CloudWatch's dashboard body structure: x and width on the 24-column grid. The picture is 0.62 inch a row at
# 90 dpi: past this many rows (the stacks' dashboards have about 50) it would take gigabytes to draw.
MOST_ROWS = 200
TEMPLATE_FIX = (
    "pass a template `cdk synth` wrote (cdk.out/SonicEcs.template.json or SonicSageMaker.template.json)"
)
SAMPLES_FIX = "pass the samples.jsonl a probe run wrote (OUT/samples.jsonl)"
AGENT_FIX = 'pass the lines an agent\'s Telemetry wrote (docs/client.md, "Telemetry"), one JSON object a line'


def _refuse(path: Path, field: str, value: object, problem: str, fix: str) -> NoReturn:
    raise ConfigError(file=path, field=field, value=value, problem=problem, fix=fix)


def _no_constant(text: str) -> float:
    raise ValueError(f"{text} is not a JSON number")


def read_text(path: Path, fix: str) -> str:
    try:
        return read_regular(path, limit=LARGEST_INPUT).decode("utf-8")
    except RefusedFileError as error:
        _refuse(path, "(file)", str(path), error.problem, fix)
    except UnicodeDecodeError:
        _refuse(path, "(file)", str(path), "not UTF-8 text (a binary file?)", fix)


def parse_json(path: Path, field: str, text: str, fix: str) -> Any:
    """Strict JSON (no NaN or Infinity), or a ConfigError naming `field`."""
    try:
        return json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as error:
        _refuse(path, field, text[:80], f"not JSON ({error.msg} at line {error.lineno})", fix)
    except ValueError as error:
        _refuse(path, field, text[:80], f"not JSON ({error})", fix)
    except RecursionError:
        _refuse(path, field, text[:80], "nested too deeply", fix)


def resolve(value: Any) -> str:
    """A CloudFormation string value as text: Fn::Join joined, Ref and Fn::GetAtt as placeholders; ValueError
    for anything that is not one."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and len(value) == 1:
        ((function, argument),) = value.items()
        if function == "Fn::Join":
            if not (isinstance(argument, list) and len(argument) == 2 and isinstance(argument[1], list)):
                raise ValueError("an Fn::Join that is not [delimiter, [parts]]")
            return str(argument[0]).join(resolve(part) for part in argument[1])
        if function == "Ref":
            return f"<{argument}>"
        if function == "Fn::GetAtt":
            return f"<{'.'.join(map(str, argument)) if isinstance(argument, list) else argument}>"
        return f"<{function}>"
    raise ValueError("not a CloudFormation string")


def dashboard_bodies(path: Path) -> dict[str, dict[str, Any]]:
    """Logical ID -> checked dashboard body, for every AWS::CloudWatch::Dashboard in the template at `path`."""
    return template_dashboards(path, parse_json(path, "(file)", read_text(path, TEMPLATE_FIX), TEMPLATE_FIX))


def template_dashboards(path: Path, template: object) -> dict[str, dict[str, Any]]:
    """As dashboard_bodies, for a template already parsed (`path` names it in errors)."""
    if not isinstance(template, dict):
        _refuse(path, "(top level)", type(template).__name__, "a template is a JSON object", TEMPLATE_FIX)
    resources = template.get("Resources", {})
    if not isinstance(resources, dict):
        _refuse(path, "Resources", resources, "not a JSON object (logical ID -> resource)", TEMPLATE_FIX)
    bodies = {}
    for logical_id, resource in resources.items():
        if not isinstance(resource, dict) or resource.get("Type") != "AWS::CloudWatch::Dashboard":
            continue
        field = toml_path(["Resources", logical_id, "Properties", "DashboardBody"])
        properties = resource.get("Properties")
        raw = properties.get("DashboardBody") if isinstance(properties, dict) else None
        try:
            text = resolve(raw)
        except (ValueError, RecursionError) as error:
            _refuse(path, field, raw, str(error) if not isinstance(error, RecursionError) else "nested too deeply",
                    TEMPLATE_FIX)  # fmt: skip
        body = parse_json(path, field, text, TEMPLATE_FIX)
        check_body(path, field, body)
        bodies[logical_id] = body
    return bodies


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def check_body(path: Path, field: str, body: object) -> None:
    """The fields the renderer reads, with the types and ranges CloudWatch gives them."""
    fix = f"{TEMPLATE_FIX}; a dashboard body is as CloudWatch's dashboard body structure describes"
    if not isinstance(body, dict):
        _refuse(path, field, body, "the dashboard body is not a JSON object", fix)
    widgets = body.get("widgets")
    if not isinstance(widgets, list) or not widgets:
        _refuse(path, f"{field}.widgets", widgets, "no list of widgets: nothing to draw", fix)
    for index, widget in enumerate(widgets):
        where = f"{field}.widgets[{index}]"
        if not isinstance(widget, dict):
            _refuse(path, where, widget, "a widget is a JSON object", fix)
        if not isinstance(widget.get("type"), str):
            _refuse(path, f"{where}.type", widget.get("type"), "a widget's type is a string", fix)
        for key, low, high in (("x", 0, GRID_COLUMNS - 1), ("y", 0, MOST_ROWS - 1), ("width", 1, GRID_COLUMNS),
                               ("height", 1, MOST_ROWS)):  # fmt: skip
            value = widget.get(key, MISSING)
            if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
                _refuse(path, f"{where}.{key}", value, f"not a whole number from {low} to {high}", fix)
        if widget["y"] + widget["height"] > MOST_ROWS:
            _refuse(
                path,
                f"{where}.height",
                widget["height"],
                f"y + height is past the {MOST_ROWS} rows drawn",
                fix,
            )
        if widget["x"] + widget["width"] > GRID_COLUMNS:
            _refuse(
                path, f"{where}.width", widget["width"], f"x + width is past the {GRID_COLUMNS} columns", fix
            )
        _check_properties(path, where, widget.get("properties", {}), fix)


def _check_properties(path: Path, where: str, properties: object, fix: str) -> None:
    if not isinstance(properties, dict):
        _refuse(path, f"{where}.properties", properties, "not a JSON object", fix)
    for key in ("title", "markdown", "query", "stat"):
        if key in properties and not isinstance(properties[key], str):
            _refuse(path, f"{where}.properties.{key}", properties[key], "not a string", fix)
    if not isinstance(properties.get("alarms", []), list):
        _refuse(path, f"{where}.properties.alarms", properties["alarms"], "not a list", fix)
    metrics = properties.get("metrics", [])
    if not isinstance(metrics, list):
        _refuse(path, f"{where}.properties.metrics", metrics, "not a list of metric arrays", fix)
    for index, entry in enumerate(metrics):
        field = f"{where}.properties.metrics[{index}]"
        options = entry[-1] if isinstance(entry, list) and entry and isinstance(entry[-1], dict) else {}
        fields = [f for f in entry if not isinstance(f, dict)] if isinstance(entry, list) else []
        if "expression" in options:
            if not isinstance(options["expression"], str):
                _refuse(path, field, entry, "an expression is a string", fix)
        elif len(fields) < 2 or not all(isinstance(f, str) for f in fields):
            _refuse(path, field, entry, "not [namespace, metric name, dimensions..., {options}]", fix)
        for key, kind in (("stat", str), ("label", str), ("visible", bool)):
            if key in options and not isinstance(options[key], kind):
                _refuse(path, f"{field}.{key}", options[key], f"not a {kind.__name__}", fix)
    annotations = properties.get("annotations", {})
    horizontal = annotations.get("horizontal", []) if isinstance(annotations, dict) else None
    if not isinstance(horizontal, list):
        _refuse(path, f"{where}.properties.annotations", annotations, "not {horizontal: [...]}", fix)
    for index, annotation in enumerate(horizontal):
        field = f"{where}.properties.annotations.horizontal[{index}]"
        if not isinstance(annotation, dict) or not _number(annotation.get("value")):
            _refuse(path, field, annotation, "an annotation is {value: <finite number>, label: ...}", fix)
        if not isinstance(annotation.get("label", ""), str):
            _refuse(path, f"{field}.label", annotation["label"], "not a string", fix)


def _json_lines(path: Path, fix: str) -> Iterator[tuple[str, Any]]:
    """Each non-blank line of a JSON-lines file, parsed, with its name for an error ("line 3")."""
    for number, line in enumerate(read_text(path, fix).splitlines(), start=1):
        if line.strip():
            yield f"line {number}", parse_json(path, f"line {number}", line, fix)


def sample_records(path: Path) -> list[dict[str, Any]]:
    """The records of a probe run's samples.jsonl, each with the fields the renderer reads, checked."""
    records = []
    for field, record in _json_lines(path, SAMPLES_FIX):
        if not isinstance(record, dict):
            _refuse(path, field, record, "a sample is a JSON object", SAMPLES_FIX)
        time, total, ttfa = record.get("time"), record.get("total_ms"), record.get("ttfa_ms")
        if not _number(time):
            _refuse(path, f"{field}: time", time, "not a finite number of seconds", SAMPLES_FIX)
        for name, value in (("total_ms", total), ("ttfa_ms", ttfa)):
            if value is not None and not (_number(value) and value >= 0):
                _refuse(path, f"{field}: {name}", value, "not a finite number of ms >= 0", SAMPLES_FIX)
        if not isinstance(record.get("ok"), bool):
            _refuse(path, f"{field}: ok", record.get("ok", "(missing)"), "not true or false", SAMPLES_FIX)
        records.append(record)
    return records


def agent_records(path: Path) -> list[dict[str, Any]]:
    """An agent's telemetry lines (CloudWatch embedded metric format), each with its metrics' values as
    numbers and its `_aws.Timestamp` in ms, checked; lines that are not JSON objects with `_aws` are refused."""
    records = []
    for field, record in _json_lines(path, AGENT_FIX):
        aws = record.get("_aws") if isinstance(record, dict) else None
        if not isinstance(record, dict) or not isinstance(aws, dict):
            _refuse(path, field, record, "not an embedded-metric-format object (no _aws)", AGENT_FIX)
        if not _number(aws.get("Timestamp")):
            _refuse(path, f"{field}: _aws.Timestamp", aws.get("Timestamp"), "not a time in ms", AGENT_FIX)
        directives = aws.get("CloudWatchMetrics") or []
        metrics = [m for d in directives if isinstance(d, dict) for m in d.get("Metrics") or []]
        if not isinstance(directives, list) or not all(isinstance(d, dict) for d in directives):
            _refuse(
                path, f"{field}: _aws.CloudWatchMetrics", directives, "not a list of directives", AGENT_FIX
            )
        for metric in metrics:
            name = metric.get("Name") if isinstance(metric, dict) else None
            if not isinstance(name, str):
                _refuse(path, f"{field}: Metrics", metric, "a metric without a Name", AGENT_FIX)
            if not _number(record.get(name)):
                _refuse(
                    path, f"{field}: {name}", record.get(name), "a metric that is not a number", AGENT_FIX
                )
        records.append(record)
    return records
