"""A run of `probe ws|http|sagemaker` from its typed options, in one of three modes: here (in worker
processes), from the Fargate tasks of `--in-vpc ENV`, or as one of those tasks; then its report and, for the
canary, its metrics."""

from __future__ import annotations

import argparse
import datetime
import math
import sys
from dataclasses import replace
from pathlib import Path

from sonic_deploy.config.errors import one_line
from sonic_deploy.in_vpc import session as in_vpc
from sonic_deploy.probe.canary_metrics import NAMESPACE
from sonic_deploy.probe.options import ProbeOptions
from sonic_deploy.probe.slo import Slo
from sonic_deploy.probe.wires import WIRES
from sonic_deploy.routes import ROUTES, Wire
from sonic_deploy.routes.ecs import outputs as ecs_outputs
from sonic_deploy.routes.sagemaker import outputs as sagemaker_outputs


def run(options: ProbeOptions, parser: argparse.ArgumentParser) -> int:
    """`parser`: the route's, whose options an in-VPC run passes on to its tasks."""
    from sonic_deploy.probe.capacity_search import SearchRange, SloSearch
    from sonic_deploy.probe.level import Level
    from sonic_deploy.probe.load import ProbeSettings, TargetSpec
    from sonic_deploy.probe.output import Progress, RunOutput, default_out_dir, stderr_or_none
    from sonic_deploy.probe.workers import run_levels, run_schedule

    route = options.route
    session: in_vpc.Session | None = None
    store: in_vpc.ObjectStore | None = None
    task = options.in_vpc.task
    if task is not None:  # inside a task: the run's store first (it may hold the transcripts)
        store, transcripts = in_vpc.task_store(task)
        if transcripts is not None:
            options = replace(options, transcripts=transcripts)
    elif options.in_vpc.environment is not None:
        try:
            session = _in_vpc_session(options, parser)
        except in_vpc.InVpcError as error:
            print(f"sonic-deploy probe: {error}", file=sys.stderr)
            return 2
        filled = session.filled  # --url, --endpoint... from the stack's outputs, where not given
        options = replace(
            options,
            url=filled.get("url", options.url),
            endpoint=filled.get("endpoint", options.endpoint),
            region=filled.get("region", options.region),
            model_id=filled.get("model_id", options.model_id),
            cartesia_version=filled.get("cartesia_version", options.cartesia_version),
        )
    target = TargetSpec(
        route=route,
        url=options.url,
        endpoint=options.endpoint,
        region=options.region,
        endpoint_url=options.endpoint_url,
        api_key=options.api_key,
        cartesia_version=options.cartesia_version,
        multiplex=options.multiplex,
        timeout_s=options.timeout,
        client=options.client,
        agent=options.agent,
        ca_bundle=options.ca_bundle,
    )
    settings = ProbeSettings(
        target,
        options.template(),
        options.audible_threshold_db,
        options.playback_delay_ms,
        options.max_in_flight,
        options.seed,
        options.ramp_up,
        options.error_backoff_ms / 1000,
    )

    def closed_loop(index: int, concurrency: int) -> Level:
        warmup = concurrency if options.warmup is None else options.warmup
        return Level(index, concurrency=concurrency, requests=options.requests, warmup=warmup)

    search: SloSearch | None = None
    levels: list[Level] = []
    if options.slo is not None:
        warning = _slo_warning(options.slo, options.requests)
        if warning is not None:
            print(f"sonic-deploy probe: note: {warning}", file=sys.stderr)
        search = SloSearch(
            options.slo, SearchRange(options.slo_start, options.slo_max, options.slo_resolution), closed_loop
        )
    elif options.rate:
        levels = [
            Level(
                i, rate=r, duration_s=options.duration, warmup=options.warmup or 0, arrivals=options.arrivals
            )
            for i, r in enumerate(options.rate)
        ]
    else:
        levels = [closed_loop(i, int(c)) for i, c in enumerate(options.concurrency)]
    if WIRES[route] is Wire.SAGEMAKER:
        from sonic_deploy.probe.targets.sagemaker import setup_problem

        problem = setup_problem(target.region, target.endpoint_url)
        if problem is not None:
            print(f"sonic-deploy probe: {problem}", file=sys.stderr)
            return 2
    # --publish-metrics: the stack's Region and --profile with --in-vpc (the run's own account), else boto3's
    # chain (in the canary's task, AWS_DEFAULT_REGION, which ECS sets); refused before the run if there is none.
    publish_to = (
        (options.in_vpc.profile, session.deployment.region) if session is not None else (None, target.region)
    )
    if options.publish_metrics is not None and store is None:
        from sonic_deploy.probe.publish_metrics import region_of

        if region_of(*publish_to) is None:
            print(
                "sonic-deploy probe: --publish-metrics: no AWS Region to publish to. Fix: set AWS_DEFAULT_REGION "
                "(or a profile's region), or add --in-vpc ENV (the stack's Region)",
                file=sys.stderr,
            )
            return 2
    if store is not None and task is not None:
        from sonic_deploy.in_vpc.task import level_runner, serve

        def permitted(level: Level) -> str | None:
            """Why this task's own options would not make `level` (None: they would): a sweep's levels are
            its own list's; a search's, any concurrency up to --slo-max, with the options' requests and
            warm-ups. A forged command in the bucket cannot make a task a load generator of its own."""
            if search is None:
                if level.index < len(levels) and level == levels[level.index]:
                    return None
                return f"{level} is not one of its own levels"
            concurrency = level.concurrency or 0
            if not 1 <= concurrency <= options.slo_max:
                return f"concurrency {concurrency} is not within its --slo-max {options.slo_max}"
            if level != closed_loop(level.index, concurrency):
                return f"{level} is not what its options make ({closed_loop(level.index, concurrency)})"
            return None

        return serve(store, task.index, task.count, level_runner(settings, task.index, task.count, permitted))
    out_dir: Path = options.out or default_out_dir(route)
    try:
        described = (
            target.describe() if session is None else {**target.describe(), "in_vpc": session.describe()}
        )
        output = RunOutput(out_dir, described, Progress(stderr_or_none(options.quiet)), search)
    except FileExistsError as error:
        print(f"sonic-deploy probe: {error}", file=sys.stderr)
        return 2
    except OSError as error:  # e.g. under /proc or /sys, which argparse's check cannot tell from a folder
        print(
            f"sonic-deploy probe {route}: --out {one_line(repr(str(out_dir)))}: cannot write the run there "
            f"({error.strerror or type(error).__name__}). Fix: give a folder you can write",
            file=sys.stderr,
        )
        return 2
    print(f"probe {route}: writing to {out_dir}/", file=sys.stderr)
    interrupted: int | None = None
    failed = False
    try:
        if session is not None:
            from sonic_deploy.in_vpc.runner import run_schedule_in_vpc
            from sonic_deploy.probe.workers import fixed

            schedule = fixed(levels) if search is None else search.levels()
            session.run(
                lambda conversation: run_schedule_in_vpc(conversation, schedule, output, options.timeout)
            )
        elif search is None:
            run_levels(settings, levels, max(1, options.workers), output)
        else:
            run_schedule(settings, search.levels(), max(1, options.workers), output)
    except KeyboardInterrupt as stop:
        interrupted = stop.exit_code if isinstance(stop, in_vpc.Terminated) else 130
        output.interrupted()
    except in_vpc.InVpcError as error:
        failed = True
        output.interrupted()
        print(f"sonic-deploy probe: {error}", file=sys.stderr)
    finally:
        output.close()
        output.write_summary()
    # report imports matplotlib, which needs a writable MPLCONFIGDIR (the task's /tmp): only after the run.
    from sonic_deploy.probe.report import summary_table, write_report

    if output.levels and not options.no_report:
        write_report(out_dir)
    print(summary_table(output.summary()))
    if search is not None and (search.result is None or search.result.max_concurrency is None):
        # No answer: said where it is not missed. The run itself worked (the levels are measurements),
        # so the exit code stays 0, unless interrupted.
        print(f"sonic-deploy probe: {search.verdict()}", file=sys.stderr)
    if interrupted is not None:
        return interrupted
    if failed:
        return 1
    if options.publish_metrics is not None:
        return _publish_metrics(options.publish_metrics, route, options.publish_route, out_dir, *publish_to)
    return 0


