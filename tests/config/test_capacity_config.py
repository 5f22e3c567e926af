"""`[ecs.capacity]` at load: what the config allows and the message for each thing it refuses."""

from __future__ import annotations

from pathlib import Path

import pytest

from sonic_deploy.config import ConfigError, load_settings
from tests.conftest import EditConfig

DEV = "environments/dev.toml"
RESERVATION = 'id = "cr-0a1b2c3d4e5f60718"\navailability_zone = "us-east-2a"\ninstance_type = "g6e.xlarge"\n'
FALLBACK = 'id = "cr-0f1e2d3c4b5a69788"\navailability_zone = "us-east-2b"\ninstance_type = "g6.2xlarge"\n'


def error_for(config_dir: Path, env: str = "dev") -> str:
    with pytest.raises(ConfigError) as caught:
        load_settings(config_dir, env)
    return str(caught.value).split(": ", 1)[1]  # without the (temporary) file path


def with_capacity(edit_config: EditConfig, table: str) -> Path:
    return edit_config(DEV, "", "\n[ecs.capacity]\n" + table)


def test_defaults_one_type_pinned_ami_on_demand_open(edit_config: EditConfig) -> None:
    ecs = load_settings(edit_config(DEV, "", ""), "dev").environment.ecs
    assert ecs is not None
    assert ecs.zone_instance_types() == {"us-east-2a": ["g6e.xlarge"]}
    assert ecs.capacity.ami == "al2023-ami-ecs-gpu-hvm-2023.0.20260820-kernel-6.1-x86_64-ebs"
    assert (ecs.capacity.market, ecs.capacity.reservations, ecs.capacity.fallback) == (
        "on-demand",
        "open",
        None,
    )


def test_every_option_together(edit_config: EditConfig) -> None:
    config = with_capacity(
        edit_config,
        'instance_types = ["g6.2xlarge"]\nami = "recommended"\nreservations = "targeted"\n'
        "reservations_only = true\n"
        f"[[ecs.capacity.reservation]]\n{RESERVATION}"
        f"[[ecs.capacity.reservation]]\n{FALLBACK}"
        '[ecs.capacity.fallback]\navailability_zone = "us-east-2b"\n',
    )
    ecs = load_settings(config, "dev").environment.ecs
    assert ecs is not None
    # The fallback launches the first AZ's types unless it names its own.
    assert ecs.zone_instance_types() == {
        "us-east-2a": ["g6e.xlarge", "g6.2xlarge"],
        "us-east-2b": ["g6e.xlarge", "g6.2xlarge"],
    }
    assert ecs.reservation_ids("us-east-2a") == ["cr-0a1b2c3d4e5f60718"]
    assert ecs.reservation_ids("us-east-2b") == ["cr-0f1e2d3c4b5a69788"]


def test_type_not_in_catalogue(edit_config: EditConfig) -> None:
    config = with_capacity(edit_config, 'instance_types = ["g6e.12xlarge"]\n')
    assert error_for(config) == (
        "ecs.capacity.instance_types[0] = 'g6e.12xlarge': not a one-GPU instance type of a family the ECS route "
        "supports (g6, g6e, g7e). Fix: use one of g6.2xlarge, g6.4xlarge, g6.xlarge, g6e.2xlarge, g6e.xlarge, g7e.2xlarge, g7e.4xlarge, or "
        "describe it in config/instance_types.toml"
    )


def test_type_the_worker_does_not_fit(edit_config: EditConfig) -> None:
    # g6.xlarge has 16 GiB; the shipped worker asks 28 GiB.
    config = with_capacity(edit_config, 'instance_types = ["g6.xlarge"]\n')
    assert error_for(config).startswith(
        "ecs.services.gpu_worker.memory_mib = 28672: with the metrics agent (256 MiB) it does not fit a g6.xlarge"
    )


def test_type_listed_twice(edit_config: EditConfig) -> None:
    config = with_capacity(edit_config, 'instance_types = ["g6e.xlarge"]\n')
    assert error_for(config) == (
        "ecs.capacity.instance_types = ['g6e.xlarge']: lists a type twice, or ecs.instance_type (g6e.xlarge) "
        "again. Fix: list each further type once; ecs.instance_type is always tried first"
    )


def test_ami_neither_release_nor_recommended(edit_config: EditConfig) -> None:
    config = with_capacity(edit_config, 'ami = "ami-0123456789abcdef0"\n')
    assert error_for(config).startswith(
        "ecs.capacity.ami = 'ami-0123456789abcdef0': neither \"recommended\" nor an ECS GPU AMI release name "
        "(al2023-ami-ecs-gpu-hvm-2023.0.<YYYYMMDD>-kernel-<major>.<minor>-x86_64-ebs"
    )


