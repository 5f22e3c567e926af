"""The CPU and memory pairs Fargate offers, for every Fargate task the config sizes: the probe's, and the ECS
route's services that run on Fargate."""

from __future__ import annotations

from sonic_deploy.config.errors import Fail

# Fargate's CPU units -> allowed memory (MiB): min, max, step.
FARGATE_SIZES = {
    256: (512, 2048, 512),
    512: (1024, 4096, 1024),
    1024: (2048, 8192, 1024),
    2048: (4096, 16384, 1024),
    4096: (8192, 30720, 1024),
    8192: (16384, 61440, 4096),
    16384: (32768, 122880, 8192),
}


def check_fargate_size(fail: Fail, field: str, cpu: int, memory_mib: int) -> None:
    if cpu not in FARGATE_SIZES:
        fail(
            f"{field}.cpu", cpu, "not a Fargate CPU size", f"use one of {', '.join(map(str, FARGATE_SIZES))}"
        )
    low, high, step = FARGATE_SIZES[cpu]
    if not (low <= memory_mib <= high and memory_mib % step == 0):
        fail(
            f"{field}.memory_mib",
            memory_mib,
            f"Fargate does not offer this memory with {cpu} CPU units",
            f"use {low} to {high} in steps of {step}",
        )
