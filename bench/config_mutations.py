"""How the config loader takes hostile edits of the shipped files (issue 16): a fixed sample of mutations from
tests/fuzz/config.py, each classified as a clean error, valid, an error without a field or fix (or not one
line), a traceback, or accepted although AWS would refuse the value at deploy (an independent check of the
loaded settings against AWS's rules, written here apart from the loader's).

    PYTHONPATH=. python bench/config_mutations.py [--per-path 6] [--construct 12]

--construct N also builds the stacks (add_stacks, no synth) for N of the valid ones, so a value the loader
passes but a construct refuses (a jsii error) is counted as a traceback.
"""

from __future__ import annotations

import argparse
import collections
import ipaddress
import random
import re
import shutil
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sonic_deploy.config import ConfigError, Settings, load_settings
from tests.fuzz import config as fuzz

TAG = re.compile(r"[\w .:/=+\-@]*")
# The OCI distribution reference grammar (distribution/reference), without tag or digest; the first part
# is a registry host only with a '.' or ':' in it or as localhost (normalize.go), else lower case.
IMAGE = re.compile(
    r"(?:(?:localhost(?::[0-9]+)?|[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?"
    r"(?:(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)+(?::[0-9]+)?|:[0-9]+))/)?"
    r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*"
)
SECRET_NAME = re.compile(r"[A-Za-z0-9/_+=.@-]{1,512}")


def aws_refuses(settings: Settings) -> str | None:
    """Why AWS would refuse what loaded, or None (the rules as AWS documents them, checked apart)."""
    env = settings.environment
    if len(env.tags) > 47:
        return "tags: more than 50 with the app's own"
    for key, value in env.tags.items():
        if not (1 <= len(key) <= 128 and len(value) <= 256 and TAG.fullmatch(key) and TAG.fullmatch(value)):
            return f"tag {key!r}"
        if key.lower().startswith("aws:"):
            return f"tag {key!r}: aws: prefix"
    nets = [env.network.cidr, *env.network.route_cidrs.values()]
    if env.network.existing_vpc:
        nets = [env.network.existing_vpc.vpc_cidr]
    for cidr in nets:
        try:
            net = ipaddress.IPv4Network(cidr)
        except ValueError:
            return f"cidr {cidr!r}"
        if not 16 <= net.prefixlen <= 28:
            return f"cidr {cidr!r} prefix"
    dumped = env.model_dump()
    for service in (dumped.get("ecs") or {}).get("services", {}).values():
        # A shell command or a variable's value may hold a newline or tab: ECS takes them.
        service["command"] = [t.replace("\n", " ").replace("\t", " ") for t in service["command"]]
        service["health_check"] = [t.replace("\n", " ").replace("\t", " ") for t in service["health_check"]]
        service["environment"] = {
            k: v.replace("\n", " ").replace("\t", " ") for k, v in service["environment"].items()
        }
    for text in _strings(dumped):
        if any(ord(c) < 32 or ord(c) == 127 for c in text):
            return f"control character in {text!r}"
        if "{{resolve:" in text or "${AWS::" in text or "Fn::" in text or "${Token[" in text:
            return f"CloudFormation syntax in {text!r}"
    for number in _numbers(env.model_dump()) + _numbers(settings.catalogue.model_dump()):
        if abs(number) > 2**31 - 1:
            return f"number {number!r}"
    if env.ecs is not None:
        for secret in (env.ecs.secrets.api_key, env.ecs.secrets.registry_credentials):
            if not SECRET_NAME.fullmatch(secret):
                return f"secret name {secret!r}"
        if not env.ecs.licence_data_path.startswith("/"):
            return "licence_data_path not absolute"
        for service in env.ecs.services.values():
            if not IMAGE.fullmatch(service.source):
                return f"image {service.source!r}"
    return None


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in [*_strings(k), *_strings(v)]]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _numbers(value: Any) -> list[float]:
    if isinstance(value, bool):
        return []
    if isinstance(value, int | float):
        return [value]
    if isinstance(value, dict):
        return [n for v in value.values() for n in _numbers(v)]
    if isinstance(value, list):
        return [n for v in value for n in _numbers(v)]
    return []