@pytest.mark.parametrize("kernel", ["6.1", "6.12", "7.0"])
def test_ami_release_on_any_kernel_is_taken(edit_config: EditConfig, kernel: str) -> None:
    """AL2023 moves to newer kernels; a release built on one must not be refused."""
    release = f"al2023-ami-ecs-gpu-hvm-2023.0.20261201-kernel-{kernel}-x86_64-ebs"
    config = with_capacity(edit_config, f'ami = "{release}"\n')
    ecs = load_settings(config, "dev").environment.ecs
    assert ecs is not None and ecs.capacity.ami == release


@pytest.mark.parametrize("kernel", ["6", "6.1.2", "6.x", "latest"])
def test_ami_release_with_a_malformed_kernel_is_refused(edit_config: EditConfig, kernel: str) -> None:
    config = with_capacity(
        edit_config, f'ami = "al2023-ami-ecs-gpu-hvm-2023.0.20261201-kernel-{kernel}-x86_64-ebs"\n'
    )
    assert 'neither "recommended" nor an ECS GPU AMI release name' in error_for(config)


def test_fallback_zone_not_in_the_vpc(edit_config: EditConfig) -> None:
    config = with_capacity(edit_config, '[ecs.capacity.fallback]\navailability_zone = "us-east-2c"\n')
    assert error_for(config) == (
        "ecs.capacity.fallback.availability_zone = 'us-east-2c': not one of the VPC's Availability Zones. "
        "Fix: use one of us-east-2b, or add it to the VPC's availability_zones"
    )


def test_fallback_zone_the_first_zone(edit_config: EditConfig) -> None:
    config = with_capacity(edit_config, '[ecs.capacity.fallback]\navailability_zone = "us-east-2a"\n')
    assert error_for(config) == (
        "ecs.capacity.fallback.availability_zone = 'us-east-2a': the same AZ as ecs.availability_zone: a "
        "fallback must be another AZ. Fix: use another of the VPC's AZs: us-east-2b"
    )


def test_fallback_type_not_in_catalogue(edit_config: EditConfig) -> None:
    config = with_capacity(
        edit_config,
        '[ecs.capacity.fallback]\navailability_zone = "us-east-2b"\ninstance_types = ["g5.xlarge"]\n',
    )
    assert error_for(config).startswith(
        "ecs.capacity.fallback.instance_types[0] = 'g5.xlarge': not a one-GPU instance type"
    )


def test_spot_outside_dev(edit_config: EditConfig) -> None:
    config = with_capacity(edit_config, 'market = "spot"\n')
    # dev as another environment: the same ECS route, with an account (only dev may leave it out).
    dev = (config / DEV).read_text()
    (config / "environments/stage.toml").write_text('account = "123456789012"\n' + dev)
    assert error_for(config, "stage") == (
        "ecs.capacity.market = 'spot': Spot instances are interrupted with two minutes' notice: only the "
        'default environment (dev) may use them. Fix: set market = "on-demand" (or leave it out)'
    )


def test_spot_with_reservations(edit_config: EditConfig) -> None:
    config = with_capacity(
        edit_config,
        f'market = "spot"\nreservations = "targeted"\n[[ecs.capacity.reservation]]\n{RESERVATION}',
    )
    assert error_for(config).startswith("ecs.capacity.market = 'spot': capacity reservations hold On-Demand")


def test_reservation_in_another_zone(edit_config: EditConfig) -> None:
    other = RESERVATION.replace("us-east-2a", "us-east-2b")
    config = with_capacity(edit_config, f'reservations = "targeted"\n[[ecs.capacity.reservation]]\n{other}')
    assert error_for(config) == (
        "ecs.capacity.reservation[0].availability_zone = 'us-east-2b': no GPU group launches in this AZ, so the "
        "reservation would never be used. Fix: use us-east-2a (ecs.availability_zone), or remove the reservation"
    )


def test_reservation_in_the_fallback_zone_is_allowed(edit_config: EditConfig) -> None:
    other = RESERVATION.replace("us-east-2a", "us-east-2b")
    config = with_capacity(
        edit_config,
        f'reservations = "targeted"\n[[ecs.capacity.reservation]]\n{other}'
        '[ecs.capacity.fallback]\navailability_zone = "us-east-2b"\n',
    )
    ecs = load_settings(config, "dev").environment.ecs
    assert ecs is not None and ecs.reservation_ids("us-east-2b") == ["cr-0a1b2c3d4e5f60718"]


