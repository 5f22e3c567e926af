"""inferno_worker_ttfa in each form a worker may expose it (gauge, summary, histogram; ms or s): sample
/metrics text read by Prometheus's own parser, passed through what the CloudWatch agent does with each type,
then the WorkerTtfaP95 alarm of a synthesized stack evaluated on what CloudWatch would hold.

The agent's behaviour modelled here, and where it is written down:
- its Prometheus input keeps gauges, counters and summaries and drops every other type, a histogram's
  `_sum` and `_count` included (aws/amazon-cloudwatch-agent plugins/inputs/prometheus/metrics_filter.go);
- a summary's `_sum` and `_count` are published as deltas between scrapes, like counters (CloudWatch User
  Guide, "Prometheus metrics type conversion"); a gauge as it is;
- `metric_selectors` are regular expressions searched in each metric name;
- the OpenTelemetry path (histogram form) keeps what `metric_relabel_configs` keeps (Prometheus anchors the
  regex) and the awsemf exporter publishes one statistic set per target and period: the deltas of count and
  sum.
"""

from __future__ import annotations

import json
import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aws_cdk.assertions import Template
from prometheus_client.parser import text_string_to_metric_families

from sonic_deploy.config import ConfigError, load_settings
from tests.conftest import CONFIG_DIR, EditConfig, rendered, resources_of, synthesize_from

DEV = "environments/dev.toml"


@dataclass
class CloudWatch:
    """What the agent published for one period: plain values, or statistic sets (sum, count)."""

    values: dict[str, list[float]] = field(default_factory=dict)
    sets: dict[str, list[tuple[float, float]]] = field(default_factory=dict)

    def statistic(self, name: str, stat: str) -> float:
        if name in self.sets:
            total = sum(s for s, _ in self.sets[name])
            count = sum(c for _, c in self.sets[name])
            return {"Sum": total, "SampleCount": count, "Average": total / count}[stat]
        values = self.values[name]
        if stat == "p95":
            return (
                statistics.quantiles(values, n=100, method="inclusive")[94] if len(values) > 1 else values[0]
            )
        return {"Sum": sum(values), "Average": statistics.mean(values), "SampleCount": len(values)}[stat]


def _families(text: str) -> dict[str, Any]:
    return {family.name: family for family in text_string_to_metric_families(text)}


def _scrape(
    before: str, after: str, selectors: list[str], otel: dict[str, Any] | None, into: CloudWatch
) -> None:
    """One worker's two scrapes, as the agent publishes them."""
    old = {s.name: s.value for f in _families(before).values() for s in f.samples}
    for family in _families(after).values():
        for sample in family.samples:
            if family.type in ("gauge", "counter", "summary") and any(
                re.search(p, sample.name) for p in selectors
            ):
                delta = family.type == "counter" or sample.name.endswith(("_sum", "_count"))
                into.values.setdefault(sample.name, []).append(
                    sample.value - old[sample.name] if delta else sample.value
                )
    if otel is None:
        return
    (scrape,) = otel["receivers"]["prometheus/sonic_ttfa"]["config"]["scrape_configs"]
    (keep,) = scrape["metric_relabel_configs"]
    for family in _families(after).values():
        kept = [s for s in family.samples if re.fullmatch(keep["regex"], s.name)]
        if family.type == "histogram" and kept:
            total = next(s.value for s in kept if s.name.endswith("_sum"))
            count = next(s.value for s in kept if s.name.endswith("_count"))
            (selector,) = otel["exporters"]["awsemf/sonic_ttfa"]["metric_declarations"][0][
                "metric_name_selectors"
            ]
            assert re.search(selector, family.name)
            into.sets.setdefault(family.name, []).append(
                (total - old[f"{family.name}_sum"], count - old[f"{family.name}_count"])
            )


def _alarm_value(alarm: dict[str, Any], published: CloudWatch) -> float:
    """The alarm's value over one period, as CloudWatch computes it from what was published."""
    if "MetricName" in alarm:
        return published.statistic(alarm["MetricName"], alarm.get("ExtendedStatistic") or alarm["Statistic"])
    values: dict[str, float] = {}
    expression = ""
    for query in alarm["Metrics"]:
        if "MetricStat" in query:
            values[query["Id"]] = published.statistic(
                query["MetricStat"]["Metric"]["MetricName"], query["MetricStat"]["Stat"]
            )
        else:
            expression = query["Expression"]
    assert re.fullmatch(r"[\w\s*/.+-]+", expression), expression  # arithmetic only
    return float(eval(expression, {"__builtins__": {}}, values))


def _stack_parts(config_root: Path) -> tuple[list[str], dict[str, Any] | None, dict[str, Any]]:
    """(the scraper's worker selectors, its OpenTelemetry pipeline, the WorkerTtfaP95 alarm) of a synth."""
    template = Template.from_stack(synthesize_from(config_root, routes=["ecs"])["ecs"])
    (scraper,) = [
        task["Properties"]["ContainerDefinitions"][0]
        for key, task in resources_of(template, "AWS::ECS::TaskDefinition").items()
        if key.startswith("MetricsScraperTask")
    ]
    env = {e["Name"]: rendered(e["Value"]) for e in scraper["Environment"]}
    config = json.loads(env["CW_CONFIG_CONTENT"])
    declarations = config["logs"]["metrics_collected"]["prometheus"]["emf_processor"]["metric_declaration"]
    worker = next(d for d in declarations if d["label_matcher"] == "^gpu-worker$")
    otel = json.loads(env["CW_OTEL_CONFIG_CONTENT"]) if "CW_OTEL_CONFIG_CONTENT" in env else None
    (alarm,) = [
        a["Properties"]
        for key, a in resources_of(template, "AWS::CloudWatch::Alarm").items()
        if key.startswith("AlertingWorkerTtfaP95")
    ]
    return worker["metric_selectors"], otel, alarm


