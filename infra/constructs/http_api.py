"""HTTP API: API Gateway with a Cognito JWT authorizer, its routes (the service's route table),
JSON access logs, throttling, optional CORS and an optional custom domain."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

import jsii
from aws_cdk import Duration
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_certificatemanager as acm
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk.aws_apigatewayv2_authorizers import HttpJwtAuthorizer
from aws_cdk.aws_apigatewayv2_integrations import HttpLambdaIntegration

from constructs import Construct
from engram.api.identity import SURFACE_HEADER
from engram.api.mcp_routes import MCP_FUNCTION, MCP_ROUTES
from engram.api.models import IDEMPOTENCY_HEADER
from engram.api.routes import CATCH_ALL, CATCH_ALL_FUNCTION
from engram.api.routes import ROUTES as API_ROUTES
from engram.settings import Settings
from infra.config import StageConfig
from infra.constructs.common import log_retention, removal_policy
from infra.constructs.function import pascal
from infra.constructs.identity import Identity
from infra.constructs.nag import acknowledge


@dataclass(frozen=True)
class Route:
    method: apigwv2.HttpMethod
    path: str
    function: str
    authorized: bool = True


ANY = apigwv2.HttpMethod.ANY

# The API Gateway routes are the route table's (engram.api.routes), plus the catch-all: every
# other /v1 path goes to the memories function, which answers it with the API's JSON 404.
ROUTES: tuple[Route, ...] = (
    *(
        Route(apigwv2.HttpMethod(r.method), r.path, r.function, authorized=r.auth)
        for r in API_ROUTES
    ),
    Route(ANY, CATCH_ALL, CATCH_ALL_FUNCTION),
    # the MCP function (engram.api.mcp_routes): POST /mcp, and its public sign-in metadata
    *(
        Route(apigwv2.HttpMethod(key.split(" ")[0]), key.split(" ")[1], MCP_FUNCTION, auth)
        for key, auth in MCP_ROUTES.items()
    ),
)

PUBLIC_ROUTES: dict[str, str] = {
    "--v1--health": "GET /v1/health is deliberately public: load balancers and uptime "
    "checks call it without a token; it returns only store status.",
    "--v1--openapi.json": "GET /v1/openapi.json is deliberately public: it is the API's "
    "published description (docs/openapi.json) and holds no data.",
    "--oauth-protected-resource--mcp": "The MCP endpoint's OAuth protected-resource "
    "metadata (RFC 9728) is public by definition: a client reads it before it has a "
    "token, to find the user pool to sign in with; it holds only the endpoint and issuer.",
}
"""Route construct id suffix -> why that route has no authorizer (cdk-nag APIG4)."""


def cors_allowed_headers() -> list[str]:
    """Request headers a browser may send: the token, the body's type, the ingest
    ``Idempotency-Key`` (retries told from repeats), ``If-Match``, the surface header the
    console names itself with (what its writes' versions record), and the act-as header a
    service token names its user by. The ingest key, the surface and the act-as header are
    read from their one definition in the service, so the preflight cannot drift from what
    the functions read."""
    act_as = Settings.model_fields["act_as_header"].default
    return [
        "authorization",
        "content-type",
        IDEMPOTENCY_HEADER.lower(),
        "if-match",  # edits of a memory only apply to the version read
        SURFACE_HEADER.lower(),
        str(act_as).lower(),
    ]


ACCESS_LOG_FIELDS: dict[str, str] = {
    "requestId": "$context.requestId",
    "requestTime": "$context.requestTime",
    "routeKey": "$context.routeKey",
    "status": "$context.status",
    "protocol": "$context.protocol",
    "ip": "$context.identity.sourceIp",
    "sub": "$context.authorizer.claims.sub",
    "responseLength": "$context.responseLength",
    "responseLatency": "$context.responseLatency",
    "integrationLatency": "$context.integrationLatency",
    "integrationStatus": "$context.integrationStatus",
    "integrationError": "$context.integrationErrorMessage",
    "error": "$context.error.message",
}
"""One JSON line per request. HTTP APIs have no resource path or IAM user: the route key and
the JWT's subject say what was called and by whom."""


class HttpApi:
    """The API, its default stage and routes to ``functions``, built directly in ``scope``."""

    def __init__(
        self,
        scope: Construct,
        *,
        config: StageConfig,
        identity: Identity,
        functions: Mapping[str, lambda_.Function],
    ) -> None:
        self.authorizer = HttpJwtAuthorizer(
            "Jwt", identity.issuer, authorizer_name="cognito", jwt_audience=identity.audiences
        )
        self.api = apigwv2.HttpApi(
            scope,
            "Api",
            api_name=f"engram-{config.name}",
            create_default_stage=False,
            default_authorizer=self.authorizer,
            cors_preflight=_cors(config),
        )
        access_logs = logs.LogGroup(
            scope,
            "ApiAccessLogs",
            retention=log_retention(config.log_retention_days),
            removal_policy=removal_policy(config.retain_logs),
        )
        custom_domain = (
            apigwv2.DomainName(
                scope,
                "ApiDomain",
                domain_name=config.domain_name,
                certificate=acm.Certificate.from_certificate_arn(
                    scope, "ApiCertificate", config.certificate_arn
                ),
            )
            if config.domain_name and config.certificate_arn
            else None
        )
        self.stage = apigwv2.HttpStage(
            scope,
            "DefaultStage",
            http_api=self.api,
            stage_name="$default",
            auto_deploy=True,
            throttle=apigwv2.ThrottleSettings(
                rate_limit=config.api_throttle_rate, burst_limit=config.api_throttle_burst
            ),
            access_log_settings=_AccessLogSettings(access_logs),
            domain_mapping=(
                apigwv2.DomainMappingOptions(domain_name=custom_domain) if custom_domain else None
            ),
        )
        integrations = {
            name: HttpLambdaIntegration(f"{pascal(name)}Integration", fn)
            for name, fn in functions.items()
        }
        # The MCP function calls the API it serves, and names the user pool as the issuer
        # remote MCP clients sign in with (its protected-resource metadata).
        mcp = functions[MCP_FUNCTION]
        mcp.add_environment("ENGRAM_API_URL", self.api.api_endpoint)
        mcp.add_environment("ENGRAM_OAUTH_ISSUER", identity.issuer)  # the authorizer's issuer
        for route in ROUTES:
            self.api.add_routes(
                path=route.path,
                methods=[route.method],
                integration=integrations[route.function],
                authorizer=None if route.authorized else apigwv2.HttpNoneAuthorizer(),
            )
        for child in self.api.node.children:
            for suffix, reason in PUBLIC_ROUTES.items():
                if child.node.id.endswith(suffix):
                    acknowledge(child, "AwsSolutions-APIG4", reason)


def _cors(config: StageConfig) -> apigwv2.CorsPreflightOptions | None:
    """The CORS preflight for the stage's allowed origins; none when it allows none."""
    if not config.cors_allowed_origins:
        return None
    return apigwv2.CorsPreflightOptions(
        allow_origins=list(config.cors_allowed_origins),
        allow_headers=cors_allowed_headers(),
        # a browser reads a memory's version and a 429's wait from these
        expose_headers=["etag", "retry-after"],
        allow_methods=[
            apigwv2.CorsHttpMethod.GET,
            apigwv2.CorsHttpMethod.POST,
            apigwv2.CorsHttpMethod.PUT,
            apigwv2.CorsHttpMethod.PATCH,
            apigwv2.CorsHttpMethod.DELETE,
        ],
        max_age=Duration.hours(1),
    )


@jsii.implements(apigwv2.IAccessLogSettings)
class _AccessLogSettings:
    """HTTP API access logs: JSON, one line per request, to a CloudWatch log group."""

    def __init__(self, log_group: logs.ILogGroup) -> None:
        self._destination = apigwv2.LogGroupLogDestination(log_group)

    @property
    def destination(self) -> apigwv2.IAccessLogDestination:
        return self._destination

    @property
    def format(self) -> apigw.AccessLogFormat:
        return apigw.AccessLogFormat.custom(json.dumps(ACCESS_LOG_FIELDS))
