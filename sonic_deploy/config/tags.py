"""The config's tags: they reach every resource of both stacks (Tags.of(stack) in sonic_deploy/stacks), so
each must fit the strictest resource type the stacks hold."""

from __future__ import annotations

import unicodedata
from collections.abc import Callable
from typing import NoReturn

from sonic_deploy.config.explain import toml_path

# Tags, as every AWS service documents them ("Tag restrictions", e.g. the Amazon ECS API Reference, Tag):
# at most 50 per resource, keys of 1 to 128 and values of up to 256 Unicode characters, letters, numbers,
# spaces and + - = . _ : / @ only, and no key or value that starts with aws: in any case (reserved for AWS).
MAX_TAGS_PER_RESOURCE = 50
# The stacks add tags of their own to some resources, and config's tags reach every resource (Tags.of(stack)
# in sonic_deploy/stacks): CDK's subnets carry Name, aws-cdk:subnet-name and aws-cdk:subnet-type, the FIS
# experiment templates Name and sonic-deploy:experiment. (CloudFormation's own aws:cloudformation:* tags do
# not count against the 50.)
APP_TAGS_PER_RESOURCE = 3
TAG_PUNCTUATION = frozenset("+-=._:/@")
# Most types take an empty value, but not all the stacks hold: CloudFormation's AWS::CloudWatch::Alarm Tag
# and AWS::CloudWatch::CompositeAlarm Tag say Value "Minimum: 1" (the template reference), and CDK's synth
# validation refuses an empty one on the alarms, the dashboard, the ECR repositories and the schedule group.
SHORTEST_VALUE = 1

Fail = Callable[[str, object, str, str], NoReturn]


def tag_text_problem(text: str, longest: int) -> str | None:
    if len(text) > longest:
        return f"longer than {longest} characters ({len(text)})"
    bad = next(
        (c for c in text if not (c.isalnum() or c in TAG_PUNCTUATION or unicodedata.category(c) == "Zs")),
        None,
    )
    if bad is not None:
        return f"{bad!r} is not a character AWS takes in a tag (letters, digits, spaces and + - = . _ : / @)"
    if text.lower().startswith("aws:"):
        return "starts with aws:, a prefix AWS reserves for its own tags"
    return None


def check_tags(fail: Fail, tags: dict[str, str]) -> None:
    room = MAX_TAGS_PER_RESOURCE - APP_TAGS_PER_RESOURCE
    if len(tags) > room:
        fail(
            "tags",
            f"({len(tags)} tags)",
            f"more than {room}: with the {APP_TAGS_PER_RESOURCE} the stacks add to some resources they would "
            f"pass AWS's {MAX_TAGS_PER_RESOURCE} per resource",
            f"keep {room} or fewer",
        )
    for key, value in tags.items():
        field = toml_path(["tags", key])
        problem = "an empty key" if not key else tag_text_problem(key, 128)
        if problem is not None:
            fail(field, key, f"the key: {problem}", "rename the tag")
        if len(value) < SHORTEST_VALUE:
            fail(
                field,
                value,
                "an empty value: CloudWatch alarms, which carry every tag, refuse one",
                "write a value (letters, digits, spaces and + - = . _ : / @), or remove the tag",
            )
        problem = tag_text_problem(value, 256)
        if problem is not None:
            fail(field, value, problem, "write a value of letters, digits, spaces and + - = . _ : / @")
