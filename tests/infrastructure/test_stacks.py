"""Properties of the synthesised templates (prod unless a test says otherwise).

Every fixture synthesis runs cdk-nag AwsSolutions as a CDK validation plugin: it raises on any
unacknowledged finding, so reaching these tests means nag passed.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk import App, Stack
from aws_cdk import aws_sqs as sqs
from infra.config import LAMBDA_FUNCTIONS, STAGES
from infra.constructs.http_api import ROUTES, cors_allowed_headers
from infra.constructs.nag import acknowledge, enable_aws_solutions
from tests.infrastructure.synth import Synthesized
from tests.infrastructure.synth import ref as _ref

from engram.api.identity import SURFACE_HEADER
from engram.api.mcp_routes import MCP_FUNCTION, MCP_PUBLIC_ROUTES, MCP_ROUTES
from engram.api.models import IDEMPOTENCY_HEADER
from engram.api.routes import CATCH_ALL, CATCH_ALL_FUNCTION, PUBLIC_ROUTES
from engram.api.routes import ROUTES as API_ROUTES
from engram.settings import Settings

pytestmark = pytest.mark.infrastructure

HEALTH = "GET /v1/health"
#: every route of the route table, plus the catch-all to the memories function
SPEC_ROUTES = (
    {r.route_key: r.function for r in API_ROUTES}
    | {f"ANY {CATCH_ALL}": CATCH_ALL_FUNCTION}
    | dict.fromkeys(MCP_ROUTES, MCP_FUNCTION)
)


# --- helpers --------------------------------------------------------------------------------


def _resolve(synth: Synthesized, value: Any) -> tuple[str, str]:
    """(stack, logical id) of a Ref / GetAtt, following Fn::ImportValue to the exporting stack."""
    if isinstance(value, dict) and "Fn::ImportValue" in value:
        name = value["Fn::ImportValue"]
        for stack, template in synth.templates.items():
            for output in template.get("Outputs", {}).values():
                if output.get("Export", {}).get("Name") == name:
                    return stack, _ref(output["Value"])
        raise AssertionError(f"no export named {name}")
    for stack, template in synth.templates.items():
        if _ref(value) in template["Resources"]:
            return stack, _ref(value)
    raise AssertionError(f"unresolvable {value!r}")


def _resource(synth: Synthesized, stack: str, logical_id: str) -> dict[str, Any]:
    resource: dict[str, Any] = synth.templates[stack]["Resources"][logical_id]
    return resource


def _engram_functions(synth: Synthesized) -> dict[str, dict[str, Any]]:
    """Our functions (they carry the ENGRAM_* environment), keyed by logical id."""
    return {
        logical_id: fn
        for logical_id, fn in synth.resources("AWS::Lambda::Function").items()
        if "ENGRAM_STAGE" in fn["Properties"].get("Environment", {}).get("Variables", {})
    }


def _function_named(synth: Synthesized, name: str) -> str:
    for logical_id, fn in _engram_functions(synth).items():
        if fn["Properties"]["Handler"] == f"functions.{name}.handler.handler":
            return logical_id
    raise AssertionError(f"no function {name}")


def _statements(synth: Synthesized) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for template in synth.templates.values():
        for resource in template["Resources"].values():
            props = resource.get("Properties", {})
            if resource["Type"] in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
                found += props["PolicyDocument"]["Statement"]
            if resource["Type"] == "AWS::IAM::Role":
                for policy in props.get("Policies", []):
                    found += policy["PolicyDocument"]["Statement"]
    return found


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


# --- API ------------------------------------------------------------------------------------


def test_every_route_but_the_public_ones_has_the_jwt_authorizer(prod: Synthesized) -> None:
    authorizers = prod.resources("AWS::ApiGatewayV2::Authorizer", "Service")
    jwt = {k for k, a in authorizers.items() if a["Properties"]["AuthorizerType"] == "JWT"}
    assert len(jwt) == 1
    (authorizer_id,) = jwt
    config = authorizers[authorizer_id]["Properties"]["JwtConfiguration"]
    issuer = json.dumps(config["Issuer"])
    assert "cognito-idp" in issuer
    assert _ref(json.loads(issuer)["Fn::Join"][1][-1]) in prod.template("Service")["Resources"]
    clients = prod.resources("AWS::Cognito::UserPoolClient", "Service")
    assert {_ref(a) for a in config["Audience"]} == set(clients)

    routes = prod.resources("AWS::ApiGatewayV2::Route", "Service")
    keys = {r["Properties"]["RouteKey"] for r in routes.values()}
    assert keys == set(SPEC_ROUTES)
    assert HEALTH in PUBLIC_ROUTES
    for route in routes.values():
        props = route["Properties"]
        if props["RouteKey"] in PUBLIC_ROUTES | MCP_PUBLIC_ROUTES:
            assert props.get("AuthorizationType", "NONE") == "NONE"
            assert "AuthorizerId" not in props
        else:
            assert props["AuthorizationType"] == "JWT", props["RouteKey"]
            assert _ref(props["AuthorizerId"]) == authorizer_id, props["RouteKey"]


def test_routes_reach_the_function_the_spec_names(prod: Synthesized) -> None:
    routes = prod.resources("AWS::ApiGatewayV2::Route", "Service")
    integrations = prod.resources("AWS::ApiGatewayV2::Integration", "Service")
    expected = SPEC_ROUTES
    assert {f"{r.method.value} {r.path}": r.function for r in ROUTES} == expected
    for route in routes.values():
        key = route["Properties"]["RouteKey"]
        target = route["Properties"]["Target"]["Fn::Join"][1][-1]
        integration = integrations[_ref(target)]["Properties"]
        assert integration["PayloadFormatVersion"] == "2.0"
        assert _ref(integration["IntegrationUri"]) == _function_named(prod, expected[key]), key


def test_api_stage_is_throttled_and_logged(prod: Synthesized) -> None:
    (stage,) = prod.resources("AWS::ApiGatewayV2::Stage", "Service").values()
    props = stage["Properties"]
    assert props["DefaultRouteSettings"]["ThrottlingRateLimit"] == STAGES["prod"].api_throttle_rate
    assert "DestinationArn" in props["AccessLogSettings"]


# --- queues, event sources, schedules --------------------------------------------------------


def test_each_queue_has_its_dlq_and_redrive(prod: Synthesized) -> None:
    queues = prod.resources("AWS::SQS::Queue", "Service")
    dlqs = {
        _ref(q["Properties"]["RedrivePolicy"]["deadLetterTargetArn"])
        for q in queues.values()
        if "RedrivePolicy" in q["Properties"]
    }
    # Lambda's on-failure destinations of asynchronous invocations are dead-letter queues too.
    dlqs |= {
        _ref(c["Properties"]["DestinationConfig"]["OnFailure"]["Destination"])
        for c in prod.resources("AWS::Lambda::EventInvokeConfig", "Service").values()
        if "DestinationConfig" in c["Properties"]  # the events function retries nothing
    }
    working = {k: q for k, q in queues.items() if k not in dlqs}
    assert len(working) >= 2
    for logical_id, queue in working.items():
        redrive = queue["Properties"].get("RedrivePolicy")
        assert redrive, f"{logical_id} has no dead-letter queue"
        assert redrive["maxReceiveCount"] >= 5
        assert _ref(redrive["deadLetterTargetArn"]) in queues
    for dlq in dlqs:
        assert queues[dlq]["Properties"]["MessageRetentionPeriod"] >= 7 * 24 * 3600


def test_visibility_timeout_is_at_least_six_times_the_consumer_timeout(prod: Synthesized) -> None:
    queues = prod.resources("AWS::SQS::Queue", "Service")
    functions = _engram_functions(prod)
    consumers: dict[str, str] = {}
    for mapping in prod.resources("AWS::Lambda::EventSourceMapping").values():
        consumers[_ref(mapping["Properties"]["EventSourceArn"])] = _ref(
            mapping["Properties"]["FunctionName"]
        )
    for logical_id, queue in queues.items():
        if logical_id.startswith("Extraction") and "RedrivePolicy" in queue["Properties"]:
            consumers[logical_id] = _function_named(prod, "maintenance")
    assert len(consumers) == 2
    windows = {
        _ref(m["Properties"]["EventSourceArn"]): m["Properties"].get(
            "MaximumBatchingWindowInSeconds", 0
        )
        for m in prod.resources("AWS::Lambda::EventSourceMapping").values()
    }
    for queue_id, function_id in consumers.items():
        timeout = functions[function_id]["Properties"]["Timeout"]
        window = windows.get(queue_id, 0)
        assert queues[queue_id]["Properties"]["VisibilityTimeout"] >= 6 * timeout + window


def test_the_ingest_queue_takes_the_stages_message_size_and_the_ingest_function_knows_it(
    prod: Synthesized,
) -> None:
    size = STAGES["prod"].ingest_max_message_bytes
    queues = prod.resources("AWS::SQS::Queue", "Service")
    ingest = [q for k, q in queues.items() if k.startswith("IngestQueue")]
    assert len(ingest) == 2  # the queue and its DLQ: a redriven message always fits
    assert {q["Properties"]["MaximumMessageSize"] for q in ingest} == {size}
    for name, fn in ((n, _function_named(prod, n)) for n in LAMBDA_FUNCTIONS):
        env = _engram_functions(prod)[fn]["Properties"]["Environment"]["Variables"]
        expected = str(size) if name == "ingest" else None
        assert env.get("ENGRAM_INGEST_MAX_MESSAGE_BYTES") == expected, name


def test_the_ingest_consumer_is_deployed_before_the_ingest_function(prod: Synthesized) -> None:
    """CloudFormation updates the consumer (and its event source) first, so an old consumer
    never receives a message shape it cannot read."""
    template = prod.template("Service")["Resources"]
    ingest, consumer = _function_named(prod, "ingest"), _function_named(prod, "ingest_consumer")
    depends = set(template[ingest].get("DependsOn", []))
    assert consumer in depends
    mappings = set(prod.resources("AWS::Lambda::EventSourceMapping", "Service"))
    assert mappings
    assert mappings <= depends
    assert ingest not in set(template[consumer].get("DependsOn", []))


def test_event_sources_report_batch_item_failures_with_bounded_concurrency(
    prod: Synthesized,
) -> None:
    mappings = prod.resources("AWS::Lambda::EventSourceMapping")
    assert mappings
    for mapping in mappings.values():
        props = mapping["Properties"]
        assert props["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
        assert 2 <= props["ScalingConfig"]["MaximumConcurrency"] <= 1000
        assert _ref(props["FunctionName"]) == _function_named(prod, "ingest_consumer")


def test_maintenance_may_drain_the_extraction_queue(prod: Synthesized) -> None:
    maintenance = _function_named(prod, "maintenance")
    role = _ref(_engram_functions(prod)[maintenance]["Properties"]["Role"])
    policies = [
        p
        for p in prod.resources("AWS::IAM::Policy", "Service").values()
        if role in {_ref(r) for r in p["Properties"]["Roles"]}
    ]
    extraction = next(
        k
        for k, q in prod.resources("AWS::SQS::Queue", "Service").items()
        if k.startswith("Extraction") and "RedrivePolicy" in q["Properties"]
    )
    granted = {
        action
        for policy in policies
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        if extraction in json.dumps(statement["Resource"])
        for action in _as_list(statement["Action"])
    }
    assert {"sqs:ReceiveMessage", "sqs:DeleteMessage"} <= granted


def _policy_actions_on(synth: Synthesized, function: str, resource: str) -> set[str]:
    role = _ref(_engram_functions(synth)[function]["Properties"]["Role"])
    return {
        action
        for policy in synth.resources("AWS::IAM::Policy", "Service").values()
        if role in {_ref(r) for r in policy["Properties"]["Roles"]}
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        if resource in json.dumps(statement["Resource"])
        for action in _as_list(statement["Action"])
    }


def test_maintenance_dead_letters_to_the_extraction_dlq_one_run_at_a_time(
    prod: Synthesized,
) -> None:
    functions = _engram_functions(prod)
    maintenance = _function_named(prod, "maintenance")
    queues = prod.resources("AWS::SQS::Queue", "Service")
    extraction = next(
        k
        for k, q in queues.items()
        if k.startswith("Extraction") and "RedrivePolicy" in q["Properties"]
    )
    redrive = queues[extraction]["Properties"]["RedrivePolicy"]
    dlq = _ref(redrive["deadLetterTargetArn"])
    variables = functions[maintenance]["Properties"]["Environment"]["Variables"]
    assert _ref(variables["ENGRAM_EXTRACTION_DLQ_URL"]) == dlq
    assert "sqs:SendMessage" in _policy_actions_on(prod, maintenance, dlq)
    # One run at a time by a lease in Redis (engram.maintenance.lease), not by a reservation.
    assert "ReservedConcurrentExecutions" not in functions[maintenance]["Properties"]
    # The job dead-letters itself at extraction_max_receives; SQS must not redrive earlier.
    app_receives = int(variables["ENGRAM_EXTRACTION_MAX_RECEIVES"])
    assert app_receives >= Settings.model_fields["extraction_max_receives"].default
    assert redrive["maxReceiveCount"] >= app_receives
    for logical_id, fn in functions.items():
        if logical_id != maintenance:
            assert "ENGRAM_EXTRACTION_DLQ_URL" not in fn["Properties"]["Environment"]["Variables"]
            assert "sqs:SendMessage" not in _policy_actions_on(prod, logical_id, dlq)


def test_only_the_memories_function_reads_the_review_cursor_key(prod: Synthesized) -> None:
    secrets = prod.resources("AWS::SecretsManager::Secret", "Service")
    (key,) = [k for k in secrets if k.startswith("CursorKey")]
    generated = secrets[key]["Properties"]["GenerateSecretString"]
    assert generated["PasswordLength"] >= 32
    memories = _function_named(prod, "memories")
    for logical_id, fn in _engram_functions(prod).items():
        variables = fn["Properties"]["Environment"]["Variables"]
        reads = "secretsmanager:GetSecretValue" in _policy_actions_on(prod, logical_id, key)
        if logical_id == memories:
            assert _ref(variables["ENGRAM_CURSOR_KEY_SECRET_ARN"]) == key
            assert reads
        else:
            assert "ENGRAM_CURSOR_KEY_SECRET_ARN" not in variables
            assert not reads


def _scope_names(synth: Synthesized) -> set[str]:
    (server,) = synth.resources("AWS::Cognito::UserPoolResourceServer", "Service").values()
    assert server["Properties"]["Identifier"] == "engram"
    return {scope["ScopeName"] for scope in server["Properties"]["Scopes"]}


def _client_scopes(client: dict[str, Any]) -> set[str]:
    """``engram/<scope>`` names of a client's AllowedOAuthScopes (Fn::Join of the server)."""
    found = set()
    for scope in client["Properties"].get("AllowedOAuthScopes", []):
        _, parts = scope["Fn::Join"]
        found.add("engram" + parts[-1])
    return found


