"""The console in AWS: a private bucket behind CloudFront (origin access control), security
headers with a CSP naming only the console's own origin and the hosted UI's, ``/v1/*`` through
the same distribution to the HTTP API uncached, the web client's code flow back to the
distribution, ``config.json`` written at deploy time, and no trace of the dev sign-in."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from infra.config import STAGES
from infra.constructs.console import API_PATH_PATTERN, CONFIG_KEY, SPA_REWRITE
from tests.infrastructure.synth import CONSOLE_FIXTURE, Synthesized
from tests.infrastructure.synth import ref as _ref

from engram.settings import Settings

pytestmark = pytest.mark.infrastructure

CACHING_DISABLED = "4135ea2d-6df8-44a3-9df3-4b5a84be39ad"
ALL_VIEWER_EXCEPT_HOST_HEADER = "b689b0a8-53d0-40ab-baf2-68738e2966ac"
DEV_SIGN_IN_MARKERS = ("/dev/sign-in", "Dev sign-in", "dev-sign-in", "Global admin", "ENGRAM_DEV")
"""Strings of the local dev sign-in (its route, its form, its module), as the console's own
build test names them; none may reach AWS."""
REPO_ROOT = Path(__file__).resolve().parents[2]


def render(value: Any) -> str:
    """A template string value with references written as ``${Id}`` / ``${Id.Attr}``."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Ref" in value:
        return "${" + str(value["Ref"]) + "}"
    if isinstance(value, dict) and "Fn::GetAtt" in value:
        return "${" + ".".join(value["Fn::GetAtt"]) + "}"
    if isinstance(value, dict) and "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return str(separator).join(render(part) for part in parts)
    raise AssertionError(f"cannot render {value!r}")


def one(synthesized: Synthesized, type_: str) -> tuple[str, dict[str, Any]]:
    found = synthesized.resources(type_, "Service")
    assert len(found) == 1, f"{type_}: {sorted(found)}"
    return next(iter(found.items()))


def distribution(synthesized: Synthesized) -> tuple[str, dict[str, Any]]:
    logical_id, resource = one(synthesized, "AWS::CloudFront::Distribution")
    return logical_id, resource["Properties"]["DistributionConfig"]


def hosted_ui(stage: str) -> str:
    return f"https://engram-{stage}-${{AWS::AccountId}}.auth.${{AWS::Region}}.amazoncognito.com"


@pytest.fixture(scope="module", params=["dev", "prod"])
def stage(request: pytest.FixtureRequest, synth_cache: Any) -> Synthesized:
    result: Synthesized = synth_cache(request.param)
    return result


def test_the_bucket_is_private_and_no_website(stage: Synthesized) -> None:
    _, bucket = one(stage, "AWS::S3::Bucket")
    props = bucket["Properties"]
    assert props["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True,
        "BlockPublicPolicy": True,
        "IgnorePublicAcls": True,
        "RestrictPublicBuckets": True,
    }
    assert "WebsiteConfiguration" not in props
    assert props["OwnershipControls"]["Rules"] == [{"ObjectOwnership": "BucketOwnerEnforced"}]
    assert "BucketEncryption" in props


