"""Network: a VPC with isolated private subnets only (no NAT), reached through VPC endpoints.

The subnets are in the stage's ``availability_zones`` when it names them (the stacks stay
environment-agnostic: AZ names need no lookup), else in the region's first ``max_azs``."""

from __future__ import annotations

from typing import Any

from aws_cdk import Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_logs as logs

from constructs import Construct
from infra.config import StageConfig
from infra.constructs.common import log_retention, removal_policy

APP_SUBNETS = ec2.SubnetType.PRIVATE_ISOLATED

# Interface endpoints the functions need; everything else stays unreachable (no NAT).
INTERFACE_ENDPOINTS: dict[str, ec2.InterfaceVpcEndpointAwsService] = {
    "Sqs": ec2.InterfaceVpcEndpointAwsService.SQS,
    "SecretsManager": ec2.InterfaceVpcEndpointAwsService.SECRETS_MANAGER,
    "XRay": ec2.InterfaceVpcEndpointAwsService.XRAY,
    # the ElastiCache API: the cache rotation function sets the user's passwords (ModifyUser)
    "ElastiCache": ec2.InterfaceVpcEndpointAwsService.ELASTICACHE,
    "Events": ec2.InterfaceVpcEndpointAwsService.EVENTBRIDGE,  # the relay's PutEvents
}
BEDROCK_ENDPOINT = ("BedrockRuntime", ec2.InterfaceVpcEndpointAwsService.BEDROCK_RUNTIME)
"""Only in stages whose embedder or extractor is Bedrock (``StageConfig.uses_bedrock``)."""


def interface_endpoints(config: StageConfig) -> dict[str, ec2.InterfaceVpcEndpointAwsService]:
    """The interface endpoints of a stage."""
    name, service = BEDROCK_ENDPOINT
    return {**INTERFACE_ENDPOINTS, **({name: service} if config.uses_bedrock else {})}


class NetworkStack(Stack):
    """VPC, flow logs, endpoints and the security group every Engram function runs in."""

    def __init__(self, scope: Construct, id: str, *, config: StageConfig, **kwargs: Any) -> None:
        super().__init__(scope, id, **kwargs)

        azs = list(config.availability_zones)
        self.vpc = ec2.Vpc(
            self,
            "Vpc",
            max_azs=None if azs else config.max_azs,
            availability_zones=azs or None,
            nat_gateways=0,
            subnet_configuration=[
                ec2.SubnetConfiguration(name="app", subnet_type=APP_SUBNETS, cidr_mask=22),
            ],
            restrict_default_security_group=True,
        )
        flow_logs = logs.LogGroup(
            self,
            "FlowLogs",
            retention=log_retention(config.log_retention_days),
            removal_policy=removal_policy(config.retain_logs),
        )
        self.vpc.add_flow_log(
            "FlowLog",
            destination=ec2.FlowLogDestination.to_cloud_watch_logs(flow_logs),
            traffic_type=ec2.FlowLogTrafficType.REJECT,
        )

        def closed_group(id: str, description: str) -> ec2.SecurityGroup:
            """A security group with no egress but the rules added to it."""
            return ec2.SecurityGroup(
                self, id, vpc=self.vpc, description=description, allow_all_outbound=False
            )

        # The functions' security group: egress only to what they must reach. The data stack
        # adds egress to the cache and the proxy (and their ingress from this group).
        self.functions_sg = closed_group("FunctionsSg", "Engram Lambda functions")
        self.endpoints_sg = closed_group(
            "EndpointsSg", "Engram VPC interface endpoints (HTTPS from the functions only)"
        )
        self.endpoints_sg.add_ingress_rule(
            self.functions_sg, ec2.Port.tcp(443), "HTTPS from Engram functions"
        )
        self.functions_sg.add_egress_rule(
            self.endpoints_sg, ec2.Port.tcp(443), "HTTPS to the VPC interface endpoints"
        )

        for name, service in interface_endpoints(config).items():
            self.vpc.add_interface_endpoint(
                name,
                service=service,
                subnets=ec2.SubnetSelection(subnet_type=APP_SUBNETS),
                security_groups=[self.endpoints_sg],
                private_dns_enabled=True,
                open=False,  # no VPC-wide rule: only the groups allowed above reach them
            )
