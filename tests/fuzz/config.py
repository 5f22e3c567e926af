"""Generators for config/: mutations of the shipped TOML files, chosen by walking the pydantic schema, so a
field added to a model later is fuzzed too without touching this file.

A `Mutation` names the file, the key path it changes and how; `apply` writes the mutated file into a copy of
config/. Values are written with a small TOML writer of our own (inline tables), so any value Python can hold
and TOML can spell goes in as written, and `raw` mutations put in text TOML cannot spell (bytes that are not
UTF-8, nesting deeper than a parser's recursion).
"""

from __future__ import annotations

import json
import math
import tomllib
from dataclasses import dataclass
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from hypothesis import strategies as st
from pydantic import BaseModel

from sonic_deploy.config.catalogue import InstanceCatalogue
from sonic_deploy.config.schema import EnvironmentConfig, ModelPackages

ROOT = Path(__file__).resolve().parents[2]
CONFIG_DIR = ROOT / "config"
# The files the loader reads, and the model each must fit.
FILES: dict[str, type[BaseModel]] = {
    "environments/dev.toml": EnvironmentConfig,
    "environments/prod.toml": EnvironmentConfig,
    "instance_types.toml": InstanceCatalogue,
    "model_packages.toml": ModelPackages,
}

Path_ = tuple[str | int, ...]

# Strings a hostile or careless user writes: control characters, a pasted newline, CloudFormation's own
# syntax (dynamic references, intrinsics, CDK tokens), AWS's reserved tag prefix, very long, not ASCII.
HOSTILE_STRINGS = (
    "",
    " ",
    "\n",
    "us-east-2\n",
    "a\x00b",
    "tab\there",
    "\x1b[31mred",
    "line\u2028sep",
    "{{resolve:secretsmanager:prod/db:SecretString:password}}",
    "{{resolve:ssm:/x}}",
    "${AWS::AccountId}",
    "${AWS::Region}-x",
    "Fn::GetAtt",
    "${Token[TOKEN.123]}",
    "aws:cloudformation:stack-name",
    "AWS:x",
    "a" * 129,
    "a" * 257,
    "b" * 600,
    "x" * 5000,
    "é" * 10,
    "名前",
    "../../etc/passwd",
    "relative/path",
    "/",
    "has space",
    "UPPER",
    "-leading",
    "trailing-",
    "a:b",
    "a@b",
    "#",
    "'quote\"",
    "\\",
    "10.0.0.0/8",
    "10.60.0.1/16",
    "10.60.0.0/29",
    "300.1.1.1/16",
    "10.60.0.0",
    "::/0",
    "us-east-2z",
    "xx-nowhere-9",
    "us-east-2a",
    "a" * 50 + "." + "b" * 40 + ".example.com",  # a valid DNS name past ACM's 64-character Common Name
)
# More client ranges than one security group can hold rules for (EC2: 1,000 inbound rules at most).
MANY_RANGES = [f"172.16.{n // 256}.{n % 256}/32" for n in range(1000)]
HUGE_NUMBERS = (
    0,
    -1,
    1,
    2,
    2**31 - 1,
    2**31,
    -(2**31) - 1,
    2**63 - 1,
    -(2**63),
    10**18,
    0.5,
    -0.5,
    1e308,
    -1e308,
    5e-324,
    float("nan"),
    float("inf"),
    float("-inf"),
)


def hostile_values() -> st.SearchStrategy[Any]:
    """Any value a TOML file can hold, leaning to the ones that break things."""
    scalars = st.one_of(
        st.sampled_from(HOSTILE_STRINGS),
        st.sampled_from(HUGE_NUMBERS),
        st.booleans(),
        st.text(max_size=40),
        st.integers(min_value=-(2**63), max_value=2**63 - 1),
        st.floats(allow_nan=True, allow_infinity=True),
    )
    return st.one_of(
        scalars,
        st.lists(scalars, max_size=4),
        st.just(MANY_RANGES),
        st.dictionaries(st.sampled_from(["a", "aws:x", "Name", "k"]), scalars, max_size=3),
        st.builds(deep_table, st.integers(min_value=30, max_value=120)),
    )


def deep_table(depth: int) -> Any:
    """Tables nested `depth` deep (within a parser's recursion; deeper ones are `raw` mutations)."""
    value: Any = 1
    for _ in range(depth):
        value = {"t": value}
    return value


@dataclass(frozen=True)
class Mutation:
    file: str
    path: Path_
    kind: Literal["set", "delete", "unknown-key", "raw"]
    value: Any = None

    def describe(self) -> str:
        shown = repr(self.value)
        return f"{self.file}: {self.kind} {'.'.join(map(str, self.path))} {shown[:60]}"


def shipped(file: str) -> dict[str, Any]:
    with (CONFIG_DIR / file).open("rb") as handle:
        return tomllib.load(handle)


def _bare(annotation: Any) -> Any:
    while get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    return annotation


def _models(annotation: Any) -> list[type[BaseModel]]:
    annotation = _bare(annotation)
    options = get_args(annotation) if get_origin(annotation) in (Union, UnionType) else (annotation,)
    return [o for o in map(_bare, options) if isinstance(o, type) and issubclass(o, BaseModel)]