def test_only_the_distribution_reads_the_bucket_through_origin_access_control(
    stage: Synthesized,
) -> None:
    bucket_id, _ = one(stage, "AWS::S3::Bucket")
    distribution_id, config = distribution(stage)
    _, oac = one(stage, "AWS::CloudFront::OriginAccessControl")
    assert oac["Properties"]["OriginAccessControlConfig"] == {
        **oac["Properties"]["OriginAccessControlConfig"],
        "OriginAccessControlOriginType": "s3",
        "SigningBehavior": "always",
        "SigningProtocol": "sigv4",
    }
    s3_origins = [o for o in config["Origins"] if "S3OriginConfig" in o]
    assert len(s3_origins) == 1
    assert s3_origins[0]["S3OriginConfig"] == {"OriginAccessIdentity": ""}
    assert "OriginAccessControlId" in s3_origins[0]
    assert _ref(s3_origins[0]["DomainName"]) == bucket_id

    (policy,) = stage.resources("AWS::S3::BucketPolicy", "Service").values()
    allows = [
        s for s in policy["Properties"]["PolicyDocument"]["Statement"] if s["Effect"] == "Allow"
    ]
    readers = [s for s in allows if "s3:GetObject" in _list(s["Action"])]
    assert len(readers) == 1
    (reader,) = readers
    assert reader["Principal"] == {"Service": "cloudfront.amazonaws.com"}
    source_arn = render(reader["Condition"]["StringEquals"]["AWS:SourceArn"])
    assert source_arn.endswith(f":distribution/${{{distribution_id}}}")
    for statement in allows:  # nobody else, and never anyone
        assert statement["Principal"] not in ("*", {"AWS": "*"})
        assert "s3:GetObject" not in _list(statement["Action"]) or statement is reader


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def security_headers(stage: Synthesized) -> dict[str, Any]:
    _, policy = one(stage, "AWS::CloudFront::ResponseHeadersPolicy")
    config: dict[str, Any] = policy["Properties"]["ResponseHeadersPolicyConfig"]
    return config["SecurityHeadersConfig"]


def test_the_csp_allows_only_the_console_and_the_hosted_ui(stage: Synthesized) -> None:
    csp = render(security_headers(stage)["ContentSecurityPolicy"]["ContentSecurityPolicy"])
    assert "*" not in csp
    assert "unsafe-inline" not in csp
    assert "unsafe-eval" not in csp
    directives = dict(d.strip().split(" ", 1) for d in csp.split(";"))
    assert directives["default-src"] == "'none'"
    assert directives["frame-ancestors"] == "'none'"
    assert directives["connect-src"].split() == ["'self'", hosted_ui(stage.stage)]
    assert directives["script-src"] == "'self'"
    allowed = {"'self'", "'none'", hosted_ui(stage.stage), "data:"}
    for name, sources in directives.items():
        assert set(sources.split()) <= allowed, (name, sources)
        assert "data:" not in sources or name == "img-src", name


def test_the_security_headers_are_set_on_every_response(stage: Synthesized) -> None:
    headers = security_headers(stage)
    assert headers["StrictTransportSecurity"]["AccessControlMaxAgeSec"] >= 31_536_000
    assert headers["FrameOptions"]["FrameOption"] == "DENY"
    assert headers["ContentTypeOptions"] == {"Override": True}
    assert headers["ReferrerPolicy"]["ReferrerPolicy"] == "strict-origin-when-cross-origin"
    _, config = distribution(stage)
    policy_ids = {json.dumps(config["DefaultCacheBehavior"]["ResponseHeadersPolicyId"])}
    policy_ids |= {json.dumps(b["ResponseHeadersPolicyId"]) for b in config["CacheBehaviors"]}
    assert len(policy_ids) == 1  # the pages and the API answers alike


def test_v1_goes_to_the_http_api_uncached_with_every_viewer_header(stage: Synthesized) -> None:
    (api_id,) = stage.resources("AWS::ApiGatewayV2::Api", "Service")
    _, config = distribution(stage)
    (behaviour,) = [b for b in config["CacheBehaviors"] if b["PathPattern"] == API_PATH_PATTERN]
    assert API_PATH_PATTERN == "/v1/*"
    assert behaviour["CachePolicyId"] == CACHING_DISABLED
    # every header but Host: the Authorization header (allowed with caching disabled) too
    assert behaviour["OriginRequestPolicyId"] == ALL_VIEWER_EXCEPT_HOST_HEADER
    assert set(behaviour["AllowedMethods"]) >= {"GET", "POST", "PUT", "PATCH", "DELETE"}
    assert behaviour["ViewerProtocolPolicy"] == "https-only"
    (origin,) = [o for o in config["Origins"] if o["Id"] == behaviour["TargetOriginId"]]
    assert render(origin["DomainName"]) == (
        f"${{{api_id}}}.execute-api.${{AWS::Region}}.${{AWS::URLSuffix}}"
    )
    assert origin["CustomOriginConfig"]["OriginProtocolPolicy"] == "https-only"
    assert origin["CustomOriginConfig"]["OriginSSLProtocols"] == ["TLSv1.2"]
    # the pages: the bucket, cached, read-only, extensionless paths answered by index.html
    default = config["DefaultCacheBehavior"]
    assert default["AllowedMethods"] == ["GET", "HEAD"]
    assert default["ViewerProtocolPolicy"] == "redirect-to-https"
    assert config["DefaultRootObject"] == "index.html"
    (association,) = default["FunctionAssociations"]
    assert association["EventType"] == "viewer-request"
    (function,) = stage.resources("AWS::CloudFront::Function", "Service").values()
    assert function["Properties"]["FunctionCode"] == SPA_REWRITE
    # no distribution-wide error page: an API 403/404 must stay the API's JSON
    assert "CustomErrorResponses" not in config


