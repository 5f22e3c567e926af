"""`python -m sonic_deploy.changes`: diff synthesized stacks against baselines or the account, refresh the
baselines, and resolve ENV/ROUTE for the deploy targets. Exit codes: 0 fine, 1 dangerous changes not
allowed, 2 a usage or input problem (said in one line, no traceback)."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sonic_deploy.arguments import (
    ACCOUNT_ID,
    ENVIRONMENT,
    OneLineParser,
    config_folder,
    input_file,
    name,
    option_message,
    output_file,
    output_folder,
    write_output,
)
from sonic_deploy.changes.assembly import check_assembly
from sonic_deploy.changes.cdk_failures import (
    NOT_BOOTSTRAPPED,
    bootstrap_hint,
    caller_account,
    credentials_hint,
)
from sonic_deploy.changes.ci_roles import REPOSITORY, CiRolesError, apply_ci_roles, stack_name
from sonic_deploy.changes.classify import StackChanges, classify
from sonic_deploy.changes.execution_policy import ExecutionPolicyError, apply_execution_policy
from sonic_deploy.changes.live import LiveTemplateError, cloudformation_client, deployed_template
from sonic_deploy.changes.report import markdown_report, text_report
from sonic_deploy.changes.targets import (
    ROUTES_BY_STACK_ID,
    TargetError,
    environment_routes,
    resolve_target,
)
from sonic_deploy.changes.templates import (
    TEMPLATE_SUFFIX,
    TemplateError,
    baseline_path,
    refresh_command,
    stack_templates,
)
from sonic_deploy.config import (
    STACK_IDS,
    ConfigError,
    Settings,
    cloudformation_stack_name,
    environment_names,
    load_settings,
)
from sonic_deploy.config.errors import one_line
from sonic_deploy.config.placeholders import refusal_lines

EXIT_OK, EXIT_DANGEROUS, EXIT_USAGE = 0, 1, 2
EXIT_NOT_EXPLAINED = 1
GITHUB_REPOSITORY = name(REPOSITORY, "a GitHub repository, OWNER/REPO", "acme/sonic-deploy")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="python -m sonic_deploy.changes", description=__doc__)
    parser.add_argument(
        "--config", type=config_folder, default=Path("config"), help="config folder (default: config)"
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    diff = commands.add_parser("diff", help="classify what a deploy would change; exit 1 if dangerous")
    _add_locations(diff)
    diff.add_argument("--route", choices=sorted(STACK_IDS), help="only this route's stack")
    diff.add_argument("--live", action="store_true", help="compare with the deployed stacks (credentials)")
    diff.add_argument("--allow-dangerous", action="store_true", help="report dangerous changes, exit 0")
    diff.add_argument(
        "--markdown",
        type=output_file("the Markdown report"),
        help="also append a Markdown report to this file (e.g. $GITHUB_STEP_SUMMARY)",
    )
    diff.set_defaults(run=run_diff)

    baseline = commands.add_parser("baseline", help="copy the synthesized templates over the baselines")
    _add_locations(baseline)
    baseline.set_defaults(run=run_baseline)

    target = commands.add_parser("target", help="check ENV (and ROUTE); print key=value facts for make/CI")
    target.add_argument("--env", default="", help="environment name")
    target.add_argument("--route", help="route; checked against the environment's routes")
    target.add_argument(
        "--with-account",
        action="store_true",
        help="when config names no account, ask the credentials' account (STS)",
    )
    target.add_argument(
        "--deploy",
        action="store_true",
        help="refuse the route's placeholders (REPLACE-ME images, an unconfirmed ARN...) before any AWS call",
    )
    target.set_defaults(run=run_target)

    stack_id = commands.add_parser(
        "stack-id", help="print a route's stack id (its template's name in cdk.out)"
    )
    stack_id.add_argument("--route", required=True, choices=sorted(STACK_IDS), help="route")
    stack_id.set_defaults(run=run_stack_id)

    environments = commands.add_parser("environments", help="print the environment names, one a line")
    environments.add_argument("--json", action="store_true", help="as one JSON list (for a CI matrix)")
    environments.set_defaults(run=run_environments)

    policy = commands.add_parser(
        "execution-policy",
        help="create or update CloudFormation's execution policy for `cdk bootstrap`; print its ARN",
    )
    policy.add_argument(
        "--env", required=True, type=ENVIRONMENT, help="environment (for its Region and partition)"
    )
    policy.add_argument(
        "--account", required=True, type=ACCOUNT_ID, help="the 12-digit account being bootstrapped"
    )
    policy.add_argument(
        "--document",
        type=input_file("an IAM policy document (JSON)"),
        default=Path("config/bootstrap/cloudformation-execution-policy.json"),
        help="the IAM policy document (default: config/bootstrap/cloudformation-execution-policy.json)",
    )
    policy.add_argument(
        "--boundary-document",
        type=input_file("an IAM policy document (JSON)"),
        default=Path("config/bootstrap/permissions-boundary.json"),
        help="the stacks' roles' permissions boundary (default: config/bootstrap/permissions-boundary.json)",
    )
    policy.set_defaults(run=run_execution_policy)

    ci_roles = commands.add_parser(
        "ci-roles", help="create or update GitHub Actions' OIDC roles for an environment; print their ARNs"
    )
    ci_roles.add_argument(
        "--env", required=True, type=ENVIRONMENT, help="environment (its Region, its roles)"
    )
    ci_roles.add_argument(
        "--repository", required=True, type=GITHUB_REPOSITORY, help="OWNER/REPO on GitHub (the OIDC subject)"
    )
    ci_roles.add_argument(
        "--oidc-provider", action="store_true", help="also create the account's GitHub OIDC provider"
    )
    ci_roles.add_argument("--diff-role", action="store_true", help="also create the read-only diff role")
    ci_roles.add_argument(
        "--template",
        type=input_file("a CloudFormation template (JSON)"),
        default=Path("config/bootstrap/ci-roles.json"),
        help="the template (default: config/bootstrap/ci-roles.json)",
    )
    ci_roles.set_defaults(run=run_ci_roles)

    explain = commands.add_parser(
        "explain-cdk-failure",
        help="after a failed cdk deploy/destroy: explain missing credentials or bootstrap",
    )
    explain.add_argument("--env", required=True, type=ENVIRONMENT)
    explain.add_argument(
        "--log",
        type=input_file("the CDK command's log", text=False, empty=True),
        required=True,
        help="the CDK command's captured output",
    )
    explain.set_defaults(run=run_explain_cdk_failure)

    fresh = commands.add_parser(
        "check-assembly",
        help="exit 2, saying why, unless <synthesized>/<env> is a whole synth of the current config and code",
    )
    _add_locations(fresh)
    fresh.set_defaults(run=run_check_assembly)
    return parser


def _add_locations(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--env", action="append", required=True, type=ENVIRONMENT, help="environment (repeatable)"
    )
    parser.add_argument(
        "--synthesized",
        type=Path,
        default=Path("cdk.out/by-env"),
        help="folder holding one cloud assembly per environment, <folder>/<env>/",
    )
    parser.add_argument(
        "--baselines",
        type=output_folder("the baselines"),
        default=Path("baselines"),
        help="folder holding <env>/<StackId>.template.json",
    )


def _synthesized(args: argparse.Namespace, environment: str) -> dict[str, dict[str, Any]]:
    environment_routes(args.config, environment)  # an unknown ENV fails here with the list of known ones
    assembly = args.synthesized / environment
    # Only what a successful synth of this config and code wrote: never an earlier or a half-written one.
    check_assembly(assembly, environment=environment, config_dir=args.config)
    templates = stack_templates(assembly)
    if not templates:
        expected = " or ".join(stack_id + TEMPLATE_SUFFIX for stack_id in STACK_IDS.values())
        raise TemplateError(
            f"no synthesized sonic stacks in {assembly}/ (expected {expected}): run "
            f"`make diff ENV={environment}`, which synthesizes first, or "
            f"`cdk synth -c env={environment} --output {assembly}`"
        )
    return templates


def run_diff(args: argparse.Namespace) -> int:
    stacks: list[StackChanges] = []
    for environment in args.env:
        synthesized = _synthesized(args, environment)
        if args.live:
            stacks += _diff_live(args, environment, synthesized)
        else:
            stacks += _diff_baselines(args, environment, synthesized)
    print(text_report(stacks, allow_dangerous=args.allow_dangerous), end="")
    if args.markdown is not None:
        report = markdown_report(stacks, allow_dangerous=args.allow_dangerous)

        def append(path: Path) -> None:
            with path.open("a", encoding="utf-8") as summary:
                summary.write(report)

        write_output(args.markdown, "--markdown", append)
    dangerous = any(stack.dangerous for stack in stacks)
    return EXIT_DANGEROUS if dangerous and not args.allow_dangerous else EXIT_OK


def _selected(args: argparse.Namespace, stack_ids: set[str]) -> list[str]:
    wanted = sorted(stack_ids)
    return [s for s in wanted if s == STACK_IDS[args.route]] if args.route else wanted


def _diff_baselines(
    args: argparse.Namespace, environment: str, synthesized: dict[str, dict[str, Any]]
) -> list[StackChanges]:
    region = load_settings(args.config, environment).environment.region
    committed = stack_templates(args.baselines / environment)
    stacks = []
    for stack_id in _selected(args, set(synthesized) | set(committed)):
        path = baseline_path(args.baselines, environment, stack_id)
        changes = classify(
            committed.get(stack_id, {}),
            synthesized.get(stack_id, {}),
            stack=f"{environment}/{stack_id}",
            compared_with=str(path),
            region=region,
        )
        notes = []
        if stack_id not in committed:
            notes.append(
                f"no baseline yet, so every resource counts as added: review, then "
                f"`{refresh_command(environment)}` and commit {path}"
            )
        if stack_id not in synthesized:
            notes.append(
                f"environment {environment} no longer synthesizes {stack_id}: a deploy leaves the "
                "deployed stack as it is; `make destroy` removes it"
            )
        stacks.append(StackChanges(changes.stack, changes.compared_with, changes.changes, tuple(notes)))
    return stacks


def _diff_live(
    args: argparse.Namespace, environment: str, synthesized: dict[str, dict[str, Any]]
) -> list[StackChanges]:
    region = load_settings(args.config, environment).environment.region
    client = cloudformation_client(region)
    stacks = []
    for stack_id in _selected(args, set(synthesized)):
        stack_name = cloudformation_stack_name(environment, ROUTES_BY_STACK_ID[stack_id])
        deployed = deployed_template(client, stack_name)
        changes = classify(
            deployed or {},
            synthesized[stack_id],
            stack=f"{environment}/{stack_id}",
            compared_with=f"deployed stack {stack_name} ({region})",
            region=region,
        )
        notes = (
            ()
            if deployed is not None
            else (f"stack {stack_name} is not deployed in {region}: every resource counts as added",)
        )
        stacks.append(StackChanges(changes.stack, changes.compared_with, changes.changes, notes))
    return stacks


def run_baseline(args: argparse.Namespace) -> int:
    try:
        return _write_baselines(args)
    except OSError as error:  # e.g. --baselines under /proc or /sys, or a read-only folder
        raise TemplateError(
            f"--baselines {str(args.baselines)!r}: cannot write {error.filename or 'there'} "
            f"({error.strerror or type(error).__name__}). Fix: give a folder you can write (default: baselines)"
        ) from None


def _write_baselines(args: argparse.Namespace) -> int:
    for environment in args.env:
        synthesized = _synthesized(args, environment)
        target_dir = args.baselines / environment
        target_dir.mkdir(parents=True, exist_ok=True)
        for stack_id in sorted(synthesized):
            path = baseline_path(args.baselines, environment, stack_id)
            shutil.copyfile(args.synthesized / environment / f"{stack_id}{TEMPLATE_SUFFIX}", path)
            print(f"wrote {path}")
        for stack_id in sorted(set(stack_templates(target_dir)) - set(synthesized)):
            path = baseline_path(args.baselines, environment, stack_id)
            path.unlink()
            print(f"removed {path} (environment {environment} no longer synthesizes {stack_id})")
    print(f"Review the change with `git diff {args.baselines}` and commit it.")
    return EXIT_OK


def run_check_assembly(args: argparse.Namespace) -> int:
    for environment in args.env:
        _synthesized(args, environment)
    return EXIT_OK


def run_target(args: argparse.Namespace) -> int:
    routes = environment_routes(args.config, args.env)
    settings = load_settings(args.config, args.env)
    account = settings.environment.account
    if account is None and args.with_account:
        account = caller_account(settings.environment.region)
    facts = {
        "environment": args.env,
        "region": settings.environment.region,
        "account": account or "",
        "routes": " ".join(routes),
    }
    if args.route is not None:
        target = resolve_target(args.config, args.env, args.route)
        facts |= {"route": target.route, "stack_id": target.stack_id, "stack_name": target.stack_name}
    if args.deploy:
        refuse_placeholders(settings, [args.route] if args.route else routes)
    for key, value in facts.items():
        print(f"{key}={value}")
    return EXIT_OK


class PlaceholderError(TargetError):
    """Placeholders a deploy would carry: `main` prints an `error:` line for each (and the count first)."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        super().__init__("\n".join(lines))


