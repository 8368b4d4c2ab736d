"""Console hosting: the memory console's AWS build served from a private S3 bucket through
CloudFront (origin access control), with security headers, and the HTTP API's ``/v1/*`` behind
the same distribution, so the console calls the API on its own origin (no CORS).

The console reads ``/config.json`` when it starts; the deployment writes it next to the assets
with the values known only at deploy time (the web client's id, the distribution's domain)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from aws_cdk import Aws, Duration, RemovalPolicy, Stack
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_cloudfront as cloudfront
from aws_cdk import aws_cloudfront_origins as origins
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_deployment as s3deploy

from constructs import Construct
from infra.config import StageConfig
from infra.constructs.nag import acknowledge

API_PATH_PATTERN = "/v1/*"
"""The API's paths the distribution sends to the HTTP API instead of the bucket."""
CALLBACK_PATH = "/callback"
"""Where the hosted UI sends the browser back with the authorization code."""
SCOPES: tuple[str, ...] = ("openid", "email", "profile")
"""The OAuth scopes the console asks for: ``openid`` makes Cognito issue the ID token."""
CONFIG_KEY = "config.json"

# Paths whose last segment has no file extension are the single page's own (``/callback``):
# they are answered with index.html. Files (``/assets/app.js``, ``/config.json``) are not.
SPA_REWRITE = """function handler(event) {
  var request = event.request;
  var last = request.uri.split("/").pop();
  if (last.indexOf(".") === -1) {
    request.uri = "/index.html";
  }
  return request;
}
"""


def content_security_policy(hosted_ui: str) -> str:
    """The console's CSP: its own origin (which also serves the API under ``/v1``) and the
    hosted UI's origin (the token endpoint the console calls, the sign-in form it goes to);
    nothing else, no inline script or style, no framing."""
    return "; ".join(
        (
            "default-src 'none'",
            "script-src 'self'",
            "style-src 'self'",
            "img-src 'self' data:",
            "font-src 'self'",
            f"connect-src 'self' {hosted_ui}",
            f"form-action 'self' {hosted_ui}",
            "manifest-src 'self'",
            "base-uri 'none'",
            "frame-ancestors 'none'",
            "object-src 'none'",
        )
    )


def console_config(
    *, hosted_ui: str, client_id: str, url: str, scopes: tuple[str, ...] = SCOPES
) -> dict[str, Any]:
    """The ``config.json`` the console reads: the API on the same origin (``apiUrl`` empty)
    and Cognito's hosted UI with the web client."""
    return {
        "apiUrl": "",
        "auth": {
            "mode": "cognito",
            "domain": hosted_ui,
            "clientId": client_id,
            "redirectUri": f"{url}{CALLBACK_PATH}",
            "logoutUri": f"{url}/",
            "scopes": list(scopes),
        },
    }


