"""The instance catalogue (config/instance_types.toml): GPU instance types, their GPUs, and the streams one
serves by Sonic version, each figure with its source."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from pydantic import Field

from sonic_deploy.config.base import Strict

INSTANCE_TYPES_FILE = "instance_types.toml"


class InstanceType(Strict):
    """One row of config/instance_types.toml."""

    gpus: Annotated[int, Field(ge=1, le=64)]
    gpu: str
    vcpus: Annotated[int, Field(ge=1, le=1024)]
    memory_gib: Annotated[float, Field(gt=0, le=32_768)]
    local_storage: bool = Field(description="local NVMe instance storage (SageMaker then refuses a KmsKeyId)")


class GpuModel(Strict):
    memory_gib: Annotated[float, Field(gt=0, le=1024)]


class PublishedFigure(Strict):
    """A concurrency figure someone published, and where: the catalogue keeps no number without its source."""

    streams: Annotated[int, Field(ge=1, le=10_000)] = Field(description="concurrent Sonic streams")
    source: Annotated[str, Field(min_length=1)] = Field(description="who says so, and where")


class ConcurrencyFigure(PublishedFigure):
    """The figure the catalogue uses, and the published figures that contradict it."""

    alternatives: list[PublishedFigure] = Field(
        default=[], description="other published figures that contradict this one, each with its source"
    )


class VersionConcurrency(Strict):
    """`[concurrency."<sonic version>"]`: streams per GPU, and per instance where a listing states it."""

    per_gpu: dict[str, ConcurrencyFigure] = Field(description="GPU model -> streams one GPU serves")
    per_instance: dict[str, ConcurrencyFigure] = Field(
        default={}, description="instance type -> streams one instance serves (wins over per_gpu)"
    )


class PackageTypes(Strict):
    """`[model_package."<sonic version>"]`: the instance types the version's Marketplace model package
    serves real-time inference on, as its listing states them."""

    instance_types: Annotated[list[str], Field(min_length=1)]
    source: Annotated[str, Field(min_length=1)] = Field(description="who says so, and where")


class InstanceCatalogue(Strict):
    gpus: dict[str, GpuModel]
    instance_types: dict[str, InstanceType]
    concurrency: dict[str, VersionConcurrency] = Field(
        min_length=1, description="Sonic version -> its concurrency figures"
    )
    model_package: dict[str, PackageTypes] = Field(
        default={}, description="Sonic version -> the SageMaker types its model package supports"
    )


@dataclass(frozen=True)
class CatalogueStreams:
    """Streams one instance serves by the catalogue, for one Sonic version: the figure used, how it was
    reached (`source`), and the contradicting published figures, each as streams per instance."""

    streams: int
    source: str
    alternatives: tuple[PublishedFigure, ...] = ()


def catalogue_streams(
    catalogue: InstanceCatalogue, sonic_version: str, instance_type: str
) -> CatalogueStreams:
    """Concurrent streams one instance of a catalogued type serves under a Sonic version: the version's
    per-instance figure for the type if it has one, else GPUs x its per-GPU figure. The loader has checked
    that every version covers every GPU an instance type uses."""
    version = catalogue.concurrency[sonic_version]
    per_instance = version.per_instance.get(instance_type)
    if per_instance is not None:
        return CatalogueStreams(
            per_instance.streams,
            f"{sonic_version}, per {instance_type}: {per_instance.source}",
            tuple(per_instance.alternatives),
        )
    row = catalogue.instance_types[instance_type]
    per_gpu = version.per_gpu[row.gpu]
    return CatalogueStreams(
        row.gpus * per_gpu.streams,
        f"{sonic_version}, {row.gpus} x {row.gpu} at {per_gpu.streams} per GPU: {per_gpu.source}",
        tuple(
            PublishedFigure(
                streams=row.gpus * alt.streams,
                source=f"{row.gpus} x {row.gpu} at {alt.streams} per GPU: {alt.source}",
            )
            for alt in per_gpu.alternatives
        ),
    )
