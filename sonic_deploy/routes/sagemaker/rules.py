"""The rules of the SageMaker route's `[sagemaker]` table that need more than one field or file."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from sonic_deploy.config.catalogue import INSTANCE_TYPES_FILE, InstanceCatalogue
from sonic_deploy.config.errors import Fail

if TYPE_CHECKING:
    from sonic_deploy.config.schema import EnvironmentConfig


def check_sagemaker(fail: Fail, env: EnvironmentConfig, catalogue: InstanceCatalogue) -> None:
    sm = env.sagemaker
    gpu_ml_types = sorted(t for t in catalogue.instance_types if t.startswith("ml."))
    if sm.instance_type not in gpu_ml_types:
        fail(
            "sagemaker.instance_type",
            sm.instance_type,
            "not a GPU SageMaker (ml.) instance type",
            f"use one of {', '.join(gpu_ml_types)}, or describe it in config/{INSTANCE_TYPES_FILE}",
        )
    if sm.min_instances < 2:
        fail(
            "sagemaker.min_instances",
            sm.min_instances,
            "fewer than 2 instances (the SageMaker SLA covers only endpoints with more than one instance)",
            "set sagemaker.min_instances to 2 or more",
        )
    if sm.min_instances > sm.max_instances:
        fail(
            "sagemaker.max_instances",
            sm.max_instances,
            f"below min_instances ({sm.min_instances})",
            f"set sagemaker.max_instances to {sm.min_instances} or more",
        )
    if sm.endpoint_name is not None and not re.fullmatch(
        r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}", sm.endpoint_name
    ):
        fail(
            "sagemaker.endpoint_name",
            sm.endpoint_name,
            "not a valid SageMaker endpoint name",
            "use up to 63 letters, digits and hyphens, starting with a letter or digit",
        )