def refuse_placeholders(settings: Settings, routes: Sequence[str]) -> None:
    """A deploy with a shipped placeholder fails in AWS minutes later; stop it here, naming each one."""
    lines = refusal_lines(settings.environment_name, settings.placeholders, routes)
    if lines:
        raise PlaceholderError(lines)


def run_stack_id(args: argparse.Namespace) -> int:
    print(STACK_IDS[args.route])
    return EXIT_OK


def run_environments(args: argparse.Namespace) -> int:
    names = environment_names(args.config)
    print(json.dumps(names) if args.json else "\n".join(names))
    return EXIT_OK


def run_execution_policy(args: argparse.Namespace) -> int:
    """Print the execution policies' ARNs, comma-separated, on stdout (for `cdk bootstrap
    --cloudformation-execution-policies`) and what was done to each policy on stderr."""
    environment_routes(args.config, args.env)
    region = load_settings(args.config, args.env).environment.region
    (boundary, done), *parts = apply_execution_policy(
        document_path=args.document, boundary_path=args.boundary_document, account=args.account, region=region
    )
    print(f"permissions boundary {boundary}: {done} from {args.boundary_document}", file=sys.stderr)
    for arn, part_done in parts:
        print(f"CloudFormation execution policy {arn}: {part_done} from {args.document}", file=sys.stderr)
    print(",".join(arn for arn, _ in parts))
    return EXIT_OK


