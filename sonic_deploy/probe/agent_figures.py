"""An agent's own telemetry (docs/client.md, "Telemetry") as `probe compare --agent` prints it beside probe
runs: per environment and route, its utterances and failures by kind, its first audio's percentiles (nearest
rank, as the probe's: the same span, from the request's send to its first audio) and the hops' medians."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path

from sonic_deploy.client import metric_names as names
from sonic_deploy.config.errors import one_line
from sonic_deploy.dashboard_series import AgentRecord, percentile


def agent_lines(path: Path, records: Sequence[AgentRecord]) -> list[str]:
    groups: dict[tuple[str, str], list[AgentRecord]] = defaultdict(list)
    for record in records:
        key = (record.dimensions.get(names.ENVIRONMENT, "?"), record.dimensions.get(names.ROUTE, "?"))
        groups[key].append(record)
    lines = []
    for (environment, route), group in sorted(groups.items()):
        utterances = int(sum(r.values.get(names.REQUESTS, 0) for r in group))
        kinds = Counter(r.dimensions[names.ERROR_KIND] for r in group if names.ERROR_KIND in r.dimensions)
        failed = f", {sum(kinds.values())} failed ({', '.join(f'{k} {n}' for k, n in sorted(kinds.items()))})"
        lines.append(
            one_line(
                f"agent={path.name} {environment}/{route}: {utterances} utterances"
                + (failed if kinds else "")
            )
        )
        first = [r.values[names.FIRST_AUDIO] for r in group if names.FIRST_AUDIO in r.values]
        if first:
            figures = "  ".join(f"p{q:g} {percentile(first, q):.1f}" for q in (50, 95, 99))
            lines.append(f"  first audio (ms): {figures}  ({len(first)} with audio)")
        hops = {
            hop: percentile(values, 50)
            for hop in names.HOPS
            if (values := [r.values[hop] for r in group if hop in r.values])
        }
        if hops:
            lines.append("  hops, p50 (ms): " + ", ".join(f"{hop} {ms:.1f}" for hop, ms in hops.items()))
    return lines