def one_line(error: ConfigError) -> bool:
    text = str(error)
    return not any(ord(c) < 32 or ord(c) == 127 or c in "\u2028\u2029\x85" for c in text)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--per-path", type=int, default=6)
    parser.add_argument("--construct", type=int, default=0)
    parser.add_argument("--show", type=int, default=3, help="examples shown per outcome")
    parser.add_argument("--dump", type=Path, help="write each case's outcome here, one line a case (to diff)")
    args = parser.parse_args()
    rng = random.Random(16)
    cases: list[fuzz.Mutation] = []
    for file in sorted(fuzz.FILES):
        for path in fuzz.PATHS[file]:
            for _ in range(args.per_path):
                cases.append(fuzz.Mutation(file, path, "set", _pick(rng)))
            cases.append(fuzz.Mutation(file, path, "delete"))
            cases.append(fuzz.Mutation(file, path, "unknown-key", "bogus"))
        cases.extend(fuzz.Mutation(file, (), "raw", damage) for damage in fuzz.RAW_DAMAGE)
    counts: collections.Counter[str] = collections.Counter()
    examples: dict[str, list[str]] = collections.defaultdict(list)
    valid: list[Settings] = []
    dump: list[str] = []
    with tempfile.TemporaryDirectory() as scratch:
        for case in cases:
            copy = Path(scratch) / "config"
            if not copy.exists():
                shutil.copytree(fuzz.CONFIG_DIR, copy)
            fuzz.apply(case, copy)
            env = "prod" if case.file.endswith("prod.toml") else "dev"
            outcome, detail = classify(copy, env)
            if outcome == "valid" and isinstance(detail, Settings):
                valid.append(detail)
            counts[outcome] += 1
            dump.append(f"{case.describe()!r} -> {outcome}: {str(detail)[:160]!r}")
            if len(examples[outcome]) < args.show:
                examples[outcome].append(f"{case.describe()} -> {str(detail)[:200]}")
            shutil.copyfile(fuzz.CONFIG_DIR / case.file, copy / case.file)
        for settings in rng.sample(valid, min(args.construct, len(valid))):
            problem = construct(settings)
            if problem:
                counts["valid"] -= 1
                counts["traceback (constructs)"] += 1
                examples["traceback (constructs)"].append(problem[:300])
    if args.dump:
        args.dump.write_text("\n".join(dump) + "\n")
    print(f"{len(cases)} mutations:", dict(counts))
    for outcome, shown in examples.items():
        print(f"== {outcome}")
        for line in shown:
            print("  ", line)
    return 0


def _pick(rng: random.Random) -> Any:
    choice = rng.randrange(6)
    if choice == 0:
        return rng.choice(fuzz.HOSTILE_STRINGS)
    if choice == 1:
        return rng.choice(fuzz.HUGE_NUMBERS)
    if choice == 2:
        return rng.choice([True, False, [], {}, [1, "a"], {"a": 1}, {"aws:x": "y"}])
    if choice == 3:
        return [rng.choice(fuzz.HOSTILE_STRINGS) for _ in range(rng.randrange(1, 4))]
    if choice == 4:
        return {rng.choice(fuzz.HOSTILE_STRINGS): rng.choice(fuzz.HOSTILE_STRINGS) for _ in range(3)}
    return fuzz.deep_table(rng.randrange(30, 120))


def classify(config_dir: Path, env: str) -> tuple[str, object]:
    try:
        settings = load_settings(config_dir, env)
    except ConfigError as error:
        if not one_line(error):
            return "not one line", error
        if not error.field or not error.fix or error.field in ("", "()"):
            return "no field or fix", error
        if "that satisfies this" in error.fix:  # says to fix it, not what to write
            return "clean error, generic fix", error
        return "clean error", error
    except BaseException as error:
        return "traceback", f"{type(error).__name__}: {error}"
    refused = aws_refuses(settings)
    if refused:
        return "accepted, AWS refuses", refused
    return "valid", settings


def construct(settings: Settings) -> str | None:
    from aws_cdk import App

    from sonic_deploy.stacks import add_stacks
    from tests.cdk_context import cli_context

    try:
        add_stacks(App(context=cli_context()), settings)
    except Exception:
        return traceback.format_exc().splitlines()[-1]
    return None


if __name__ == "__main__":
    sys.exit(main())
