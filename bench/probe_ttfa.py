"""Benchmark: the probe's own error on TTFA (reported minus injected), against the reference server.

The reference server runs in another process with a fixed first-byte delay (90 ms, no jitter) and 20 ms
chunks; the probe runs as the real CLI, in its own process(es). For each concurrency level this prints the
error's p50/p99/max over every measured request and counts lost samples (requests issued but missing from
samples.jsonl or summary.json). It is a measurement, not a test: nothing here passes or fails CI.

    .venv/bin/python bench/probe_ttfa.py [--route ws|http|sagemaker] [--levels 1,64,256] [--workers 1]
    .venv/bin/python bench/probe_ttfa.py --route sagemaker -- --client boto3   # probe options after --
    .venv/bin/python bench/probe_ttfa.py --levels 256 --repeat 5   # the spread over runs, and a verdict
    .venv/bin/python bench/probe_ttfa.py --agent    # an agent's turns: two sentence pieces, one socket per call
    .venv/bin/python bench/probe_ttfa.py --pin --levels 1024 --agent   # server on CPU 0, probe on CPU 1

On a shared machine the figures move with what else runs there. Each row therefore starts with a 'cpu'
check: the time of a fixed pure-Python loop just before the level, in ms (higher = a slower machine at
that moment), and `--repeat N` runs each level N times (a fresh server each time) and ends with the
median and worst of the runs' figures and how many runs met the goal.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

DELAY_MS = 90.0
CHUNK_MS = int(os.environ.get("BENCH_CHUNK_MS", "20"))
GOAL_P50_MS, GOAL_P99_MS = 2.0, 10.0


def pinned(cpu: int | None) -> Any:
    """A preexec_fn that keeps the child on one CPU (Linux), or None."""
    if cpu is None:
        return None
    return lambda: os.sched_setaffinity(0, {cpu})


def start_server(audio_ms: int, pace: float, cpu: int | None = None) -> tuple[subprocess.Popen[str], str]:
    command = [
        sys.executable, "-m", "sonic_deploy.cli", "probe", "serve", "--port", "0", "--exit-after", "1800",
        "--first-byte-ms", str(DELAY_MS), "--jitter-ms", "0", "--chunk-ms", str(CHUNK_MS),
        "--pace", str(pace), "--audio-ms", str(audio_ms),
    ]  # fmt: skip
    server = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, preexec_fn=pinned(cpu))
    assert server.stdout is not None
    line = server.stdout.readline()
    if not line.startswith("listening on "):
        raise SystemExit(f"reference server did not start: {line!r}")
    return server, line.split("listening on ")[1].strip()


def target_args(route: str, base: str) -> list[str]:
    port = base.rsplit(":", 1)[1]
    if route == "ws":
        return ["ws", "--url", f"ws://127.0.0.1:{port}/tts/websocket"]
    if route == "http":
        return ["http", "--url", f"{base}/tts/bytes"]
    return ["sagemaker", "--endpoint", "bench", "--endpoint-url", base]


def percentile(ordered: list[float], fraction: float) -> float:
    return ordered[min(len(ordered) - 1, max(0, round(fraction * len(ordered)) - 1))]


def server_lateness(base: str) -> dict[str, Any]:
    """The server's own lateness on the first byte (part of 'reported minus injected', not the probe's)."""
    with urllib.request.urlopen(f"{base}/stats", timeout=10) as response:
        lateness: dict[str, Any] = json.load(response)["first_byte_lateness_ms"]
    return lateness


def run_level(
    route: str,
    base: str,
    concurrency: int,
    requests: int,
    workers: int,
    extra: list[str],
    out: Path,
    cpu: int | None = None,
) -> dict[str, Any]:
    command = [
        sys.executable, "-m", "sonic_deploy.cli", "probe", *target_args(route, base),
        "--concurrency", str(concurrency), "--requests", str(requests), "--workers", str(workers),
        "--out", str(out), "--quiet", "--no-report", "--timeout", "60", *extra,
    ]  # fmt: skip
    began = time.perf_counter()
    children_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    # The reference server ignores signatures, but boto3 signs every request: give it a Region and keys.
    local_aws = {
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    env = {**local_aws, **os.environ, "PYTHONHASHSEED": "0"}
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, env=env, preexec_fn=pinned(cpu))
    elapsed = time.perf_counter() - began
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    client_cpu = (children.ru_utime + children.ru_stime) - (
        children_before.ru_utime + children_before.ru_stime
    )
    samples = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    measured = [s for s in samples if not s["warmup"]]
    level = json.loads((out / "summary.json").read_text())["levels"][0]
    errors = sorted(s["service_ttfa_ms"] - DELAY_MS for s in measured if s["ok"])
    issued = requests + concurrency  # measured + one warm-up per slot
    return {
        "concurrency": concurrency,
        "requests": len(measured),
        "ok": len(errors),
        "failed": len(measured) - len(errors),
        "lost": issued - len(samples) + (requests - level["requests"]),
        "p50": percentile(errors, 0.50) if errors else float("nan"),
        "p99": percentile(errors, 0.99) if errors else float("nan"),
        "max": errors[-1] if errors else float("nan"),
        "min": errors[0] if errors else float("nan"),
        "seconds": elapsed,
        # Cores busy on average over the run (start-up included): 1.0 = one core flat out.
        "client_cores": client_cpu / elapsed,
        "server": server_lateness(base),
    }


def process_cpu_s(pid: int) -> float:
    """User and system CPU seconds of a running process, from /proc (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_check_ms() -> float:
    """A fixed amount of pure-Python work, timed: how fast this machine is right now."""
    began = time.perf_counter()
    total = 0
    for i in range(1_000_000):
        total += i * i % 7
    return (time.perf_counter() - began) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--route", choices=("ws", "http", "sagemaker"), default="ws")
    parser.add_argument("--levels", default="1,64,256")
    parser.add_argument("--requests-per-slot", type=int, default=4, help="measured requests = this x level")
    parser.add_argument("--min-requests", type=int, default=200)
    parser.add_argument("--workers", type=int, default=1, help="probe worker processes")
    parser.add_argument("--audio-ms", type=int, default=500, help="audio per stream")
    parser.add_argument("--pace", type=float, default=1.0, help="1.0 = one 20 ms chunk every 20 ms")
    parser.add_argument("--repeat", type=int, default=1, help="runs per level (then median and worst)")
    parser.add_argument(
        "--agent",
        action="store_true",
        help="ws only: agent-like turns (sentence pieces with continue, one socket per call); the error "
        "counts from the first piece, which the server speaks at once (max_buffer_delay_ms 0)",
    )
    parser.add_argument(
        "--pin",
        action="store_true",
        help="the server on CPU 0 and the probe on CPU 1 (Linux): each side's own core, as if the server "
        "ran on another machine and the client had one core",
    )
    parser.add_argument("probe_options", nargs="*", help="more probe options, after --")
    args = parser.parse_args()
    if args.agent:
        if args.route != "ws":
            parser.error("--agent is for the WebSocket route (--route ws)")
        args.probe_options = ["--agent", "--piece-interval-ms", "50", *args.probe_options]
    print(
        f"# probe TTFA error, route {args.route}, reference server: first byte {DELAY_MS:g} ms, "
        f"{CHUNK_MS} ms chunks every {CHUNK_MS * args.pace:g} ms, {args.audio_ms} ms of audio per piece of text"
        f"{'; agent turns (two sentence pieces 50 ms apart)' if args.agent else '; whole transcripts'}"
    )
    print(
        f"# client: {platform.node()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"{args.workers} probe worker process(es), extra options {args.probe_options or 'none'}"
        f"{'; server pinned to CPU 0, probe to CPU 1' if args.pin else ''}"
    )
    print(
        f"# error = TTFA reported by the probe (request sent -> first audio byte) - {DELAY_MS:g} ms injected;"
        " 'server' = the reference server's own lateness on the first byte, a part of that error;"
        " 'cores c/s' = cores busy on average in the probe (all its processes) and in the server"
    )
    print(f"{'cpu':>5} {'concurrency':>11} {'requests':>8} {'ok':>5} {'lost':>5} {'err p50':>8} {'err p99':>8}"
          f" {'err max':>8} {'err min':>8} {'server p50':>10} {'server p99':>10} {'seconds':>8}"
          f" {'cores c/s':>9}"
          f"  goal (p50<={GOAL_P50_MS:g}, p99<={GOAL_P99_MS:g}, lost=0)")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="probe-bench-") as scratch:
        for concurrency in (int(c) for c in args.levels.split(",")):
            requests = max(args.min_requests, args.requests_per_slot * concurrency)
            runs = []
            for attempt in range(args.repeat):
                cpu = cpu_check_ms()
                # A fresh server per run, so that its lateness figures belong to this run alone.
                server, base = start_server(args.audio_ms, args.pace, 0 if args.pin else None)
                try:
                    out = Path(scratch) / f"c{concurrency}-{attempt}"
                    server_before = process_cpu_s(server.pid)
                    row = run_level(
                        args.route,
                        base,
                        concurrency,
                        requests,
                        args.workers,
                        args.probe_options,
                        out,
                        1 if args.pin else None,
                    )
                    row["server_cores"] = (process_cpu_s(server.pid) - server_before) / row["seconds"]
                finally:
                    server.terminate()
                    server.wait(timeout=30)
                row["met"] = row["p50"] <= GOAL_P50_MS and row["p99"] <= GOAL_P99_MS and row["lost"] == 0
                runs.append(row)
                late = row["server"]
                print(f"{cpu:>5.0f} {row['concurrency']:>11} {row['requests']:>8} {row['ok']:>5} {row['lost']:>5}"
                      f" {row['p50']:>8.2f} {row['p99']:>8.2f} {row['max']:>8.2f} {row['min']:>8.2f}"
                      f" {late['p50'] or 0:>10.2f} {late['p99'] or 0:>10.2f} {row['seconds']:>8.1f}"
                      f" {row['client_cores']:>4.2f}/{row['server_cores']:<4.2f}"
                      f"  {'met' if row['met'] else 'NOT met'}", flush=True)  # fmt: skip
            if args.repeat > 1:
                p50s, p99s = sorted(r["p50"] for r in runs), sorted(r["p99"] for r in runs)
                print(f"# c={concurrency}, {args.repeat} runs: err p50 median {statistics.median(p50s):.2f}"
                      f" worst {p50s[-1]:.2f}; err p99 median {statistics.median(p99s):.2f} worst {p99s[-1]:.2f};"
                      f" lost {sum(r['lost'] for r in runs)}; goal met in {sum(r['met'] for r in runs)}"
                      f" of {args.repeat} runs", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