def _slo_warning(slo: Slo, requests: int) -> str | None:
    """An error share no level can measure: one failure in --requests is already more than it allows."""
    term = next((t for t in slo.terms if t.measure == "errors" and t.limit > 0), None)
    if term is None or term.limit >= 1 / requests:
        return None
    return (
        f"--slo {term.text} with --requests {requests}: one failed request is already "
        f"{1 / requests:.1%}, so no error at all is allowed; give --requests "
        f"{math.ceil(1 / term.limit)} or more for that share to mean what it says"
    )


def _in_vpc_session(options: ProbeOptions, parser: argparse.ArgumentParser) -> in_vpc.Session:
    """The in-VPC run of `probe ws|http|sagemaker`: the stack of the environment's route that speaks the
    target's wire (ECS's or EKS's for ws and http, SageMaker's for sagemaker); the target's options default to
    the stack's outputs."""
    from sonic_deploy.connect.deployment import api_urls

    route = options.route
    wire = WIRES[route]

    def defaults(deployment: in_vpc.ProbeDeployment) -> dict[str, str]:
        out = deployment.outputs
        if wire is Wire.SAGEMAKER:
            return {
                "--endpoint": out[sagemaker_outputs.ENDPOINT_NAME],
                "--region": out[sagemaker_outputs.REGION],
            }
        websocket, base = api_urls(out[ecs_outputs.API_URL], deployment.stack_name)
        return {
            "--url": websocket if route == "ws" else f"{base}/tts/bytes",
            "--model-id": out[ecs_outputs.MODEL_ID],
            "--cartesia-version": out[ecs_outputs.CARTESIA_VERSION],
        }

    label = None
    if options.slo is not None:  # the search may reach --slo-max: the tasks are there for it from the start
        load: tuple[int | None, float | None] = (options.slo_max, None)
        label = f"--slo up to --slo-max {options.slo_max}"
    elif options.rate:
        load = (None, max(options.rate))
    else:
        load = (max(options.concurrency), None)
    argv = list(options.argv)
    at = argv.index(route, argv.index("probe") + 1) + 1
    return in_vpc.prepare(
        options.in_vpc,
        options.transcripts,
        parser,
        argv[at:],
        argv[:at],
        [name for name, candidate in ROUTES.items() if candidate.wire is wire],
        load,
        defaults,
        label,
    )


def _publish_metrics(
    environment: str,
    probe_route: str,
    deployed_route: str | None,
    out_dir: Path,
    profile: str | None,
    region: str | None,
) -> int:
    from sonic_deploy.probe import publish_metrics
    from sonic_deploy.probe.output import read_samples

    route = deployed_route or publish_metrics.ROUTES[probe_route]
    data = publish_metrics.metric_data(
        read_samples(out_dir), environment, route, datetime.datetime.now(datetime.UTC)
    )
    try:
        calls = publish_metrics.publish(publish_metrics.cloudwatch_client(profile, region), data)
    except publish_metrics.PublishError as error:
        print(f"sonic-deploy probe: --publish-metrics: {error}", file=sys.stderr)
        return 1
    print(
        f"sonic-deploy probe: published {len(data)} data to {NAMESPACE} (Environment={environment}, "
        f"Route={route}) in {calls} call(s)",
        file=sys.stderr,
    )
    return 0
