"""One Engram Lambda function: arm64, Python 3.12, in the VPC's isolated subnets, with its own
log group (generated name: it may be retained), the shared dependencies layer and the ENGRAM_*
environment; and the factory the service makes its functions with."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from aws_cdk import Duration
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs

from constructs import Construct
from infra.bundling import FunctionSpec, function_code
from infra.config import FunctionConfig, StageConfig
from infra.constructs.common import log_retention, removal_policy
from infra.constructs.nag import acknowledge

RUNTIME = lambda_.Runtime.PYTHON_3_12
ARCHITECTURE = lambda_.Architecture.ARM_64


class EngramFunction(Construct):
    """A Lambda function built from a :class:`~infra.bundling.FunctionSpec`."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        spec: FunctionSpec,
        sizing: FunctionConfig,
        layer: lambda_.ILayerVersion,
        vpc: ec2.IVpc | None,
        subnets: ec2.SubnetSelection | None,
        security_group: ec2.ISecurityGroup | None,
        environment: Mapping[str, str],
        log_retention_days: int,
        retain_logs: bool,
        tracing: bool,
        function_name: str,
        wildcard_reason: str | None = None,
    ) -> None:
        """``wildcard_reason``: why this function's ``Resource: *`` grants are needed, when it
        has more than X-Ray's."""
        super().__init__(scope, id)
        self.log_group = logs.LogGroup(
            self,
            "Logs",
            retention=log_retention(log_retention_days),
            removal_policy=removal_policy(retain_logs),
        )
        self.function = lambda_.Function(
            self,
            "Function",
            function_name=function_name,
            runtime=RUNTIME,
            architecture=ARCHITECTURE,
            handler=spec.handler,
            code=function_code(spec),
            layers=[layer],
            memory_size=sizing.memory_mb,
            timeout=Duration.seconds(sizing.timeout_s),
            vpc=vpc,
            vpc_subnets=subnets if vpc is not None else None,
            security_groups=[security_group] if vpc is not None and security_group else None,
            environment=dict(environment),
            log_group=self.log_group,
            tracing=lambda_.Tracing.ACTIVE if tracing else lambda_.Tracing.PASS_THROUGH,
        )
        policies = ["AWSLambdaBasicExecutionRole"]
        policies += ["AWSLambdaVPCAccessExecutionRole"] if vpc is not None else []
        for policy in policies:
            acknowledge(
                self,
                f"AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/{policy}]",
                f"{policy} is the AWS-maintained minimum a VPC Lambda needs to write its logs "
                "and manage its network interfaces; it grants nothing on Engram's data.",
            )
        acknowledge(
            self,
            "AwsSolutions-IAM5[Resource::*]",
            wildcard_reason
            or "Only X-Ray tracing (xray:PutTraceSegments, xray:PutTelemetryRecords) uses "
            "Resource '*': X-Ray has no resource-level permissions. Every data grant is scoped "
            "to a queue, secret or model ARN.",
        )


def pascal(name: str) -> str:
    """``ingest_consumer`` -> ``IngestConsumer``: a function's construct id from its name."""
    return "".join(part.capitalize() for part in name.split("_"))


@dataclass(frozen=True)
class FunctionFactory:
    """Where and how the stage's functions are made: the shared layer, the VPC placement (none
    for the functions in ``outside_vpc``), log retention, tracing and the function names."""

    scope: Construct
    config: StageConfig
    layer: lambda_.ILayerVersion
    vpc: ec2.IVpc
    subnets: ec2.SubnetSelection
    security_group: ec2.ISecurityGroup
    outside_vpc: frozenset[str]

    def make(
        self,
        spec: FunctionSpec,
        sizing: FunctionConfig,
        environment: Mapping[str, str],
        *,
        wildcard_reason: str | None = None,
    ) -> EngramFunction:
        """One function, its construct id the PascalCase of its name (``Ingest``, ...)."""
        inside = spec.name not in self.outside_vpc
        config = self.config
        return EngramFunction(
            self.scope,
            pascal(spec.name),
            spec=spec,
            sizing=sizing,
            layer=self.layer,
            vpc=self.vpc if inside else None,
            subnets=self.subnets if inside else None,
            security_group=self.security_group if inside else None,
            environment=environment,
            log_retention_days=config.log_retention_days,
            retain_logs=config.retain_logs,
            tracing=config.tracing,
            function_name=f"engram-{config.name}-{spec.name.replace('_', '-')}",
            wildcard_reason=wildcard_reason,
        )