def web_client(stage: Synthesized) -> tuple[str, dict[str, Any]]:
    clients = stage.resources("AWS::Cognito::UserPoolClient", "Service")
    (logical_id,) = [lid for lid in clients if lid.startswith("UsersWebClient")]
    return logical_id, clients[logical_id]["Properties"]


def test_the_web_client_signs_in_with_the_code_flow_back_to_the_console(
    stage: Synthesized,
) -> None:
    distribution_id, _ = distribution(stage)
    _, client = web_client(stage)
    assert client["AllowedOAuthFlows"] == ["code"]  # no implicit, no client credentials
    assert client["AllowedOAuthFlowsUserPoolClient"] is True
    assert client["GenerateSecret"] is False  # a public client: PKCE, not a secret
    assert set(client["AllowedOAuthScopes"]) == {"openid", "email", "profile"}
    assert client["SupportedIdentityProviders"] == ["COGNITO"]
    origin = f"https://${{{distribution_id}.DomainName}}"
    assert [render(u) for u in client["CallbackURLs"]] == [f"{origin}/callback"]
    assert [render(u) for u in client["LogoutURLs"]] == [f"{origin}/"]


def test_the_id_token_the_console_sends_carries_the_team_and_is_accepted(
    stage: Synthesized,
) -> None:
    """The console sends the ID token: Cognito writes every attribute the client may read into
    it (custom:team among them, set by admins only) and the groups as cognito:groups; its
    audience is the web client, which the JWT authorizer accepts."""
    web_id, client = web_client(stage)
    assert "ReadAttributes" not in client or "custom:team" in client["ReadAttributes"]
    assert "custom:team" not in client.get("WriteAttributes", [])
    assert Settings.model_fields["team_claim"].default == "custom:team"
    (authorizer,) = stage.resources("AWS::ApiGatewayV2::Authorizer", "Service").values()
    audiences = authorizer["Properties"]["JwtConfiguration"]["Audience"]
    assert {"Ref": web_id} in audiences


def test_extra_callback_and_logout_urls_are_stage_values(synth_cache: Any) -> None:
    config = STAGES["dev"].model_copy(
        update={
            "name": "devx",
            "console_callback_urls": ("http://localhost:5173/callback",),
            "console_logout_urls": ("http://localhost:5173/",),
        }
    )
    synthesized: Synthesized = synth_cache(config)
    _, client = web_client(synthesized)
    assert [render(u) for u in client["CallbackURLs"]][1:] == ["http://localhost:5173/callback"]
    assert [render(u) for u in client["LogoutURLs"]][1:] == ["http://localhost:5173/"]


def deployment(stage: Synthesized) -> dict[str, Any]:
    (resource,) = stage.resources("Custom::CDKBucketDeployment", "Service").values()
    props: dict[str, Any] = resource["Properties"]
    return props


def staged(stage: Synthesized, object_key: str) -> Path:
    """The staged folder of the asset uploaded as ``object_key``."""
    return stage.outdir / f"asset.{object_key.removesuffix('.zip')}"