def schema_paths(model: type[BaseModel], data: Any, prefix: Path_ = ()) -> list[Path_]:
    """Every key path the model defines under `prefix`, present in `data` or not, and, under a table or list
    of models, the entries `data` has (or a new one)."""
    paths: list[Path_] = []
    present = data if isinstance(data, dict) else {}
    for name, info in model.model_fields.items():
        path = (*prefix, name)
        paths.append(path)
        annotation = _bare(info.annotation)
        sub = present.get(name)
        for inner in _models(annotation):
            paths.extend(schema_paths(inner, sub, path))
        origin = get_origin(annotation)
        args = get_args(annotation)
        if origin is dict and args:
            for inner in _models(args[-1]):
                entries = list(sub) if isinstance(sub, dict) and sub else ["new"]
                for key in entries:
                    paths.append((*path, key))
                    paths.extend(schema_paths(inner, (sub or {}).get(key), (*path, key)))
            if isinstance(sub, dict):
                paths.extend((*path, key) for key in sub)
        if origin is list and args:
            for inner in _models(args[0]):
                items = sub if isinstance(sub, list) and sub else [None]
                for index, item in enumerate(items):
                    paths.extend(schema_paths(inner, item, (*path, index)))
            if isinstance(sub, list):
                paths.extend((*path, index) for index in range(len(sub)))
    return sorted(set(paths), key=lambda p: tuple(map(str, p)))


PATHS: dict[str, list[Path_]] = {file: schema_paths(model, shipped(file)) for file, model in FILES.items()}


@st.composite
def mutations(draw: st.DrawFn) -> Mutation:
    """One change to one shipped file."""
    file = draw(st.sampled_from(sorted(FILES)))
    kind = draw(st.sampled_from(["set", "set", "set", "delete", "unknown-key", "raw"]))
    if kind == "raw":
        return Mutation(file, (), "raw", draw(st.sampled_from(RAW_DAMAGE)))
    path = draw(st.sampled_from(PATHS[file]))
    if kind == "set":
        return Mutation(file, path, "set", draw(hostile_values()))
    if kind == "delete":
        return Mutation(file, path, "delete")
    return Mutation(file, path, "unknown-key", draw(st.sampled_from(["bogus", "Name", "regoin", "x y"])))


# Whole-file damage TOML cannot spell as a value: appended or prepended to the file's text.
RAW_DAMAGE = (
    b'\nextra = "\xff\xfe"\n',
    b"\xef\xbb\xbf",  # a UTF-8 byte-order mark before the first key
    b"\nnested = " + b"[" * 3000 + b"]" * 3000 + b"\n",
    b"\ndeep = " + b"{ a = " * 3000 + b"1" + b" }" * 3000 + b"\n",
    b"\n\x00\n",
    b'\nregion = "us-east-2"\n',  # a key twice
    b"\n[[network]]\n",
)


def apply(mutation: Mutation, config_dir: Path) -> None:
    """Write the mutated file into `config_dir` (a copy of config/)."""
    target = config_dir / mutation.file
    if mutation.kind == "raw":
        original = (CONFIG_DIR / mutation.file).read_bytes()
        damage: bytes = mutation.value
        target.write_bytes(damage + original if damage.startswith(b"\xef\xbb\xbf") else original + damage)
        return
    data = shipped(mutation.file)
    parent: Any = data
    for key in mutation.path[:-1]:
        if isinstance(parent, dict):
            parent = parent.setdefault(key, {})
        elif isinstance(parent, list) and isinstance(key, int) and key < len(parent):
            parent = parent[key]
        else:
            break
    last = mutation.path[-1] if mutation.path else None
    if mutation.kind == "set" and last is not None:
        _put(parent, last, mutation.value)
    elif mutation.kind == "delete" and isinstance(parent, dict):
        parent.pop(last, None)
    elif mutation.kind == "unknown-key":
        table = parent.get(last) if isinstance(parent, dict) else None
        if isinstance(table, dict):
            table[mutation.value] = "x"
        elif isinstance(parent, dict):
            parent[mutation.value] = "x"
    target.write_text(dumps(data), encoding="utf-8")


def _put(parent: Any, key: Any, value: Any) -> None:
    if isinstance(parent, dict) or (isinstance(parent, list) and isinstance(key, int) and key < len(parent)):
        parent[key] = value


def dumps(data: dict[str, Any]) -> str:
    """A TOML document of `key = value` lines, every table inline."""
    return "".join(f"{_key(key)} = {_value(value)}\n" for key, value in data.items())


def _key(key: object) -> str:
    return _string(str(key))


def _string(text: str) -> str:
    """A TOML basic string: JSON's escapes are TOML's, except that TOML has no surrogates (dropped) and
    wants DEL escaped."""
    text = text.encode("utf-8", "ignore").decode("utf-8")
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value) if -(2**63) <= value < 2**63 else json.dumps(str(value))
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items()) + " }"
    return _string(str(value))
