"""The EKS route's services: the load balancer the stack owns (its target group filled by a
TargetGroupBinding, docs/eks.md section 3) and the workloads' AWS identities (Pod Identity)."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Duration, Stack
from aws_cdk import aws_eks as eks_l1
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_logs as logs
from aws_cdk import aws_secretsmanager as secretsmanager

from sonic_deploy.config.cartesia import Listener, services_run
from sonic_deploy.constructs.api_load_balancer import AccessLogs, ApiCertificate, ApiLoadBalancer
from sonic_deploy.constructs.findings import acknowledge_compliance
from sonic_deploy.routes.eks.config import EksConfig
from sonic_deploy.routes.eks.constructs.add_on_policies import pod_identity_role
from sonic_deploy.routes.eks.constructs.add_ons import SYSTEM_NAMESPACE, ClusterAddOns
from sonic_deploy.routes.eks.constructs.cluster import SYSTEM_NODES
from sonic_deploy.routes.eks.constructs.licence_storage import EbsCsiDriver
from sonic_deploy.routes.eks.constructs.operations import METRICS_NAMESPACE
from sonic_deploy.routes.eks.foundation import Foundation
from sonic_deploy.routes.eks.manifests import SERVICE_ACCOUNTS, OfflineLicence, Workloads, workloads

# Kinds whose definitions the add-ons' charts install: applied once those are in.
CUSTOM_KINDS = frozenset(
    {"SecretProviderClass", "TargetGroupBinding", "TriggerAuthentication", "ScaledObject"}
)


class Services:
    """Builds Api (the NLB, listener and IP target group), the workloads' roles and their Pod Identity
    associations, the log group the CloudWatch agent writes its embedded metrics to, and the workloads
    (manifests.py): Workloads, the built-in objects, then WorkloadResources, the custom ones."""

    def __init__(
        self,
        stack: Stack,
        cfg: EksConfig,
        base: Foundation,
        api: Listener,
        *,
        vpc_cidr: str,
        client_cidrs: Sequence[str],
        metrics_log_retention: logs.RetentionDays,
        region: str,
        gpu_nodes: str,
        licence_secret: str,
    ) -> None:
        """`gpu_nodes`: the NodePools' name (Capacity's); `licence_secret`: the offline licence's secret name
        (air-gapped mode)."""
        cluster = base.cluster.cluster
        api_server = cfg.services["api_server"]
        assert api_server.port is not None  # the config's rules require it
        # The API server's pods run on the system nodes, which carry the cluster security group.
        self.load_balancer = ApiLoadBalancer(
            stack,
            "Api",
            vpc=base.network.vpc,
            vpc_cidr=vpc_cidr,
            placement=base.placement,
            api_port=api_server.port,
            api_security_group=cluster.cluster_security_group,
            api_targets=[],
            config_table="eks.api",
            listener_port=api.port,
            idle_timeout=Duration.seconds(cfg.nlb_idle_timeout_s),
            deregistration_delay=Duration.seconds(cfg.deregistration_delay_s),
            certificate=ApiCertificate(
                str(cfg.api.domain_name), cfg.api.certificate_arn, cfg.api.private_ca_arn
            )
            if api.tls
            else None,
            access_logs=AccessLogs(Duration.days(cfg.api.access_log_retention_days), base.key)
            if cfg.api.access_logs
            else None,
            deletion_protection=api.deletion_protection,
            client_cidrs=client_cidrs,
            plaintext_accepted_by=api.plaintext_accepted_by,
        )
        # The controllers: the load balancer controller may register targets in this target group only.
        self.add_ons = ClusterAddOns(
            stack,
            "AddOns",
            cluster=cluster,
            vpc_id=base.network.vpc.vpc_id,
            system_node_selector=SYSTEM_NODES,
            target_group_arns=[self.load_balancer.target_group.target_group_arn],
            dcgm_namespace=cfg.namespace,
            cluster_name=base.cluster.name,
            mirror=cfg.mirror,
        )
        self.add_ons.node.add_dependency(*base.cluster.ready)
        secrets: dict[str, secretsmanager.ISecret] = {
            "api_key": base.secrets.api_key,
            "registry_credentials": base.secrets.registry_credentials,
        }
        used = {ref for name in ("api_server", "gpu_worker") for ref in cfg.services[name].secrets.values()}
        identity = {"cluster": base.cluster.name, "namespace": cfg.namespace}
        self.licence_proxy_role = pod_identity_role(
            stack,
            "LicenceProxyRole",
            description="reads the secrets Cartesia's licence proxy mounts (its offline licence, air-gapped)",
            accounts=[SERVICE_ACCOUNTS["licence_proxy"]],
            **identity,
        )
        for ref in sorted(set(cfg.services["licence_proxy"].secrets.values())):
            secrets[ref].grant_read(self.licence_proxy_role)
        licence: OfflineLicence | None = None
        self.ebs_csi_driver: EbsCsiDriver | None = None
        if cfg.licence_mode == "air-gapped":
            licence = OfflineLicence(licence_secret, cfg.licence_data_path, cfg.licence_content_type)
            secretsmanager.Secret.from_secret_name_v2(stack, "Licence", licence_secret).grant_read(
                self.licence_proxy_role
            )
            if cfg.cluster.existing is None:  # an existing cluster's own driver: preflight checks it is there
                self.ebs_csi_driver = EbsCsiDriver(
                    stack, "EbsCsiDriver", cluster_name=base.cluster.name, namespace=SYSTEM_NAMESPACE
                )
                self.ebs_csi_driver.node.add_dependency(*base.cluster.ready)
        acknowledge_compliance(
            self.licence_proxy_role,
            "IAMNoInlinePolicy",
            reason="the licence proxy's role may only read the secrets it mounts (CDK's grant_read), in an "
            "inline policy that lives and goes with the role",
        )
        self.secrets_role = pod_identity_role(
            stack,
            "SecretsRole",
            description="reads the Sonic secrets the API server and workers mount",
            accounts=[SERVICE_ACCOUNTS["api_server"], SERVICE_ACCOUNTS["gpu_worker"]],
            **identity,
        )
        for ref in sorted(used):
            secrets[ref].grant_read(self.secrets_role)
        acknowledge_compliance(
            self.secrets_role,
            "IAMNoInlinePolicy",
            reason="the workloads' role may only read the Sonic secrets they mount (CDK's grant_read), in an "
            "inline policy that lives and goes with the role",
        )
        self.metrics_log_group = logs.LogGroup(
            stack, "MetricsLogs", encryption_key=base.key, retention=metrics_log_retention
        )
        self.metrics_role = pod_identity_role(
            stack,
            "MetricsRole",
            description="the CloudWatch agent: the services' embedded metrics",
            accounts=[SERVICE_ACCOUNTS["cloudwatch_agent"]],
            **identity,
        )
        self.metrics_log_group.grant_write(self.metrics_role)
        acknowledge_compliance(
            self.metrics_role,
            "IAMNoInlinePolicy",
            reason="the CloudWatch agent's role may only write to its own log group (CDK's grant_write), in an "
            "inline policy that lives and goes with the role",
        )
        roles = {
            "licence_proxy": self.licence_proxy_role,
            "api_server": self.secrets_role,
            "gpu_worker": self.secrets_role,
            "cloudwatch_agent": self.metrics_role,
        }
        self.associations = [
            eks_l1.CfnPodIdentityAssociation(
                stack,
                f"{name.title().replace('_', '')}Identity",
                cluster_name=cluster.cluster_name,
                namespace=cfg.namespace,
                service_account=SERVICE_ACCOUNTS[name],
                role_arn=role.role_arn,
            )
            for name, role in roles.items()
        ]
        run = services_run(cfg.services, cfg.licence_mode)
        objects = workloads(
            Workloads(
                namespace=cfg.namespace,
                services=run,
                images={name: base.registry.uri(name) for name in run},
                api_server_replicas=cfg.api_server_replicas,
                nats_replicas=cfg.nats_replicas,
                min_workers=cfg.min_workers,
                max_workers=cfg.max_workers,
                api_key_secret=cfg.secrets.api_key,
                registry_credentials_secret=cfg.secrets.registry_credentials,
                target_group_arn=self.load_balancer.target_group.target_group_arn,
                deregistration_delay_s=cfg.deregistration_delay_s,
                api_stop_timeout_s=cfg.api_stop_timeout_s,
                worker_stop_timeout_s=cfg.worker_stop_timeout_s,
                region=region,
                cluster_name=base.cluster.name,
                metrics_namespace=METRICS_NAMESPACE,
                target_utilisation=cfg.target_utilisation,
                gpu_target_percent=cfg.gpu_target_percent,
                scale_out_window_s=cfg.scale_out_window_s,
                scale_in_window_s=cfg.scale_in_window_s,
                service_accounts=SERVICE_ACCOUNTS,
                metrics_log_group=self.metrics_log_group.log_group_name,
                gpu_nodes_name=gpu_nodes,
                system_node_selector=SYSTEM_NODES,
                licence=licence,
            )
        )
        # overwrite: `kubectl apply`, not `create`: an object already there (a namespace on your cluster) is
        # updated rather than failing the deploy (aws-eks-v2's kubectl handler, apply/__init__.py).
        self.workloads = eks.KubernetesManifest(
            stack,
            "Workloads",
            cluster=cluster,
            manifest=[o for o in objects if o["kind"] not in CUSTOM_KINDS],
            overwrite=True,
        )
        self.workloads.node.add_dependency(*base.cluster.ready, *self.associations)
        if self.ebs_csi_driver is not None:
            self.workloads.node.add_dependency(self.ebs_csi_driver)
        for name in run:
            base.registry.before_use(name, self.workloads)
        # The DCGM exporter runs in the workloads' namespace (their agent scrapes it): after the namespace.
        self.add_ons.dcgm_exporter.node.add_dependency(self.workloads)
        self.resources = eks.KubernetesManifest(
            stack,
            "WorkloadResources",
            cluster=cluster,
            manifest=[o for o in objects if o["kind"] in CUSTOM_KINDS],
            overwrite=True,
        )
        self.resources.node.add_dependency(self.workloads, *self.add_ons.releases)