def test_service_tokens_get_their_team_from_exactly_one_team_scope(
    dev: Synthesized, prod: Synthesized
) -> None:
    # docs/api.md: a client-credentials token's team is its one scope engram/team.<team>
    assert STAGES["dev"].service_teams == ("dev",)
    assert _scope_names(dev) == {"service", "team.dev"}
    assert _scope_names(prod) == {"service"}  # prod configures no team clients
    clients = dev.resources("AWS::Cognito::UserPoolClient", "Service")
    machine = {
        k: _client_scopes(c)
        for k, c in clients.items()
        if c["Properties"].get("AllowedOAuthFlows") == ["client_credentials"]
    }
    team_clients = [
        k for k, scopes in machine.items() if scopes == {"engram/service", "engram/team.dev"}
    ]
    assert len(team_clients) == 1
    # the generic client has no team scope (its tokens need a pre-token-generation trigger)
    assert sorted(machine.values(), key=len)[0] == {"engram/service"}
    for scopes in machine.values():
        assert len([s for s in scopes if s.startswith("engram/team.")]) <= 1
    (authorizer,) = dev.resources("AWS::ApiGatewayV2::Authorizer", "Service").values()
    audience = {_ref(a) for a in authorizer["Properties"]["JwtConfiguration"]["Audience"]}
    assert set(machine) <= audience
    outputs = dev.template("Service")["Outputs"]
    assert {"Ref": team_clients[0]} in [o["Value"] for o in outputs.values()]