def run_ci_roles(args: argparse.Namespace) -> int:
    """Print `KEY=ARN` for each role (the GitHub variables to set) and what was done on stderr."""
    environment_routes(args.config, args.env)
    region = load_settings(args.config, args.env).environment.region
    done, outputs = apply_ci_roles(
        template=args.template,
        repository=args.repository,
        environment=args.env,
        region=region,
        oidc_provider=args.oidc_provider,
        diff_role=args.diff_role,
    )
    print(f"stack {stack_name(args.env)} in {region}: {done} from {args.template}", file=sys.stderr)
    variables = {"DeployRoleArn": "AWS_DEPLOY_ROLE_ARN", "DiffRoleArn": "AWS_DIFF_ROLE_ARN"}
    for key, value in sorted(outputs.items()):
        print(f"{variables.get(key, key)}={value}")
    return EXIT_OK


def run_explain_cdk_failure(args: argparse.Namespace) -> int:
    """Print what to do when a CDK command failed for want of credentials or bootstrap: exit 0 when it
    explained the failure, EXIT_NOT_EXPLAINED when the failure was something else (the CDK said it)."""
    environment_routes(args.config, args.env)
    region = load_settings(args.config, args.env).environment.region
    try:
        output = args.log.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        raise TemplateError(f"{args.log}: no such log of the CDK command") from None
    hint = credentials_hint(output)
    if hint is None and NOT_BOOTSTRAPPED.search(output) is not None:
        account = load_settings(args.config, args.env).environment.account or caller_account(region)
        hint = bootstrap_hint(output, environment=args.env, region=region, account=account)
    if hint is None:
        return EXIT_NOT_EXPLAINED
    print(hint, file=sys.stderr)
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.run(args))
    except (
        TargetError,
        TemplateError,
        LiveTemplateError,
        ExecutionPolicyError,
        CiRolesError,
        ConfigError,
    ) as error:
        if isinstance(error, PlaceholderError):
            for line in error.lines:
                print(f"error: {one_line(line)}", file=sys.stderr)
            return EXIT_USAGE
        shown = option_message(error) if isinstance(error, ConfigError) else one_line(str(error))
        print(f"error: {shown}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
