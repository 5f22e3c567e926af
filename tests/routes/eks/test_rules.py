"""The EKS route's config rules: each refusal names the field, the value and the fix (docs/eks.md, section 8)."""

from __future__ import annotations

import pytest

from sonic_deploy.config import ConfigError, load_settings
from tests.conftest import EKS_ENV, EditConfig

FILE = f"environments/{EKS_ENV}.toml"


def _refusal(edit_config: EditConfig, old: str, new: str) -> ConfigError:
    config = edit_config(FILE, old, new)
    with pytest.raises(ConfigError) as caught:
        load_settings(config, EKS_ENV)
    return caught.value


@pytest.mark.parametrize(
    ("old", "new", "field", "fix"),
    [
        ('routes = ["eks"]', 'routes = ["eks"]\n[bogus]', "bogus", ""),
        ("min_workers = 2", "min_workers = 1", "eks.min_workers", "set eks.min_workers to 2 or more"),
        (
            "# admins = [",
            'admins = ["arn:aws:iam::123456789012:user/me"]\n# [',
            "eks.cluster.admins[0]",
            "text of that form",
        ),
        ("cpu = 3072", "cpu = 4096", "eks.services.gpu_worker.cpu", "or drop g6e.xlarge"),
        ("api_server_replicas = 2", "api_server_replicas = 1", "eks.api_server_replicas", "2 or more"),
        ('instance_type = "g6e.xlarge"', 'instance_type = "g5.xlarge"', "eks.instance_type", "use one of"),
        (
            'instance_types = ["g6.2xlarge"]',
            'instance_types = ["g6e.xlarge"]',
            "eks.capacity.instance_types[0]",
            "remove the repeat",
        ),
        (
            'instance_types = ["g6.2xlarge"]',
            'instance_types = ["g6.xlarge"]',
            "eks.services.gpu_worker.memory_mib",
            "or drop g6.xlarge",
        ),
        ('ami = "al2023@v20260714"', 'ami = "al2023@latest"', "eks.capacity.ami", "pin a release"),
        ('ami = "al2023@v20260714"', 'ami = "al2023@2026"', "eks.capacity.ami", "an alias of that form"),
        (
            'kubernetes_version = "1.36"',
            'kubernetes_version = "1.37"',
            "eks.kubernetes_version",
            "one of those",
        ),
        ("nats_replicas = 3", 'nats_replicas = 3\nnamespace = "kube-system"', "eks.namespace", '"sonic"'),
        (
            'availability_zone = "us-east-2a"',
            'availability_zone = "us-east-2c"',
            "eks.availability_zone",
            "us-east-2a, us-east-2b",
        ),
        ('licence_mode = "connected"', 'licence_mode = "air-gapped"', "eks.nat_gateways", "nat_gateways = 0"),
        ("nat_gateways = 1", "nat_gateways = 0", "eks.nat_gateways", 'licence_mode = "air-gapped"'),
        (
            "nat_gateways = 1",
            'nat_gateways = 1\nlicence_data_path = "/mnt/secrets-store/licence"',
            "eks.licence_data_path",
            '"/data"',
        ),
        ("nat_gateways = 1", 'nat_gateways = 1\nlicence_data_path = "/"', "eks.licence_data_path", '"/data"'),
        (
            '"connected"            # "air-gapped": no egress, an offline licence; needs [eks.mirror]\n'
            "nat_gateways = 1",
            '"air-gapped"\nnat_gateways = 0',
            "eks.mirror",
            "sonic-deploy mirror --env NAME",
        ),
        (
            '# [eks.mirror]\n# charts = "123456789012.dkr.ecr.us-east-2.amazonaws.com/sonic-mirror/charts"',
            '[eks.mirror]\ncharts = "123456789012.dkr.ecr.us-east-1.amazonaws.com/charts"\n'
            'images = "123456789012.dkr.ecr.us-east-2.amazonaws.com/m"',
            "eks.mirror.charts",
            "ECR in us-east-2",
        ),
        (
            '[eks.services.licence_proxy]\nsource = "REPLACE-ME.pkg.dev/cartesia/self-hosted/license-proxy"\n'
            'tag = "REPLACE-ME"\nport = 8080\ncpu = 512\nmemory_mib = 1024\nsecrets = { CARTESIA_API_KEY = "api_key" }\n',
            "",
            "eks.services.licence_proxy",
            "add an",
        ),
        ("tls = false\n", "", "eks.api.allow_plaintext_outside_dev", "remove it"),
    ],
)
def test_refused_with_the_field_and_the_fix(
    edit_config: EditConfig, old: str, new: str, field: str, fix: str
) -> None:
    error = _refusal(edit_config, old, new)
    assert error.field == field
    assert fix in error.fix


def test_an_existing_cluster_needs_its_vpc_and_security_group(edit_config: EditConfig) -> None:
    error = _refusal(edit_config, '# existing = "my-cluster"', 'existing = "my-cluster"')
    assert error.field == "network.existing_vpc"
    assert "describe-cluster" in error.fix
    edit_config(FILE, "# [network.existing_vpc]", "[network.existing_vpc]")
    for comment in (
        '# vpc_id = "vpc-',
        '# vpc_cidr = "',
        "# private_subnet_ids = ",
        "# availability_zones = [",
        "# private_route_table_ids = ",
    ):
        edit_config(FILE, comment, comment[2:])
    error = _refusal(edit_config, "", "")
    assert error.field == "eks.cluster.security_group_id"
    assert "clusterSecurityGroupId" in error.fix
    edit_config(FILE, "# security_group_id = ", "security_group_id = ")
    admins = 'admins = ["arn:aws:iam::123456789012:role/platform-admin"]'
    error = _refusal(edit_config, f"# {admins}", admins)
    assert error.field == "eks.cluster.admins"
    assert "create-access-entry" in error.fix


def test_the_shipped_environment_loads_with_the_eks_repositories(edit_config: EditConfig) -> None:
    settings = load_settings(edit_config(FILE, "", ""), EKS_ENV)
    assert settings.environment.eks is not None
    assert settings.environment.eks.instance_types == ["g6e.xlarge", "g6.2xlarge"]
    assert settings.ecr_repository("gpu_worker", "eks") == "sonic-dev-eks/eks/gpu-worker"
    assert settings.route_cidr("eks") == "10.61.0.0/16"


def test_a_region_without_an_eks_add_on_registry_is_refused(edit_config: EditConfig) -> None:
    """The nodes' ECR endpoints must let the add-ons' images through from that registry's account."""
    config = edit_config(FILE, "", "")
    path = config / FILE
    path.write_text(path.read_text().replace("us-east-2", "mx-central-1"))
    with pytest.raises(ConfigError) as caught:
        load_settings(config, EKS_ENV)
    assert caught.value.field == "region"
    assert "addon_registry.py" in caught.value.fix