def test_schedules_target_the_maintenance_function(prod: Synthesized) -> None:
    rules = {
        logical_id: r
        for logical_id, r in prod.resources("AWS::Events::Rule").items()
        if "ScheduleExpression" in r["Properties"]
    }
    assert rules
    maintenance = _function_named(prod, "maintenance")
    relay = _function_named(prod, "events")
    for logical_id, rule in rules.items():
        expected = relay if logical_id.startswith("EventsRelay") else maintenance
        for target in rule["Properties"]["Targets"]:
            assert _ref(target["Arn"]) == expected


# --- functions and network ------------------------------------------------------------------


def test_functions_are_arm64_python312_with_the_engram_environment(prod: Synthesized) -> None:
    functions = _engram_functions(prod)
    handlers = {f["Properties"]["Handler"] for f in functions.values()}
    assert {f"functions.{n}.handler.handler" for n in LAMBDA_FUNCTIONS} <= handlers
    for fn in functions.values():
        props = fn["Properties"]
        assert props["Architectures"] == ["arm64"]
        assert props["Runtime"] == "python3.12"
        assert len(props["Layers"]) == 1
        variables = props["Environment"]["Variables"]
        assert variables["ENGRAM_STAGE"] == "prod"
        assert {"POWERTOOLS_SERVICE_NAME", "POWERTOOLS_METRICS_NAMESPACE"} <= set(variables)
    session = functions[_function_named(prod, "session")]["Properties"]["Environment"]
    variables = session["Variables"]
    assert variables["ENGRAM_REDIS_URL"]["Fn::Join"][1][0].startswith("rediss://")
    assert variables["ENGRAM_REDIS_TLS"] == "true"
    assert "ENGRAM_REDIS_SECRET_ARN" in variables  # the password is read at run time
    for key in (
        "ENGRAM_DATABASE_SECRET_ARN",
        "ENGRAM_DATABASE_URL",
        "ENGRAM_INGEST_QUEUE_URL",
        "ENGRAM_EXTRACTION_QUEUE_URL",
        "ENGRAM_TEAM_CLAIM",
        "ENGRAM_GROUPS_CLAIM",
        "ENGRAM_SERVICE_SCOPE",
        "ENGRAM_EMBEDDING_DIMENSIONS",
        "ENGRAM_EMBEDDER",
    ):
        assert key in variables, key
    assert variables["ENGRAM_SERVICE_SCOPE"] == "engram/service"
    assert variables["ENGRAM_TEAM_CLAIM"] == "custom:team"
    groups = {
        g["Properties"]["GroupName"] for g in prod.resources("AWS::Cognito::UserPoolGroup").values()
    }
    assert {variables["ENGRAM_ADMIN_GROUP"], variables["ENGRAM_TEAM_ADMIN_GROUP"]} <= groups
    proxy = prod.resources("AWS::RDS::DBProxy", "Data")
    (proxy_id,) = proxy
    database_url = json.dumps(variables["ENGRAM_DATABASE_URL"])
    assert "postgresql://" in database_url
    assert proxy_id in json.dumps(prod.template("Data")["Outputs"])
    assert "ImportValue" in database_url


