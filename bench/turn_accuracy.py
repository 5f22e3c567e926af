"""Benchmark: how exactly `sonic-deploy probe turn` measures a turn, against stand-ins with known delays.

One `probe serve` (another process) stands in for every hop: speech to text (the final transcript
`--stt-ms` after the caller's speech ends), the language model (its first token `--llm-ms` after the
request, then `--tokens-per-s`), and Sonic (first byte `--tts-ms` after the text). `probe turn` (the real
command, in its own process) then runs 1, 16 and 64 simulated calls at once (and at least `--min-calls` in all), and this prints, per level,
each hop's measured p50 and p99 against what was injected, and the turn against the injected sum. The two
hops the stand-ins do not set by a delay are known too: `aggregate` (first token to the first whole
sentence) is the reply's first sentence, and the token that shows it has ended, at the token rate, and `audible` (first byte to the first audible
sample) is where the stand-in's tone first reaches the threshold. The goal: every hop and the turn within
2 ms of the injected figure at p50 and 10 ms at p99. A measurement, not a test: nothing here fails CI.

    .venv/bin/python bench/turn_accuracy.py [--levels 1,16,64] [--route ecs|sagemaker] [--stt ink|transcribe]
        [--llm openai|bedrock] [--turns 3]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from sonic_deploy.audio import AudibleDetector, AudioFormat, tone
from sonic_deploy.standins.llm import reply_tokens
from sonic_deploy.turn.speakers import Sentences

GOAL_P50_MS, GOAL_P99_MS = 2.0, 10.0
HOPS = ("stt", "llm", "aggregate", "tts", "audible")


def start_server(args: argparse.Namespace) -> tuple[subprocess.Popen[str], str]:
    command = [
        sys.executable, "-m", "sonic_deploy.cli", "probe", "serve", "--port", "0", "--exit-after", "3600",
        "--first-byte-ms", str(args.tts_ms), "--jitter-ms", "0", "--chunk-ms", "20", "--pace", "0.5",
        "--stt-final-ms", str(args.stt_ms), "--llm-first-token-ms", str(args.llm_ms),
        "--llm-tokens-per-s", str(args.tokens_per_s), "--ms-per-char", "20",
    ]  # fmt: skip
    server = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    assert server.stdout is not None
    line = server.stdout.readline()
    if not line.startswith("listening on "):
        raise SystemExit(f"probe serve did not start: {line!r}")
    return server, line.split("listening on ")[1].strip()


def injected(args: argparse.Namespace) -> dict[str, float]:
    """What each hop should measure, from the stand-ins' settings alone."""
    sentences, tokens = Sentences(), reply_tokens()
    first = next(index for index, token in enumerate(tokens) if sentences.feed(token))
    line = AudioFormat("pcm_mulaw", 8000) if args.audio == "telephony" else AudioFormat("pcm_s16le", 16000)
    detector = AudibleDetector(line, -40.0)
    detector.feed(tone(line, 20, False))
    return {
        "stt": args.stt_ms,
        "llm": args.llm_ms,
        "aggregate": first / args.tokens_per_s * 1000,
        "tts": args.tts_ms,
        "audible": detector.samples_before / line.sample_rate * 1000,
    }


def run_level(args: argparse.Namespace, base: str, calls: int, out: Path) -> dict[str, Any]:
    ws = base.replace("http://", "ws://")
    command = [
        sys.executable, "-m", "sonic_deploy.cli", "probe", "turn", "--route", args.route,
        "--stt", args.stt, "--llm", args.llm, "--llm-model", "stand-in", "--audio", args.audio,
        "--concurrency", str(calls), "--calls", str(max(calls, args.min_calls)), "--turns", str(args.turns),
        "--out", str(out), "--no-plot", "--quiet",
    ]  # fmt: skip
    command += (
        ["--tts-url", f"{ws}/tts/websocket"]
        if args.route == "ecs"
        else ["--endpoint", "sonic", "--endpoint-url", base]
    )
    command += ["--stt-url", ws] if args.stt == "ink" else ["--transcribe-endpoint-url", ws]
    command += ["--llm-url", f"{base}/v1"] if args.llm == "openai" else ["--bedrock-endpoint-url", base]
    environment = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    subprocess.run(command, check=True, env=environment, stdout=subprocess.DEVNULL)
    summary: dict[str, Any] = json.loads((out / "summary.json").read_text())
    return summary


def _row(name: str, want: float, got: dict[str, float]) -> tuple[str, bool]:
    p50, p99 = got["p50"] - want, got["p99"] - want
    ok = abs(p50) <= GOAL_P50_MS and abs(p99) <= GOAL_P99_MS
    text = f"  {name:<11}{want:>9.1f}{got['p50']:>9.1f}{got['p99']:>9.1f}{p50:>+9.2f}{p99:>+9.2f}  {'ok' if ok else 'OVER'}"
    return text, ok


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--levels", default="1,16,64", help="simulated calls at once, comma-separated")
    parser.add_argument("--route", choices=("ecs", "sagemaker"), default="ecs")
    parser.add_argument("--stt", choices=("ink", "transcribe"), default="ink")
    parser.add_argument("--llm", choices=("openai", "bedrock"), default="openai")
    parser.add_argument("--audio", choices=("telephony", "wideband"), default="telephony")
    parser.add_argument("--turns", type=int, default=3, help="turns per call (the first is warm-up)")
    parser.add_argument(
        "--min-calls", type=int, default=6, help="calls in all at least (one after another at 1)"
    )
    parser.add_argument("--stt-ms", type=float, default=300.0)
    parser.add_argument("--llm-ms", type=float, default=400.0)
    parser.add_argument("--tts-ms", type=float, default=90.0)
    parser.add_argument("--tokens-per-s", type=float, default=50.0)
    args = parser.parse_args()
    want = injected(args)
    server, base = start_server(args)
    failures = 0
    print(
        f"probe turn: {args.stt} -> {args.llm} -> Sonic on {args.route} ({args.audio}), stand-ins at {base}"
    )
    print(f"  {'hop':<11}{'injected':>9}{'p50':>9}{'p99':>9}{'p50 err':>9}{'p99 err':>9}   (ms)")
    try:
        with tempfile.TemporaryDirectory() as folder:
            for calls in (int(level) for level in args.levels.split(",")):
                summary = run_level(args, base, calls, Path(folder) / f"level-{calls}")
                print(
                    f"{calls} calls: {summary['ok']} turns timed of {summary['turns']}, errors {summary['errors'] or 'none'}"
                )
                for hop in HOPS:
                    text, ok = _row(hop, want[hop], summary["hops_ms"][hop])
                    print(text)
                    failures += not ok
                text, ok = _row("turn", sum(want.values()), summary["turn_ms"])
                print(text)
                failures += not ok
                hops_p50 = sum(summary["hops_ms"][hop]["p50"] for hop in HOPS)
                reaction = summary["agent_reaction_ms"]
                print(
                    f"  (the turn's p50 less the sum of the hops' p50s: {summary['turn_ms']['p50'] - hops_p50:+.2f} ms; "
                    f"inside llm, the client's own step from the transcript to the request: p50 {reaction['p50']:.2f}, "
                    f"p99 {reaction['p99']:.2f} ms)"
                )
    finally:
        server.terminate()
        server.wait()
    print(
        f"goal: every row within {GOAL_P50_MS:g} ms at p50 and {GOAL_P99_MS:g} ms at p99; {failures} rows over"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