def test_config_json_is_written_next_to_the_assets_at_deploy_time(stage: Synthesized) -> None:
    distribution_id, _ = distribution(stage)
    web_id, _ = web_client(stage)
    props = deployment(stage)
    (bucket_id,) = stage.resources("AWS::S3::Bucket", "Service")
    assert _ref(props["DestinationBucketName"]) == bucket_id
    assert props["Prune"] is True
    assert props["SystemMetadata"] == {"cache-control": "no-cache"}
    assets, config = (staged(stage, key) for key in props["SourceObjectKeys"])
    assert (assets / "index.html").read_text() == (CONSOLE_FIXTURE / "index.html").read_text()
    text = (config / CONFIG_KEY).read_text()
    for marker, value in props["SourceMarkers"][1].items():
        text = text.replace(marker, render(value))
    origin = f"https://${{{distribution_id}.DomainName}}"
    assert json.loads(text) == {
        "apiUrl": "",
        "auth": {
            "mode": "cognito",
            "domain": hosted_ui(stage.stage),
            "clientId": f"${{{web_id}}}",
            "redirectUri": f"{origin}/callback",
            "logoutUri": f"{origin}/",
            "scopes": ["openid", "email", "profile"],
        },
    }


def _texts(folder: Path) -> str:
    return "\n".join(
        path.read_text(errors="replace") for path in sorted(folder.rglob("*")) if path.is_file()
    )


def _aws_builds() -> list[Path]:
    """The console builds to check: the one the tests host and, when the checkout has built
    it, the console's own AWS build."""
    real = REPO_ROOT / "console" / "dist-aws"
    return [CONSOLE_FIXTURE, *([real] if (real / "index.html").is_file() else [])]


@pytest.mark.parametrize("build", _aws_builds(), ids=lambda p: p.parent.name + "/" + p.name)
def test_no_aws_build_holds_the_dev_sign_in(build: Path) -> None:
    text = _texts(build)
    assert "index.html" in {p.name for p in build.iterdir()}
    for marker in DEV_SIGN_IN_MARKERS:
        assert marker not in text, (build, marker)


def test_the_dev_sign_in_is_absent_from_the_templates_and_the_deployed_assets(
    stage: Synthesized,
) -> None:
    for name, template in stage.templates.items():
        text = json.dumps(template)
        for marker in DEV_SIGN_IN_MARKERS:
            assert marker not in text, (name, marker)
    routes = stage.resources("AWS::ApiGatewayV2::Route", "Service").values()
    assert not [r for r in routes if re.search(r"/dev\b", r["Properties"]["RouteKey"])]
    uploaded = "\n".join(
        _texts(staged(stage, key)) for key in deployment(stage)["SourceObjectKeys"]
    )
    for marker in DEV_SIGN_IN_MARKERS:
        assert marker not in uploaded, marker


def test_the_console_is_an_output(stage: Synthesized) -> None:
    outputs = stage.template("Service")["Outputs"]
    distribution_id, _ = distribution(stage)
    assert render(outputs["ConsoleUrl"]["Value"]) == f"https://${{{distribution_id}.DomainName}}"
    assert render(outputs["HostedUiUrl"]["Value"]) == hosted_ui(stage.stage)


def test_a_checkout_without_a_console_synthesises_without_it(
    repo_root: Path, bundle_cache: Path, tmp_path: Path, dev: Synthesized
) -> None:
    from tests.infrastructure.synth import synthesize

    bare = synthesize("dev", repo_root, tmp_path / "cdk.out", cache=bundle_cache, console=None)
    assert not bare.resources("AWS::CloudFront::Distribution")
    assert not bare.resources("AWS::S3::Bucket")
    _, client = web_client(bare)
    assert client["AllowedOAuthFlowsUserPoolClient"] is False
    assert "CallbackURLs" not in client
    # hosting the console adds resources and changes only the web client's sign-in
    hosted = dev.template("Service")["Resources"]
    for logical_id, resource in bare.template("Service")["Resources"].items():
        if not logical_id.startswith(("UsersWebClient", "CDKMetadata")):
            assert hosted[logical_id] == resource, logical_id
