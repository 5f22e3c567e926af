"""CloudFormation templates on disk: synthesized ones in a cloud assembly, committed baselines beside them."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sonic_deploy.changes.targets import ROUTES_BY_STACK_ID
from sonic_deploy.user_files import RefusedFileError, read_regular

Template = Mapping[str, Any]
"""A parsed CloudFormation template (JSON object)."""

TEMPLATE_SUFFIX = ".template.json"
BASELINES_DIR = Path("baselines")
IGNORED_RESOURCE_TYPES = frozenset({"AWS::CDK::Metadata"})
"""CDK's version-reporting resource: it changes with library versions and deploys nothing."""


ASSET_HASH = re.compile(r"\b[0-9a-f]{64}\b")
"""A CDK asset's content hash (in S3 keys, image tags, parameters): it changes with the asset's files."""


def without_asset_hashes(value: Any) -> Any:
    """`value` (a template or part of one) with every asset hash replaced by "<asset-hash>"."""
    if isinstance(value, Mapping):
        return {key: without_asset_hashes(item) for key, item in value.items()}
    if isinstance(value, list):
        return [without_asset_hashes(item) for item in value]
    if isinstance(value, str):
        return ASSET_HASH.sub("<asset-hash>", value)
    return value


class TemplateError(Exception):
    """A template file that is missing or unreadable; the message names the file and what makes it."""


def refresh_command(environment: str) -> str:
    return f"make baseline ENV={environment}"


def baseline_path(baselines_dir: Path, environment: str, stack_id: str) -> Path:
    return baselines_dir / environment / f"{stack_id}{TEMPLATE_SUFFIX}"


# CloudFormation takes a template of at most 1 MB from S3 (its quotas page); anything far past that is not one.
LARGEST_TEMPLATE = 64 * 2**20
# The sections the diff reads as tables of entries (logical ID -> definition).
TABLES = ("Resources", "Conditions", "Outputs", "Parameters")


def read_template(path: Path) -> dict[str, Any]:
    """A template file as a JSON object whose Resources (and other tables) are objects, or TemplateError; a
    FIFO, a folder or a link loop is refused before anything is read."""
    if not path.exists() and not path.is_symlink():
        raise TemplateError(f"{path}: no such template")
    try:
        parsed = json.loads(read_regular(path, limit=LARGEST_TEMPLATE).decode("utf-8"))
    except RefusedFileError as error:
        raise TemplateError(f"{path}: {error.problem}; write the template there again") from None
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as error:
        raise TemplateError(f"{path}: not a JSON template ({error}); synthesize it again") from None
    if not isinstance(parsed, dict):
        raise TemplateError(f"{path}: a template is a JSON object, this file holds a {type(parsed).__name__}")
    for table in TABLES:
        if table in parsed and not isinstance(parsed[table], dict):
            raise TemplateError(
                f"{path}: {table} = {type(parsed[table]).__name__}: a template's {table} is a JSON object "
                "(logical ID -> definition); synthesize it again (a baseline: `git checkout` it)"
            )
    return parsed


def stack_templates(directory: Path) -> dict[str, dict[str, Any]]:
    """The sonic stacks' templates in a cloud assembly or baselines folder, by stack ID (others ignored)."""
    if not directory.is_dir():
        return {}
    found: dict[str, dict[str, Any]] = {}
    for path in sorted(directory.glob(f"*{TEMPLATE_SUFFIX}")):
        stack_id = path.name.removesuffix(TEMPLATE_SUFFIX)
        if stack_id in ROUTES_BY_STACK_ID:
            found[stack_id] = read_template(path)
    return found


def resources(template: Template) -> dict[str, Mapping[str, Any]]:
    """The template's resources by logical ID, without CDK's version-reporting resource."""
    listed = template.get("Resources") or {}
    return {
        logical_id: resource
        for logical_id, resource in listed.items()
        if isinstance(resource, Mapping) and resource.get("Type") not in IGNORED_RESOURCE_TYPES
    }


def comparable(template: Template) -> dict[str, Any]:
    """The template as the baseline check sees it: without CDK version reporting (resource, condition)
    and without resource Metadata, which CloudFormation does not deploy and which `cdk synth` fills
    (construct paths, asset hints) while `Template.from_stack` in a test may not."""
    copy = dict(template)
    copy["Resources"] = {
        logical_id: {k: v for k, v in resource.items() if k != "Metadata"}
        for logical_id, resource in resources(template).items()
    }
    conditions = {k: v for k, v in (template.get("Conditions") or {}).items() if k != "CDKMetadataAvailable"}
    if conditions:
        copy["Conditions"] = conditions
    else:
        copy.pop("Conditions", None)
    return copy


def find_stale_baselines(
    synthesized: Mapping[str, Template], *, environment: str, baselines_dir: Path = BASELINES_DIR
) -> list[str]:
    """Compare freshly synthesized templates (by stack ID) with the committed baselines of one environment.

    Returns one message per stale, missing or left-over baseline, each naming the command that refreshes
    them; an empty list means the baselines are current. Only the sonic stacks (SonicSageMaker, SonicEcs)
    are compared.
    """
    fix = f"review `make diff ENV={environment}`, then refresh with `{refresh_command(environment)}`"
    wanted = {stack_id: t for stack_id, t in synthesized.items() if stack_id in ROUTES_BY_STACK_ID}
    committed = stack_templates(baselines_dir / environment)
    problems: list[str] = []
    for stack_id, template in sorted(wanted.items()):
        path = baseline_path(baselines_dir, environment, stack_id)
        if stack_id not in committed:
            problems.append(f"{path} is missing: {fix}")
        # Asset hashes aside: the probe image's changes with every change to sonic_deploy/ (its build context),
        # which code review covers; the baseline is for what the templates declare.
        elif without_asset_hashes(comparable(committed[stack_id])) != without_asset_hashes(
            comparable(template)
        ):
            problems.append(f"{path} differs from the synthesized {stack_id} template: {fix}")
    for stack_id in sorted(set(committed) - set(wanted)):
        path = baseline_path(baselines_dir, environment, stack_id)
        problems.append(f"{path} is for a stack that environment {environment} no longer synthesizes: {fix}")
    return problems