def test_lambdas_run_in_isolated_private_subnets_with_the_functions_group(
    prod: Synthesized,
) -> None:
    functions = _engram_functions(prod)
    assert len(functions) == len(LAMBDA_FUNCTIONS) + 2  # + the migration, the cache rotation
    groups: set[tuple[str, str]] = set()
    for fn in functions.values():
        if fn["Properties"]["Handler"] == f"functions.{MCP_FUNCTION}.handler.handler":
            assert "VpcConfig" not in fn["Properties"]  # it calls the public API (see below)
            continue
        vpc = fn["Properties"]["VpcConfig"]
        assert len(vpc["SubnetIds"]) >= 2
        for subnet in vpc["SubnetIds"]:
            stack, logical_id = _resolve(prod, subnet)
            resource = _resource(prod, stack, logical_id)
            assert resource["Type"] == "AWS::EC2::Subnet"
            tags = {t["Key"]: t["Value"] for t in resource["Properties"]["Tags"]}
            assert tags["aws-cdk:subnet-type"] == "Isolated"
            assert resource["Properties"].get("MapPublicIpOnLaunch", False) is False
        groups |= {_resolve(prod, g) for g in vpc["SecurityGroupIds"]}
    assert len(groups) == 1
    # No route leaves the VPC: no internet or NAT gateway, no default route.
    assert not prod.resources("AWS::EC2::InternetGateway")
    assert not prod.resources("AWS::EC2::NatGateway")
    for route in prod.resources("AWS::EC2::Route").values():
        assert route["Properties"].get("DestinationCidrBlock") != "0.0.0.0/0"


