"""How the workers expose `inferno_worker_ttfa`, and what that means for scraping it and alarming on it.

Cartesia documents the metric ("time to first audio, normal < 200 ms") but not its Prometheus type or unit,
so both are config (`[ecs.worker_ttfa]`). Each form reaches CloudWatch differently through the agent:

- gauge: published as is; the alarm takes the p95 of the samples across workers.
- summary: the agent turns `_sum` and `_count` into deltas per scrape, like counters ("handles the sum and
  count of a summary metric in the same way as it handles counter metrics", CloudWatch User Guide,
  "Prometheus metrics type conversion"); the alarm takes the mean, SUM(_sum) / SUM(_count).
- histogram: the agent's Prometheus input drops histograms, `_sum` and `_count` included ("Only Gauge, Counter
  and Summary are supported", aws/amazon-cloudwatch-agent plugins/inputs/prometheus/metrics_filter.go at
  ab55b8da; the type is looked up by the name before relabelling, so renaming cannot get round it). The scraper
  therefore adds an OpenTelemetry pipeline through CW_OTEL_CONFIG_CONTENT, which the agent merges into its own
  when it runs in a container (cmd/amazon-cloudwatch-agent/merge.go, from v1.300066.0): the Prometheus
  receiver over the same discovered targets, and the awsemf exporter, which publishes a histogram as a
  statistic set (count, sum, min, max); the alarm takes its Average, the mean.

Unit "s" multiplies by 1000, so every alarm threshold is in milliseconds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch

NAME = "inferno_worker_ttfa"

MetricOf = Callable[[str, str], cloudwatch.Metric]
"""(metric name, statistic) -> that metric of the workers, in the Sonic namespace."""


@dataclass(frozen=True)
class WorkerTtfa:
    form: Literal["gauge", "summary", "histogram"] = "gauge"
    unit: Literal["ms", "s"] = "ms"

    @property
    def statistic(self) -> str:
        """What the alarm compares with its threshold."""
        return "p95" if self.form == "gauge" else "mean"

    def emf_selectors(self) -> list[str]:
        """The agent's `metric_selectors` for this metric in its Prometheus (EMF) declaration."""
        if self.form == "gauge":
            return [f"^{NAME}$"]
        if self.form == "summary":
            # Not the quantile series: they would land, mixed, under the one ClusterName dimension.
            return [f"^{NAME}_(sum|count)$"]
        return []  # dropped by that input whatever the selector: see otel_pipeline

    def otel_pipeline(
        self, *, cluster_name: str, log_group_name: str, namespace: str, worker_job: str, targets_file: str
    ) -> dict[str, Any] | None:
        """The OpenTelemetry pipeline a histogram needs (None for the other forms). Prometheus relabelling
        regexes are anchored by Prometheus itself; none holds a `$`, which the collector would read as a
        variable."""
        if self.form != "histogram":
            return None
        return {
            "receivers": {
                "prometheus/sonic_ttfa": {
                    "config": {
                        "scrape_configs": [
                            {
                                "job_name": "sonic-worker-ttfa",
                                "scrape_interval": "10s",
                                "scrape_timeout": "5s",
                                "file_sd_configs": [{"files": [targets_file]}],
                                "relabel_configs": [
                                    {"source_labels": ["job"], "regex": worker_job, "action": "keep"},
                                    {"target_label": "ClusterName", "replacement": cluster_name},
                                ],
                                "metric_relabel_configs": [
                                    {
                                        "source_labels": ["__name__"],
                                        "regex": f"{NAME}_(bucket|sum|count)",
                                        "action": "keep",
                                    }
                                ],
                            }
                        ]
                    }
                }
            },
            "exporters": {
                "awsemf/sonic_ttfa": {
                    "namespace": namespace,
                    "log_group_name": log_group_name,
                    "dimension_rollup_option": "NoDimensionRollup",
                    "metric_declarations": [
                        {"dimensions": [["ClusterName"]], "metric_name_selectors": [f"^{NAME}"]}
                    ],
                }
            },
            "service": {
                "pipelines": {
                    "metrics/sonic_ttfa": {
                        "receivers": ["prometheus/sonic_ttfa"],
                        "exporters": ["awsemf/sonic_ttfa"],
                    }
                }
            },
        }

    def in_milliseconds(self, metric_of: MetricOf, period: Duration) -> cloudwatch.IMetric:
        """Worker TTFA in ms over `period`: p95 of a gauge, or the mean of a summary or histogram."""
        scale = 1000 if self.unit == "s" else 1
        label = f"worker TTFA {self.statistic} (ms)"
        if self.form == "summary":
            return cloudwatch.MathExpression(
                expression=f"{scale} * total / count",
                using_metrics={
                    "total": metric_of(f"{NAME}_sum", "Sum"),
                    "count": metric_of(f"{NAME}_count", "Sum"),
                },
                period=period,
                label=label,
            )
        metric = metric_of(NAME, "p95" if self.form == "gauge" else "Average").with_(period=period)
        if scale == 1:
            return metric
        return cloudwatch.MathExpression(
            expression=f"{scale} * ttfa", using_metrics={"ttfa": metric}, period=period, label=label
        )
