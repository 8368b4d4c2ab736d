"""Identity: the Cognito user pool, its admin groups, the API's resource server and scopes, the
hosted domain and the app clients (end users' web client, the service client, one client per
service team)."""

from __future__ import annotations

import hashlib

from aws_cdk import Aws
from aws_cdk import aws_cognito as cognito

from constructs import Construct
from infra.config import StageConfig
from infra.constructs.common import removal_policy
from infra.constructs.nag import acknowledge

RESOURCE_SERVER_ID = "engram"
SERVICE_SCOPE_NAME = "service"
TEAM_ATTRIBUTE = "team"  # the token claim is custom:team
TEAM_SCOPE_PREFIX = "team."  # engram/team.<team>: a service token's team (engram.api.identity)
ADMIN_GROUP = "engram-admins"
TEAM_ADMIN_GROUP = "engram-team-admins"


class Identity:
    """Who may call the API: users of the pool (web client) and machine clients.

    Like every concern of the service, it builds its resources directly in ``scope`` (the
    stack), so their construct paths, and with them their logical ids, do not depend on how
    the code is grouped."""

    def __init__(
        self, scope: Construct, *, config: StageConfig, console_url: str | None = None
    ) -> None:
        """``console_url``: the console's origin (``https://<distribution domain>``); with
        it, the web client also signs users in through the hosted UI."""
        self.user_pool = _user_pool(scope, config)
        # Groups the API reads from cognito:groups (Settings.admin_group / team_admin_group).
        for group_id, group_name, description in (
            ("AdminsGroup", ADMIN_GROUP, "Engram administrators (review, personas)"),
            ("TeamAdminsGroup", TEAM_ADMIN_GROUP, "Team administrators (team settings)"),
        ):
            cognito.CfnUserPoolGroup(
                scope,
                group_id,
                user_pool_id=self.user_pool.user_pool_id,
                group_name=group_name,
                description=description,
            )
        service_scope = cognito.ResourceServerScope(
            scope_name=SERVICE_SCOPE_NAME,
            scope_description="Machine clients acting for users of their own team",
        )
        # A client-credentials token has no team claim: the API takes the service's team from
        # exactly one scope engram/team.<team> (engram.api.identity), one per configured team.
        team_scopes = {
            team: cognito.ResourceServerScope(
                scope_name=f"{TEAM_SCOPE_PREFIX}{team}",
                scope_description=f"Machine clients of team {team}",
            )
            for team in config.service_teams
        }
        resource_server = self.user_pool.add_resource_server(
            "Api",
            identifier=RESOURCE_SERVER_ID,
            scopes=[service_scope, *team_scopes.values()],
        )
        self.service_scope = f"{RESOURCE_SERVER_ID}/{SERVICE_SCOPE_NAME}"
        self.domain = self.user_pool.add_domain(
            "Domain",
            cognito_domain=cognito.CognitoDomainOptions(domain_prefix=domain_prefix(config)),
        )
        # End users (chat frontends, the console): SRP sign-in and, with a console, the
        # hosted UI's authorization-code flow (PKCE, no client secret, no implicit flow).
        # Nobody but an admin (AdminUpdateUserAttributes) may set custom:team; the client may
        # read every attribute, so the ID token carries custom:team and cognito:groups.
        self.web_client = self.user_pool.add_client(
            "WebClient",
            generate_secret=False,
            auth_flows=cognito.AuthFlow(user_srp=True),
            disable_o_auth=console_url is None,
            o_auth=_console_oauth(config, console_url) if console_url else None,
            supported_identity_providers=(
                [cognito.UserPoolClientIdentityProvider.COGNITO] if console_url else None
            ),
            prevent_user_existence_errors=True,
            write_attributes=cognito.ClientAttributes().with_standard_attributes(
                email=True, fullname=True
            ),
        )
        # Chat backends: client credentials with the service scope. This client's tokens carry
        # no team: they are accepted only once a pre-token-generation trigger (V3, not part
        # of this stack) adds the team claim. Each configured team also gets its own client
        # granted the service scope and exactly one team scope.
        service = cognito.OAuthScope.resource_server(resource_server, service_scope)
        self.service_client = self.user_pool.add_client(
            "ServiceClient",
            generate_secret=True,
            o_auth=cognito.OAuthSettings(
                flows=cognito.OAuthFlows(client_credentials=True), scopes=[service]
            ),
            prevent_user_existence_errors=True,
        )
        self.team_clients: dict[str, cognito.UserPoolClient] = {
            team: self.user_pool.add_client(
                f"ServiceClient{construct_suffix(team)}",
                user_pool_client_name=f"engram-{config.name}-service-{team}",
                generate_secret=True,
                o_auth=cognito.OAuthSettings(
                    flows=cognito.OAuthFlows(client_credentials=True),
                    scopes=[service, cognito.OAuthScope.resource_server(resource_server, scope)],
                ),
                prevent_user_existence_errors=True,
            )
            for team, scope in team_scopes.items()
        }
        self._acknowledge(config)

    @property
    def audiences(self) -> list[str]:
        """The client ids a token accepted by the API may be issued to."""
        return [
            self.web_client.user_pool_client_id,
            self.service_client.user_pool_client_id,
            *(c.user_pool_client_id for c in self.team_clients.values()),
        ]

    @property
    def issuer(self) -> str:
        """The pool's token issuer (what a JWT's ``iss`` says)."""
        return f"https://cognito-idp.{Aws.REGION}.amazonaws.com/{self.user_pool.user_pool_id}"

    def _acknowledge(self, config: StageConfig) -> None:
        # Stage values, not stage names, decide whether these two findings exist at all.
        if config.mfa != "REQUIRED":
            acknowledge(
                self.user_pool,
                "AwsSolutions-COG2",
                "This stage's config makes MFA optional for test users of a non-production "
                "stage; prod requires it.",
            )
        if config.threat_protection != "ENFORCED":
            acknowledge(
                self.user_pool,
                "AwsSolutions-COG3",
                "This stage's config runs Cognito threat protection in audit mode to avoid "
                "blocking automated test sign-ins; prod enforces it.",
            )