def test_functions_outside_the_vpc_touch_no_data(prod: Synthesized) -> None:
    """CDK's own providers (trigger invoker, default-SG restriction) and the MCP function run
    outside the VPC; they must hold no permission on secrets, queues, databases, the cache or
    Bedrock."""
    data_services = ("secretsmanager:", "sqs:", "rds", "elasticache:", "bedrock:")
    outside = 0
    for stack, template in prod.templates.items():
        resources = template["Resources"]
        for fn in resources.values():
            if fn["Type"] != "AWS::Lambda::Function" or "VpcConfig" in fn["Properties"]:
                continue
            outside += 1
            role = _ref(fn["Properties"]["Role"])
            statements: list[dict[str, Any]] = [
                statement
                for policy in resources[role]["Properties"].get("Policies", [])
                for statement in policy["PolicyDocument"]["Statement"]
            ]
            for resource in resources.values():
                props = resource.get("Properties", {})
                if resource["Type"] == "AWS::IAM::Policy" and role in {
                    _ref(r) for r in props["Roles"] if isinstance(r, dict)
                }:
                    statements += props["PolicyDocument"]["Statement"]
            actions = [a for s in statements for a in _as_list(s["Action"])]
            assert not [a for a in actions if a.startswith(data_services)], (stack, role, actions)
    assert outside >= 1