class ConsoleHosting(Construct):
    """The bucket, the distribution and its security headers; then :meth:`route_api` adds the
    API behind ``/v1/*`` and :meth:`deploy` uploads the assets and ``config.json``."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        config: StageConfig,
        assets: Path,
        hosted_ui: str,
    ) -> None:
        super().__init__(scope, id)
        if not (assets / "index.html").is_file():
            raise FileNotFoundError(f"console assets: no index.html in {assets}")
        self.assets = assets
        # Nothing in the bucket is data: it is rebuilt from the repository on every deploy.
        self.bucket = s3.Bucket(
            self,
            "Assets",
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            removal_policy=RemovalPolicy.DESTROY,
            auto_delete_objects=True,
        )
        self.headers = cloudfront.ResponseHeadersPolicy(
            self,
            "SecurityHeaders",
            comment=f"Engram {config.name} console: security headers and CSP",
            security_headers_behavior=cloudfront.ResponseSecurityHeadersBehavior(
                content_security_policy=cloudfront.ResponseHeadersContentSecurityPolicy(
                    content_security_policy=content_security_policy(hosted_ui), override=True
                ),
                content_type_options=cloudfront.ResponseHeadersContentTypeOptions(override=True),
                frame_options=cloudfront.ResponseHeadersFrameOptions(
                    frame_option=cloudfront.HeadersFrameOption.DENY, override=True
                ),
                referrer_policy=cloudfront.ResponseHeadersReferrerPolicy(
                    referrer_policy=cloudfront.HeadersReferrerPolicy.STRICT_ORIGIN_WHEN_CROSS_ORIGIN,
                    override=True,
                ),
                strict_transport_security=cloudfront.ResponseHeadersStrictTransportSecurity(
                    access_control_max_age=Duration.days(730),
                    include_subdomains=True,
                    override=True,
                ),
            ),
        )
        rewrite = cloudfront.Function(
            self,
            "SpaRoutes",
            code=cloudfront.FunctionCode.from_inline(SPA_REWRITE),
            runtime=cloudfront.FunctionRuntime.JS_2_0,
            comment="Engram console: extensionless paths (/callback) answer index.html",
        )
        self.distribution = cloudfront.Distribution(
            self,
            "Distribution",
            comment=f"Engram {config.name} console",
            default_root_object="index.html",
            http_version=cloudfront.HttpVersion.HTTP2_AND_3,
            price_class=getattr(cloudfront.PriceClass, config.console_price_class),
            default_behavior=cloudfront.BehaviorOptions(
                origin=origins.S3BucketOrigin.with_origin_access_control(self.bucket),
                viewer_protocol_policy=cloudfront.ViewerProtocolPolicy.REDIRECT_TO_HTTPS,
                allowed_methods=cloudfront.AllowedMethods.ALLOW_GET_HEAD,
                cache_policy=cloudfront.CachePolicy.CACHING_OPTIMIZED,
                response_headers_policy=self.headers,
                function_associations=[
                    cloudfront.FunctionAssociation(
                        function=rewrite, event_type=cloudfront.FunctionEventType.VIEWER_REQUEST
                    )
                ],
            ),
        )
        self.url = f"https://{self.distribution.distribution_domain_name}"
        self._acknowledge()

    def route_api(self, api: apigwv2.IHttpApi) -> None:
        """``/v1/*`` to the HTTP API: never cached, every viewer header (the token included)
        but ``Host`` forwarded, every method allowed."""
        origin = origins.HttpOrigin(
            f"{api.api_id}.execute-api.{Aws.REGION}.{Aws.URL_SUFFIX}",
            protocol_policy=cloudfront.OriginProtocolPolicy.HTTPS_ONLY,
            origin_ssl_protocols=[cloudfront.OriginSslPolicy.TLS_V1_2],
        )
        self.distribution.add_behavior(
            API_PATH_PATTERN,
            origin,
            viewer_protocol_policy=cloudfront.ViewerProtocolPolicy.HTTPS_ONLY,
            allowed_methods=cloudfront.AllowedMethods.ALLOW_ALL,
            cache_policy=cloudfront.CachePolicy.CACHING_DISABLED,
            origin_request_policy=cloudfront.OriginRequestPolicy.ALL_VIEWER_EXCEPT_HOST_HEADER,
            response_headers_policy=self.headers,
        )

    def deploy(self, *, config_json: Mapping[str, Any]) -> s3deploy.BucketDeployment:
        """Upload the assets and ``config.json``, replacing what an earlier deploy left.
        Everything is served ``no-cache``: browsers revalidate, so a deploy shows at once."""
        deployment = s3deploy.BucketDeployment(
            self,
            "Deploy",
            destination_bucket=self.bucket,
            sources=[
                s3deploy.Source.asset(str(self.assets)),
                s3deploy.Source.json_data(CONFIG_KEY, dict(config_json)),
            ],
            cache_control=[s3deploy.CacheControl.no_cache()],
            prune=True,
            memory_limit=256,
        )
        _acknowledge_helpers(Stack.of(self))
        return deployment

    def _acknowledge(self) -> None:
        acknowledge(
            self.bucket,
            "AwsSolutions-S1",
            "The bucket holds only the console's static build, rebuilt from the repository on "
            "every deploy; it is private and read by CloudFront alone, and every API call is "
            "in the HTTP API's access log.",
        )
        distribution = self.distribution
        acknowledge(
            distribution,
            "AwsSolutions-CFR1",
            "The console is for the organisation's users wherever they are; sign-in and every "
            "API call are authorized by Cognito, so no geographic restriction applies.",
        )
        acknowledge(
            distribution,
            "AwsSolutions-CFR2",
            "The distribution serves static files and forwards /v1 to the HTTP API, which "
            "throttles per stage and authorizes every data route with Cognito JWTs; a WAF web "
            "ACL can be attached per stage when needed.",
        )
        acknowledge(
            distribution,
            "AwsSolutions-CFR3",
            "Requests for static files carry no data; every API request through the "
            "distribution is recorded in the HTTP API's JSON access log.",
        )
        acknowledge(
            distribution,
            "AwsSolutions-CFR4",
            "The distribution uses CloudFront's default *.cloudfront.net certificate, whose "
            "minimum viewer TLS version cannot be raised; a stage with its own domain sets one.",
        )


def _acknowledge_helpers(stack: Stack) -> None:
    """The bucket deployment's handler, a function CDK adds to the stack: AWS-maintained code
    granted object actions on the console bucket and the CDK asset bucket only."""
    for child in stack.node.children:
        if child.node.id.startswith("Custom::CDKBucketDeployment"):
            acknowledge(
                child,
                "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
                "AWSLambdaBasicExecutionRole]",
                "CDK's bucket-deployment handler writes only its own logs with this "
                "AWS-maintained policy; it touches no Engram data.",
            )
            acknowledge(
                child,
                "AwsSolutions-L1",
                "The runtime of CDK's bucket-deployment handler is chosen by the CDK release "
                "pinned in uv.lock; upgrading CDK upgrades it.",
            )
            for finding in DEPLOYMENT_WILDCARDS:
                acknowledge(
                    child,
                    f"AwsSolutions-IAM5[{finding}]",
                    "CDK's bucket-deployment handler copies the console build from the CDK "
                    "asset bucket into the console bucket, replacing the previous build; its "
                    "object wildcards are limited to those two buckets.",
                )


DEPLOYMENT_WILDCARDS: tuple[str, ...] = (
    "Action::s3:GetBucket*",
    "Action::s3:GetObject*",
    "Action::s3:List*",
    "Action::s3:Abort*",
    "Action::s3:DeleteObject*",
    "Resource::arn:<AWS::Partition>:s3:::cdk-hnb659fds-assets-<AWS::AccountId>-<AWS::Region>/*",
    "Resource::<ConsoleAssets8400950A.Arn>/*",
)
"""The wildcard grants CDK gives the bucket-deployment handler (cdk-nag IAM5 findings)."""