GAUGE = "# TYPE inferno_worker_ttfa gauge\ninferno_worker_ttfa {value}\n"
SUMMARY = (
    "# TYPE inferno_worker_ttfa summary\n"
    'inferno_worker_ttfa{{quantile="0.95"}} {p95}\ninferno_worker_ttfa_sum {total}\ninferno_worker_ttfa_count {count}\n'
)
HISTOGRAM = (
    "# TYPE inferno_worker_ttfa histogram\n"
    'inferno_worker_ttfa_bucket{{le="0.1"}} {fast}\ninferno_worker_ttfa_bucket{{le="+Inf"}} {count}\n'
    "inferno_worker_ttfa_sum {total}\ninferno_worker_ttfa_count {count}\n"
)
# The other worker series, always gauges, so that a selector that matched everything would show.
OTHERS = "# TYPE inferno_worker_load gauge\ninferno_worker_load 3\n"

CASES = {
    # Two workers, each scraped twice. Gauges: p95 of the workers' samples. Summary and histogram: in the
    # period, worker 1 served 10 requests in 0.9 s and worker 2 three in 0.3 s: mean 1.2 s / 13 = 92.3 ms.
    ("gauge", "ms"): ([(GAUGE.format(value=70), GAUGE.format(value=90))] * 2, 90.0),
    ("gauge", "s"): ([(GAUGE.format(value=0.07), GAUGE.format(value=0.09))] * 2, 90.0),
    ("summary", "s"): (
        [
            (SUMMARY.format(p95=0.2, total=1.0, count=10), SUMMARY.format(p95=0.2, total=1.9, count=20)),
            (SUMMARY.format(p95=0.2, total=0.5, count=5), SUMMARY.format(p95=0.2, total=0.8, count=8)),
        ],
        1200 / 13,
    ),
    ("summary", "ms"): (
        [
            (SUMMARY.format(p95=200, total=1000, count=10), SUMMARY.format(p95=200, total=1900, count=20)),
            (SUMMARY.format(p95=200, total=500, count=5), SUMMARY.format(p95=200, total=800, count=8)),
        ],
        1200 / 13,
    ),
    ("histogram", "s"): (
        [
            (HISTOGRAM.format(fast=9, total=1.0, count=10), HISTOGRAM.format(fast=18, total=1.9, count=20)),
            (HISTOGRAM.format(fast=5, total=0.5, count=5), HISTOGRAM.format(fast=8, total=0.8, count=8)),
        ],
        1200 / 13,
    ),
}


@pytest.mark.parametrize(("form", "unit"), list(CASES))
def test_the_ttfa_alarm_reads_milliseconds_from_every_form(
    form: str, unit: str, edit_config: EditConfig
) -> None:
    config = edit_config(DEV, "", f'\n[ecs.worker_ttfa]\nform = "{form}"\nunit = "{unit}"\n')
    selectors, otel, alarm = _stack_parts(config)
    published = CloudWatch()
    workers, expected_ms = CASES[(form, unit)]
    for before, after in workers:
        _scrape(OTHERS + before, OTHERS + after, selectors, otel, published)
    assert "inferno_worker_load" in published.values  # the other series still flow
    assert _alarm_value(alarm, published) == pytest.approx(expected_ms)
    assert (otel is not None) == (form == "histogram")


def test_the_default_is_a_gauge_in_milliseconds() -> None:
    ttfa = load_settings(CONFIG_DIR, "dev").environment.ecs
    assert ttfa is not None and (ttfa.worker_ttfa.form, ttfa.worker_ttfa.unit) == ("gauge", "ms")


def test_a_histogram_is_lost_without_the_opentelemetry_pipeline() -> None:
    """The agent's Prometheus input alone publishes nothing of a histogram: why the pipeline exists."""
    published = CloudWatch()
    before, after = CASES[("histogram", "s")][0][0]
    _scrape(before, after, [r"^inferno_worker_ttfa.*"], None, published)
    assert published.values == {} and published.sets == {}


def test_a_histogram_needs_an_agent_that_merges_opentelemetry_config(edit_config: EditConfig) -> None:
    edit_config(DEV, "", '\n[ecs.worker_ttfa]\nform = "histogram"\nunit = "s"\n')
    config = edit_config(DEV, 'tag = "1.300071.0b1720-amd64"', 'tag = "1.300064.0b1337"')
    with pytest.raises(ConfigError) as caught:
        load_settings(config, "dev")
    assert str(caught.value) == (
        f"{config}/{DEV}: ecs.services.cloudwatch_agent.tag = '1.300064.0b1337': worker_ttfa.form = \"histogram\" "
        "needs the agent to merge an OpenTelemetry pipeline (CW_OTEL_CONFIG_CONTENT), which it does from "
        "1.300066.0. Fix: pin a newer release from gallery.ecr.aws/cloudwatch-agent/cloudwatch-agent"
    )