def test_redis_and_the_proxy_are_reached_only_through_security_groups(prod: Synthesized) -> None:
    data = prod.template("Data")["Resources"]
    (cache,) = prod.resources("AWS::ElastiCache::ServerlessCache", "Data").values()
    (proxy,) = prod.resources("AWS::RDS::DBProxy", "Data").values()
    (cluster,) = prod.resources("AWS::RDS::DBCluster", "Data").values()
    cache_sg = {_ref(g) for g in cache["Properties"]["SecurityGroupIds"]}
    proxy_sg = {_ref(g) for g in proxy["Properties"]["VpcSecurityGroupIds"]}
    db_sg = {_ref(g) for g in cluster["Properties"]["VpcSecurityGroupIds"]}
    functions_sg = {
        _resolve(prod, fn["Properties"]["VpcConfig"]["SecurityGroupIds"][0])
        for fn in _engram_functions(prod).values()
        if "VpcConfig" in fn["Properties"]
    }
    assert proxy["Properties"]["RequireTLS"] is True

    for group in cache_sg | proxy_sg | db_sg:
        inline = data[group]["Properties"].get("SecurityGroupIngress", [])
        assert not inline, f"{group} has inline (CIDR) ingress"
    for stack, template in prod.templates.items():
        for resource in template["Resources"].values():
            if resource["Type"] != "AWS::EC2::SecurityGroupIngress":
                continue
            props = resource["Properties"]
            target = _resolve(prod, props["GroupId"])
            assert "CidrIp" not in props, (stack, props)
            assert "CidrIpv6" not in props, (stack, props)
            source = _resolve(prod, props["SourceSecurityGroupId"])
            if target in {("Engram-prod-Data", g) for g in cache_sg | proxy_sg}:
                assert source in functions_sg, (target, source)
            if target in {("Engram-prod-Data", g) for g in db_sg}:
                assert _resource(prod, *source)["Properties"]["GroupDescription"] in (
                    "RDS Proxy",
                    "Database secret rotation function",
                )
    # The functions' group sends nowhere but to security groups (no 0.0.0.0/0 egress).
    ((net_stack, net_sg),) = functions_sg
    functions_group = _resource(prod, net_stack, net_sg)["Properties"]
    for rule in functions_group.get("SecurityGroupEgress", []):
        assert rule.get("CidrIp") == "255.255.255.255/32"  # CDK's "disallow all" placeholder
    for template in prod.templates.values():
        for resource in template["Resources"].values():
            if resource["Type"] == "AWS::EC2::SecurityGroupEgress":
                assert "CidrIp" not in resource["Properties"]


