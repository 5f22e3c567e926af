"""Count what bad command-line input does to every command: a clean error, a traceback, a hang, or an
exit 0 on nonsense. `PYTHONPATH=. python bench/command_arguments.py [--code DIR] [--verbose]` runs each case in a
subprocess (bounded) against the code in DIR (default: this checkout), so a branch can be compared with an
older tree (`git archive REV | tar -x -C DIR`). Not a test: the property tests and the example tests in
tests/ are; this is the before/after count for a change."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tests.fuzz.arguments import CORRUPT_SUMMARIES, HOSTILE_NUMBERS, HOSTILE_URLS, hostile_paths

HANG_S = 25
UNREACHABLE = "127.0.0.1:9"  # the discard port: nothing listens, a connection is refused at once

Case = tuple[str, list[str]]


def _probe_base(route: str, out: Path) -> list[str]:
    target = {
        "ws": ["--url", f"ws://{UNREACHABLE}/tts/websocket"],
        "http": ["--url", f"http://{UNREACHABLE}/tts/bytes"],
        "sagemaker": ["--endpoint", "e", "--region", "us-east-2", "--endpoint-url", f"http://{UNREACHABLE}"],
    }[route]
    return [
        "probe",
        route,
        *target,
        "--concurrency",
        "1",
        "--requests",
        "1",
        "--warmup",
        "0",
        "--ramp-up",
        "0",
        "--timeout",
        "1",
        "--quiet",
        "--no-report",
        "--out",
        str(out),
    ]


def _replace(argv: list[str], option: str, value: str) -> list[str]:
    if option in argv:
        at = argv.index(option)
        return [*argv[:at], f"{option}={value}", *argv[at + 2 :]]
    return [*argv, f"{option}={value}"]


def cases(scratch: Path) -> Iterator[Case]:
    paths = hostile_paths(scratch)
    runs = iter(range(10**6))
    numeric = {
        "ws": ["--multiplex"],
        "http": [],
        "sagemaker": [],
    }
    shared = [
        "--concurrency",
        "--requests",
        "--warmup",
        "--rate",
        "--duration",
        "--timeout",
        "--max-in-flight",
        "--sample-rate",
        "--workers",
        "--error-backoff-ms",
        "--playback-delay-ms",
        "--audible-threshold-db",
    ]
    for route in ("ws", "http", "sagemaker"):
        for option in shared + numeric[route]:
            for value in ("nan", "inf", "-1", "0", "1e9", "abc"):
                base = _probe_base(route, scratch / f"run-{next(runs)}")
                if option == "--duration":
                    base = _replace(base, "--rate", "1")
                if option == "--rate" and value == "1e9":
                    base = _replace(base, "--duration", "2")
                yield f"probe {route} {option}={value}", _replace(base, option, value)
        urls = ("--endpoint-url",) if route == "sagemaker" else ("--url",)
        for option in urls:
            for url in HOSTILE_URLS:
                base = _probe_base(route, scratch / f"run-{next(runs)}")
                yield f"probe {route} {option}={url!r}", _replace(base, option, url)
        for kind, path in paths.items():
            if kind != "unwritable":
                base = _probe_base(route, scratch / f"run-{next(runs)}")
                yield f"probe {route} --transcripts {kind}", _replace(base, "--transcripts", str(path))
        for kind in ("a file", "unwritable"):
            out = paths["empty"] if kind == "a file" else paths["unwritable"]
            yield (
                f"probe {route} --out {kind}",
                _replace(_probe_base(route, scratch / "x"), "--out", str(out)),
            )
    serve = ["probe", "serve", "--port", "0", "--exit-after", "0.5"]
    for option in ("--port", "--first-byte-ms", "--chunk-ms", "--pace", "--capacity", "--exit-after"):
        for value in ("nan", "inf", "-1", "1e9", "abc", "1e6", "99999"):
            yield f"probe serve {option}={value}", _replace(serve, option, value)
    for kind, path in paths.items():
        if kind != "unwritable":
            yield (
                f"probe serve --tls-cert/--tls-key {kind}",
                [
                    *serve,
                    "--tls-cert",
                    str(path),
                    "--tls-key",
                    str(path),
                ],
            )
    good = CORRUPT_SUMMARIES["valid"]
    runs_dir = scratch / "summaries"
    for name, text in CORRUPT_SUMMARIES.items():
        folder = runs_dir / name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "summary.json").write_bytes(text)
        (folder / "samples.jsonl").write_text("")
    (runs_dir / "valid-b").mkdir(exist_ok=True)
    (runs_dir / "valid-b" / "summary.json").write_bytes(good)
    for name in CORRUPT_SUMMARIES:
        if name != "valid":
            yield (
                f"probe compare {name}",
                [
                    "probe",
                    "compare",
                    str(runs_dir / name),
                    str(runs_dir / "valid-b"),
                    "--png",
                    str(scratch / "c.png"),
                ],
            )
            yield (
                f"plan --probe {name}",
                [
                    "plan",
                    "--probe",
                    str(runs_dir / name / "summary.json"),
                    "--probe-instance-type",
                    "g6e.xlarge",
                ],
            )
    for kind, path in paths.items():
        yield f"probe compare {kind}", ["probe", "compare", str(path), str(runs_dir / "valid-b")]
        yield (
            f"probe compare --png {kind}",
            [
                "probe",
                "compare",
                str(runs_dir / "valid"),
                str(runs_dir / "valid-b"),
                "--png",
                str(path),
            ],
        )
        yield f"plan --probe {kind}", ["plan", "--probe", str(path), "--probe-instance-type", "g6e.xlarge"]
        yield f"plan --plot {kind}", ["plan", "--plot", str(path)]
        yield f"plan --config-dir {kind}", ["plan", "--config-dir", str(path)]
    for option in (
        "--peak-calls",
        "--speaking-share",
        "--utterance-seconds",
        "--rtf",
        "--target-utilisation",
        "--peak-hours",
        "--offpeak-hours",
        "--offpeak-share",
        "--ttfa-budget-ms",
    ):
        for value in HOSTILE_NUMBERS:
            yield f"plan {option}={value!r}", ["plan", "--json", f"{option}={value}"]
    for option in ("--region", "--env", "--instance-types"):
        for value in ("", "us-east-2\n", "x" * 300, "../../etc"):
            yield f"plan {option}={value!r}", ["plan", f"{option}={value}"]
    for command in (["preflight", "--env"], ["connect", "--route", "ecs", "--env"]):
        for value in ("", "nope", "../dev", "dev\n"):
            yield f"{command[0]} --env={value!r}", [*command[:-1], f"--env={value}"]
    yield (
        "connect --ca-bundle binary",
        [
            "connect",
            "--env",
            "dev",
            "--route",
            "ecs",
            "--ca-bundle",
            str(paths["binary"]),
        ],
    )
    for kind, path in paths.items():
        yield f"licence --file {kind}", ["licence", "upload", "--env", "dev", "--file", str(path)]
    for value in ("nan", "inf", "-1", "0", "1e308", "abc"):
        yield (
            f"licence --timeout={value}",
            [
                "licence",
                "upload",
                "--env",
                "dev",
                "--file",
                str(paths["binary"]),
                f"--timeout={value}",
            ],
        )
    turn = ["probe", "turn", "--route", "ecs", "--tts-url", f"ws://{UNREACHABLE}/tts/websocket"]
    turn += ["--llm-url", f"http://{UNREACHABLE}/v1", "--llm-model", "m", "--stt-url", f"ws://{UNREACHABLE}"]
    turn += [
        "--out",
        str(scratch / "turn"),
        "--no-plot",
        "--quiet",
        "--stt-timeout",
        "1",
        "--reply-timeout",
        "1",
    ]
    for option in (
        "--concurrency",
        "--rate",
        "--duration",
        "--turns",
        "--warmup-turns",
        "--gap-ms",
        "--max-tokens",
    ):
        for value in ("nan", "inf", "-1", "1e9", "abc"):
            yield f"probe turn {option}={value}", _replace(turn, option, value)
    for option in ("--tts-url", "--llm-url", "--stt-url"):
        for url in HOSTILE_URLS:
            yield f"probe turn {option}={url!r}", _replace(turn, option, url)
    for kind, path in paths.items():
        yield f"probe turn --budget {kind}", _replace(turn, "--budget", str(path))
        yield f"probe turn --wav {kind}", _replace(turn, "--wav", str(path))
    changes = ["-m", "sonic_deploy.changes"]
    for kind, path in paths.items():
        yield f"changes --config {kind}", [*changes, "--config", str(path), "environments"]
        yield (
            f"changes diff --synthesized {kind}",
            [*changes, "diff", "--env", "dev", "--synthesized", str(path)],
        )
        yield f"changes diff --markdown {kind}", [*changes, "diff", "--env", "dev", "--markdown", str(path)]
        yield (
            f"changes explain --log {kind}",
            [*changes, "explain-cdk-failure", "--env", "dev", "--log", str(path)],
        )
        yield (
            f"changes policy --document {kind}",
            [
                *changes,
                "execution-policy",
                "--env",
                "dev",
                "--account",
                "123456789012",
                "--document",
                str(path),
            ],
        )
    for value in ("", "dev\n", "nope", "x" * 300):
        yield f"changes target --env={value!r}", [*changes, "target", f"--env={value}"]
    for value in ("", "12345", "abcdefghijkl", "123456789012\n"):
        yield (
            f"changes policy --account={value!r}",
            [
                *changes,
                "execution-policy",
                "--env",
                "dev",
                f"--account={value}",
            ],
        )


# Cases that are no mistake: exit 0 there is right (a value in range, a new or an existing file to write, a
# field the command does not read), a reference server told to serve for a day serves, and a log the
# failure explainer cannot explain is its exit 1 (the CDK's own message stands).
EXPECTED_VALID = {
    "probe compare --png missing",
    "probe compare --png empty",
    "probe compare --png binary",
    "plan --probe target not an object",
    "probe compare slo answer not a level",
    "probe serve --exit-after=99999",
    "probe serve --first-byte-ms=99999",
    "probe serve --first-byte-ms=1e6",
    "changes explain --log empty",
    "changes explain --log binary",
    "plan --peak-hours='0'",
    "plan --offpeak-hours='0'",
    "plan --offpeak-share='0'",
} | {
    f"probe {route} {option}={value}"
    for route in ("ws", "http", "sagemaker")
    for option, value in (
        ("--warmup", "0"),
        ("--error-backoff-ms", "0"),
        ("--playback-delay-ms", "0"),
        ("--audible-threshold-db", "-1"),
        ("--audible-threshold-db", "0"),
    )
}


def classify(argv: list[str], code: Path) -> tuple[str, str]:
    command = (
        [sys.executable, *argv] if argv[0] == "-m" else [sys.executable, "-m", "sonic_deploy.cli", *argv]
    )
    env = {**os.environ, "PYTHONPATH": str(code), "AWS_EC2_METADATA_DISABLED": "true"}
    env.pop("AWS_PROFILE", None)
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, errors="replace", timeout=HANG_S, env=env, cwd=code
        )
    except subprocess.TimeoutExpired:
        return "hang", ""
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    if "Traceback (most recent call last)" in done.stderr:
        return "traceback", lines[-1] if lines else ""
    if done.returncode == 0:
        return "exit 0", (done.stdout.splitlines() or [""])[0]
    if done.returncode == 2 and len(lines) == 1:
        return "clean error", lines[0]
    return f"unclean (exit {done.returncode}, {len(lines)} lines)", " | ".join(lines[-2:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--code", type=Path, default=Path.cwd(), help="the checkout to run")
    parser.add_argument("--verbose", action="store_true", help="print every case")
    parser.add_argument("--json", type=Path, help="also write each case's outcome here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        found = list(cases(Path(scratch)))
        with ThreadPoolExecutor(max_workers=2) as pool:
            outcomes = list(pool.map(lambda case: classify(case[1], args.code.resolve()), found))
    outcomes = [
        ("valid", line)
        if label in EXPECTED_VALID and outcome not in ("traceback", "clean error")
        else (outcome, line)
        for (label, _), (outcome, line) in zip(found, outcomes, strict=True)
    ]
    # "unclean (exit 2, 28 lines)": an error, but not one line with exit 2 (argparse's usage, a wrong code).
    counts = Counter(outcome.split(" (")[0] for outcome, _ in outcomes)
    if args.verbose:
        for (label, _), (outcome, line) in zip(found, outcomes, strict=True):
            print(f"{outcome:>12}  {label}: {line[:200]}")
    if args.json:
        rows = [{"case": c[0], "outcome": o[0], "line": o[1]} for c, o in zip(found, outcomes, strict=True)]
        args.json.write_text(json.dumps(rows, indent=1))
    print(f"{len(found)} cases: " + ", ".join(f"{n} {outcome}" for outcome, n in counts.most_common()))


if __name__ == "__main__":
    main()