def domain_prefix(config: StageConfig) -> str:
    """The hosted domain's prefix (``<prefix>.auth.<region>.amazoncognito.com``)."""
    return config.cognito_domain_prefix or f"engram-{config.name}-{Aws.ACCOUNT_ID}"


def hosted_ui_url(config: StageConfig) -> str:
    """The origin of the stage's hosted UI and OAuth endpoints (``/oauth2/token``, ...)."""
    return f"https://{domain_prefix(config)}.auth.{Aws.REGION}.amazoncognito.com"


CONSOLE_SCOPES = (cognito.OAuthScope.OPENID, cognito.OAuthScope.EMAIL, cognito.OAuthScope.PROFILE)
"""What the console asks for (``infra.constructs.console.SCOPES``); ``openid`` brings the ID
token."""


def _console_oauth(config: StageConfig, console_url: str) -> cognito.OAuthSettings:
    """The hosted UI's code flow, back to the console's ``/callback`` (and its ``/`` after
    sign-out), plus the stage's extra URLs."""
    return cognito.OAuthSettings(
        flows=cognito.OAuthFlows(authorization_code_grant=True, implicit_code_grant=False),
        scopes=list(CONSOLE_SCOPES),
        callback_urls=[f"{console_url}/callback", *config.console_callback_urls],
        logout_urls=[f"{console_url}/", *config.console_logout_urls],
    )


def _user_pool(scope: Construct, config: StageConfig) -> cognito.UserPool:
    return cognito.UserPool(
        scope,
        "Users",
        user_pool_name=f"engram-{config.name}",
        self_sign_up_enabled=False,
        sign_in_aliases=cognito.SignInAliases(email=True),
        auto_verify=cognito.AutoVerifiedAttrs(email=True),
        custom_attributes={
            TEAM_ATTRIBUTE: cognito.StringAttribute(min_len=1, max_len=128, mutable=True)
        },
        password_policy=cognito.PasswordPolicy(
            min_length=14,
            require_digits=True,
            require_lowercase=True,
            require_uppercase=True,
            require_symbols=True,
        ),
        mfa=getattr(cognito.Mfa, config.mfa),
        mfa_second_factor=cognito.MfaSecondFactor(otp=True, sms=False),
        account_recovery=cognito.AccountRecovery.EMAIL_ONLY,
        feature_plan=cognito.FeaturePlan.PLUS,
        standard_threat_protection_mode=(
            cognito.StandardThreatProtectionMode.FULL_FUNCTION
            if config.threat_protection == "ENFORCED"
            else cognito.StandardThreatProtectionMode.AUDIT_ONLY
        ),
        deletion_protection=config.deletion_protection,
        removal_policy=removal_policy(config.retain_data),
    )


def construct_suffix(team: str) -> str:
    """A stable, unique construct/output id part for a team id (``acme-eu`` -> ``TeamAcmeeu``
    plus a short hash, so ``acme-eu`` and ``acmeeu`` never collide)."""
    readable = "".join(ch for ch in team.title() if ch.isalnum())[:40]
    return f"Team{readable}{hashlib.sha256(team.encode()).hexdigest()[:8]}"