# --- data -----------------------------------------------------------------------------------


DATA_TYPES = (
    "AWS::RDS::DBCluster",
    "AWS::ElastiCache::ServerlessCache",
    "AWS::SecretsManager::Secret",
    "AWS::Cognito::UserPool",
)


def test_data_resources_are_retained_and_protected_in_prod(prod: Synthesized) -> None:
    for type_ in DATA_TYPES:
        resources = prod.resources(type_)
        assert resources, type_
        for logical_id, resource in resources.items():
            # kept on update and delete, removed when the create that made it rolls back
            assert resource["DeletionPolicy"] == "RetainExceptOnCreate", logical_id
            assert resource["UpdateReplacePolicy"] == "Retain", logical_id
    (cluster,) = prod.resources("AWS::RDS::DBCluster").values()
    assert cluster["Properties"]["DeletionProtection"] is True
    assert cluster["Properties"]["StorageEncrypted"] is True
    assert cluster["Properties"]["EngineVersion"].startswith("16.")
    (pool,) = prod.resources("AWS::Cognito::UserPool").values()
    assert pool["Properties"]["DeletionProtection"] == "ACTIVE"
    (cache,) = prod.resources("AWS::ElastiCache::ServerlessCache").values()
    assert cache["Properties"]["Engine"] == "valkey"
    assert cache["Properties"]["UserGroupId"]
    secrets = prod.resources("AWS::SecretsManager::RotationSchedule")
    assert secrets, "the database secret rotates"


def test_dev_differs_from_prod_only_by_config_values(dev: Synthesized, prod: Synthesized) -> None:
    (cluster,) = dev.resources("AWS::RDS::DBCluster").values()
    assert cluster["DeletionPolicy"] == "Delete"
    assert cluster["Properties"]["DeletionProtection"] is False
    # Same stacks, same kinds of resources (prod adds a reader instance).
    assert {k.replace("-prod-", "-") for k in prod.templates} == {
        k.replace("-dev-", "-") for k in dev.templates
    }
    kinds = {r["Type"] for t in prod.templates.values() for r in t["Resources"].values()}
    dev_kinds = {r["Type"] for t in dev.templates.values() for r in t["Resources"].values()}
    assert kinds == dev_kinds


# --- IAM, migration, outputs, nag -------------------------------------------------------------


def test_no_iam_statement_grants_star_on_star(prod: Synthesized, dev: Synthesized) -> None:
    for synth in (prod, dev):
        statements = _statements(synth)
        assert statements
        for statement in statements:
            if statement.get("Effect") != "Allow":
                continue
            actions = _as_list(statement.get("Action", []))
            resources = _as_list(statement.get("Resource", []))
            assert "*" not in actions, statement
            assert not ("*" in resources and any(a.endswith(":*") for a in actions)), statement


def test_migration_runs_on_deploy_before_the_functions_change(prod: Synthesized) -> None:
    service = prod.template("Service")["Resources"]
    (trigger_id,) = (k for k, r in service.items() if r["Type"] == "Custom::Trigger")
    trigger = service[trigger_id]["Properties"]
    assert trigger["ExecuteOnHandlerChange"] is True
    version = service[_ref(trigger["HandlerArn"])]
    migrate = service[_ref(version["Properties"]["FunctionName"])]
    assert migrate["Properties"]["Handler"] == "engram_migrate.handler.handler"
    assert "ENGRAM_DATABASE_SECRET_ARN" in migrate["Properties"]["Environment"]["Variables"]
    for name in LAMBDA_FUNCTIONS:
        assert trigger_id in service[_function_named(prod, name)].get("DependsOn", []), name


def test_outputs_a_client_needs(prod: Synthesized) -> None:
    outputs = prod.template("Service")["Outputs"]
    for name in (
        "ApiUrl",
        "UserPoolId",
        "WebClientId",
        "ServiceClientId",
        "TokenUrl",
        "ServiceScope",
        "IngestQueueName",
        "ExtractionQueueName",
    ):
        assert name in outputs, name