def test_reservation_of_a_type_the_group_does_not_launch(edit_config: EditConfig) -> None:
    other = RESERVATION.replace('"g6e.xlarge"', '"g6.2xlarge"')
    config = with_capacity(edit_config, f'reservations = "targeted"\n[[ecs.capacity.reservation]]\n{other}')
    assert error_for(config) == (
        "ecs.capacity.reservation[0].instance_type = 'g6.2xlarge': the group in us-east-2a does not launch this "
        "type (g6e.xlarge). Fix: add it to the group's instance types, or correct the type"
    )


def test_only_reservations_with_a_group_that_has_none(edit_config: EditConfig) -> None:
    config = with_capacity(
        edit_config,
        f'reservations = "targeted"\nreservations_only = true\n[[ecs.capacity.reservation]]\n{RESERVATION}'
        '[ecs.capacity.fallback]\navailability_zone = "us-east-2b"\n',
    )
    assert error_for(config) == (
        "ecs.capacity.reservations_only = True: the group in us-east-2b has no listed reservation, so with only "
        "reservations it could never launch. Fix: list a reservation in us-east-2b, or leave reservations_only "
        "out (reservations first, then On-Demand)"
    )


def test_ami_release_without_its_ebs_suffix(edit_config: EditConfig) -> None:
    config = with_capacity(edit_config, 'ami = "al2023-ami-ecs-gpu-hvm-2023.0.20260820-kernel-6.1-x86_64"\n')
    assert error_for(config).startswith(
        "ecs.capacity.ami = 'al2023-ami-ecs-gpu-hvm-2023.0.20260820-kernel-6.1-x86_64'"
    )


def test_capacity_block_of_a_g_type(edit_config: EditConfig) -> None:
    config = with_capacity(
        edit_config,
        f'reservations = "targeted"\n[[ecs.capacity.reservation]]\n{RESERVATION}kind = "capacity-block"\n',
    )
    assert error_for(config) == (
        "ecs.capacity.reservation[0].kind = 'capacity-block': EC2 offers Capacity Blocks for ML for P and Trn "
        'types only (EC2 User Guide, "Capacity Blocks for ML"), and the ECS route runs G types. Fix: use kind = '
        '"on-demand" with an On-Demand Capacity Reservation'
    )


def test_targeted_without_reservations(edit_config: EditConfig) -> None:
    config = with_capacity(edit_config, 'reservations = "targeted"\n')
    assert error_for(config).startswith(
        'ecs.capacity.reservation = (missing): reservations = "targeted" but no reservation is listed'
    )


def test_only_reservations_needs_targeted(edit_config: EditConfig) -> None:
    config = with_capacity(edit_config, "reservations_only = true\n")
    assert error_for(config).startswith(
        "ecs.capacity.reservations_only = True: only targeted reservations can be the only capacity"
    )


def test_reservations_listed_but_none(edit_config: EditConfig) -> None:
    config = with_capacity(edit_config, f'reservations = "none"\n[[ecs.capacity.reservation]]\n{RESERVATION}')
    assert error_for(config).startswith("ecs.capacity.reservations = 'none': reservations are listed")


def test_reservation_listed_twice(edit_config: EditConfig) -> None:
    config = with_capacity(
        edit_config,
        f'reservations = "targeted"\n[[ecs.capacity.reservation]]\n{RESERVATION}'
        f"[[ecs.capacity.reservation]]\n{RESERVATION}",
    )
    assert error_for(config) == (
        "ecs.capacity.reservation[1].id = 'cr-0a1b2c3d4e5f60718': listed twice. Fix: list each reservation once"
    )


def test_reservation_id_shape(edit_config: EditConfig) -> None:
    bad = RESERVATION.replace("cr-0a1b2c3d4e5f60718", "cr-XYZ")
    config = with_capacity(edit_config, f'reservations = "targeted"\n[[ecs.capacity.reservation]]\n{bad}')
    assert "cr-XYZ" in error_for(config)


def test_fallback_sooner_than_a_normal_scale_out(edit_config: EditConfig) -> None:
    config = with_capacity(
        edit_config, '[ecs.capacity.fallback]\navailability_zone = "us-east-2b"\nafter_minutes = 10\n'
    )
    assert error_for(config) == (
        "ecs.capacity.fallback.after_minutes = 10: no longer than a normal scale-out in the first AZ "
        "(instance_warmup_s + worker_start_period_s = 600 s): every scale-out would start overflow workers in the "
        "fallback AZ. Fix: set it to 11 or more"
    )