def test_monitoring_alarms_cover_dlqs_errors_throttles_duration_and_degradation(
    prod: Synthesized,
) -> None:
    alarms = prod.resources("AWS::CloudWatch::Alarm", "Monitoring")
    metrics = {
        (a["Properties"].get("Namespace"), a["Properties"].get("MetricName"))
        for a in alarms.values()
    }
    assert ("AWS/SQS", "ApproximateNumberOfMessagesVisible") in metrics
    assert ("AWS/Lambda", "Errors") in metrics
    assert ("AWS/Lambda", "Throttles") in metrics
    assert ("AWS/Lambda", "Duration") in metrics
    assert ("Engram", "ConsolidationDegraded") in metrics
    assert all(a["Properties"]["AlarmActions"] for a in alarms.values())
    p99 = [
        a
        for a in alarms.values()
        if a["Properties"].get("ExtendedStatistic") == "p99"
        and a["Properties"]["Namespace"] == "AWS/Lambda"
    ]
    assert len(p99) == len(LAMBDA_FUNCTIONS)
    assert prod.resources("AWS::CloudWatch::Dashboard", "Monitoring")


@pytest.mark.parametrize("stage", sorted(STAGES))
def test_cdk_nag_passes_and_every_acknowledgment_has_a_reason(stage: str, synth_cache: Any) -> None:
    synth: Synthesized = synth_cache(stage)  # synthesis raised if nag had findings
    ours = [a for a in synth.acknowledgments if "AwsSolutions-" in a[1]]
    assert ours
    for path, rule, reason in ours:
        assert len(reason.split()) >= 6, (path, rule, reason)


def test_cdk_nag_is_enforced_on_synthesis() -> None:
    """The same plugin the app uses fails a synthesis that breaks an AwsSolutions rule."""
    app = App()
    stack = Stack(app, "Bad")
    sqs.Queue(stack, "PlainQueue", enforce_ssl=False)
    enable_aws_solutions(app)
    with pytest.raises(RuntimeError, match=r"Validation failed|ValidationFailed"):
        app.synth()


def test_acknowledgment_without_a_reason_is_refused() -> None:
    with pytest.raises(ValueError, match="reason"):
        acknowledge(Stack(App(), "S"), "AwsSolutions-SQS3", "because")


def test_cors_allows_the_headers_the_service_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    """The preflight's headers are read from the service's own definitions (the act-as
    setting's default, the ingest key header), not written a second time."""
    act_as = Settings.model_fields["act_as_header"]
    assert cors_allowed_headers() == [
        "authorization",
        "content-type",
        IDEMPOTENCY_HEADER.lower(),
        "if-match",
        SURFACE_HEADER.lower(),
        str(act_as.default).lower(),
    ]
    monkeypatch.setattr(act_as, "default", "X-Acting-For")
    assert cors_allowed_headers()[-1] == "x-acting-for"


def test_the_mcp_function_calls_the_api_and_names_the_user_pool(prod: Synthesized) -> None:
    (fn,) = (
        f
        for f in _engram_functions(prod).values()
        if f["Properties"]["Handler"] == f"functions.{MCP_FUNCTION}.handler.handler"
    )
    env = fn["Properties"]["Environment"]["Variables"]
    assert not {k for k in env if k.startswith(("ENGRAM_REDIS", "ENGRAM_DATABASE"))}
    assert not {k for k in env if k.endswith("_QUEUE_URL")}
    resources = prod.template("Service")["Resources"]
    api_url = json.dumps(env["ENGRAM_API_URL"])
    assert any(
        resources[_ref({"Ref": r})]["Type"] == "AWS::ApiGatewayV2::Api"
        for r in resources
        if f'"{r}"' in api_url
    )
    issuer = json.dumps(env["ENGRAM_OAUTH_ISSUER"])
    assert "cognito-idp" in issuer
    pools = prod.resources("AWS::Cognito::UserPool", "Service")
    assert any(f'"{pool}"' in issuer for pool in pools)
    assert fn["Properties"]["Timeout"] < 30  # answers within API Gateway's timeout
