"""What a first deploy (and the retry after a failed one) needs from the templates.

cfn-lint checks every stage against CloudFormation's resource specifications; the other tests
check what cfn-lint cannot know: names that would collide with what an earlier deploy kept,
reserved concurrency, Bedrock where no stage value asks for it, the access log fields, the
maintenance function's asynchronous-invocation settings, the alarms, and the AZs.
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from infra.config import STAGES, StageConfig
from infra.constructs.http_api import ACCESS_LOG_FIELDS
from infra.lint import ACCEPTED, lint, templates_of
from tests.infrastructure.synth import Synthesized
from tests.infrastructure.synth import ref as _ref

pytestmark = pytest.mark.infrastructure

RETAINED = ("Retain", "RetainExceptOnCreate")

# A stage naming its AZs and reserving maintenance concurrency (values no built-in stage sets).
CUSTOM = StageConfig(
    name="custom",
    availability_zones=("eu-west-1b", "eu-west-1c", "eu-west-1a"),
    maintenance_reserved_concurrency=2,
    embedder="bedrock",
    extractor="rules",
)


@pytest.fixture(scope="module")
def custom(synth_cache: Any) -> Synthesized:
    result: Synthesized = synth_cache(CUSTOM)
    return result


def _maintenance(synth: Synthesized) -> tuple[str, dict[str, Any]]:
    for logical_id, fn in synth.resources("AWS::Lambda::Function", "Service").items():
        if fn["Properties"].get("Handler") == "functions.maintenance.handler.handler":
            return logical_id, fn
    raise AssertionError("no maintenance function")


# --- cfn-lint ---------------------------------------------------------------------------------


@pytest.mark.parametrize("stage", sorted(STAGES))
def test_cfn_lint_finds_nothing_but_the_accepted_rules(stage: str, synth_cache: Any) -> None:
    synth: Synthesized = synth_cache(stage)
    findings = lint(templates_of(synth.outdir))
    assert findings == [], "\n".join(map(str, findings))


def test_every_accepted_cfn_lint_rule_says_why() -> None:
    for rule, reason in ACCEPTED.items():
        assert len(reason.split()) >= 8, rule


def test_cfn_lint_reports_a_deprecated_aurora_version(tmp_path: Path) -> None:
    """The check that found Aurora PostgreSQL 16.6 would find it again."""
    template = {
        "Resources": {
            "Cluster": {
                "Type": "AWS::RDS::DBCluster",
                "Properties": {"Engine": "aurora-postgresql", "EngineVersion": "16.6"},
            }
        }
    }
    path = tmp_path / "Probe.template.json"
    path.write_text(json.dumps(template))
    assert "W3690" in {finding.rule for finding in lint([path])}


# --- names of what may be kept ---------------------------------------------------------------

SECRET_NAMES = {"AWS::SecretsManager::Secret": ("Name",)}
"""Unique names that are not the resource's identifier: a secret's identifier is its ARN, but its
name is unique in the account and region while it exists or is scheduled for deletion."""


@cache
def _name_properties(type_: str) -> tuple[str, ...]:
    """The properties that name a resource of ``type_`` uniquely (from cfn-lint's copy of the
    CloudFormation resource schemas: the writable parts of its primary identifier)."""
    from cfnlint.schema import PROVIDER_SCHEMA_MANAGER

    schema = PROVIDER_SCHEMA_MANAGER.get_resource_schema("us-east-1", type_).schema
    read_only = set(schema.get("readOnlyProperties", []))
    own = tuple(
        path.removeprefix("/properties/")
        for path in schema.get("primaryIdentifier", [])
        if path not in read_only
    )
    return own + SECRET_NAMES.get(type_, ())


def _generated(value: Any, resources: dict[str, Any]) -> bool:
    """Whether a name is unique to this instance of the stack: it refers to the stack's id, or
    to a resource of the stack (whose own name is then generated or checked likewise)."""
    if isinstance(value, dict):
        if value.get("Ref") == "AWS::StackId":
            return True
        if "Ref" in value and value["Ref"] in resources:
            return True
        if "Fn::GetAtt" in value and value["Fn::GetAtt"][0] in resources:
            return True
        return any(_generated(v, resources) for v in value.values())
    if isinstance(value, list):
        return any(_generated(v, resources) for v in value)
    return False


@pytest.mark.parametrize("stage", ["prod", "dev"])
def test_no_retained_resource_has_a_fixed_physical_name(stage: str, synth_cache: Any) -> None:
    synth: Synthesized = synth_cache(stage)
    retained = 0
    for stack, template in synth.templates.items():
        resources = template["Resources"]
        for logical_id, resource in resources.items():
            if resource.get("DeletionPolicy") not in RETAINED:
                continue
            retained += 1
            props = resource.get("Properties", {})
            for name in _name_properties(resource["Type"]):
                if name in props:
                    assert _generated(props[name], resources), (stack, logical_id, name)
    if stage == "prod":
        assert retained >= 10  # the data, its credentials and the logs
    else:
        assert retained == 0  # a disposable stage keeps nothing


def test_prod_keeps_its_data_and_logs(prod: Synthesized) -> None:
    for type_ in (
        "AWS::RDS::DBCluster",
        "AWS::RDS::DBSubnetGroup",
        "AWS::ElastiCache::ServerlessCache",
        "AWS::ElastiCache::User",
        "AWS::ElastiCache::UserGroup",
        "AWS::SecretsManager::Secret",
        "AWS::Logs::LogGroup",
    ):
        resources = prod.resources(type_)
        assert resources, type_
        for logical_id, resource in resources.items():
            assert resource["DeletionPolicy"] == "RetainExceptOnCreate", (type_, logical_id)


def test_postgres_log_group_follows_the_generated_cluster_and_precedes_its_instances(
    prod: Synthesized,
) -> None:
    data = prod.template("Data")["Resources"]
    (cluster_id,) = prod.resources("AWS::RDS::DBCluster", "Data")
    assert "DBClusterIdentifier" not in data[cluster_id]["Properties"]
    (log_id,) = (
        k
        for k, r in prod.resources("AWS::Logs::LogGroup", "Data").items()
        if "/aws/rds/cluster/" in json.dumps(r["Properties"].get("LogGroupName"))
    )
    name = data[log_id]["Properties"]["LogGroupName"]
    assert name == {"Fn::Join": ["", ["/aws/rds/cluster/", {"Ref": cluster_id}, "/postgresql"]]}
    for instance_id in prod.resources("AWS::RDS::DBInstance", "Data"):
        assert log_id in data[instance_id].get("DependsOn", []), instance_id


# --- maintenance ------------------------------------------------------------------------------


@pytest.mark.parametrize("stage", sorted(STAGES))
def test_no_reserved_concurrency_by_default(stage: str, synth_cache: Any) -> None:
    synth: Synthesized = synth_cache(stage)
    for logical_id, fn in synth.resources("AWS::Lambda::Function").items():
        assert "ReservedConcurrentExecutions" not in fn["Properties"], logical_id


def test_a_stage_value_reserves_maintenance_concurrency(custom: Synthesized) -> None:
    _, fn = _maintenance(custom)
    assert fn["Properties"]["ReservedConcurrentExecutions"] == 2


def test_maintenance_has_an_event_invoke_config_with_a_failure_queue(prod: Synthesized) -> None:
    maintenance_id, _ = _maintenance(prod)
    configs = prod.resources("AWS::Lambda::EventInvokeConfig", "Service")
    (config,) = [
        c for c in configs.values() if _ref(c["Properties"]["FunctionName"]) == maintenance_id
    ]
    props = config["Properties"]
    assert _ref(props["FunctionName"]) == maintenance_id
    assert props["Qualifier"] == "$LATEST"
    assert props["MaximumRetryAttempts"] == STAGES["prod"].maintenance_retry_attempts
    assert props["MaximumEventAgeInSeconds"] == STAGES["prod"].maintenance_max_event_age_s
    queue = _ref(props["DestinationConfig"]["OnFailure"]["Destination"])
    assert prod.template("Service")["Resources"][queue]["Type"] == "AWS::SQS::Queue"
    # Someone hears about what Lambda gave up on, and can find the queue.
    outputs = prod.template("Service")["Outputs"]
    assert outputs["MaintenanceFailuresQueueName"]["Value"] == {"Fn::GetAtt": [queue, "QueueName"]}
    alarms = prod.resources("AWS::CloudWatch::Alarm", "Monitoring")
    assert [k for k in alarms if k.startswith("MaintenanceFailures")]


# --- Bedrock only where a stage value uses it -------------------------------------------------


def _bedrock_actions(synth: Synthesized) -> list[str]:
    found = []
    for policy in synth.resources("AWS::IAM::Policy").values():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            actions = statement["Action"]
            for action in actions if isinstance(actions, list) else [actions]:
                if action.startswith("bedrock:"):
                    found.append(action)
    return found


def _endpoint_services(synth: Synthesized) -> set[str]:
    return {
        json.dumps(e["Properties"]["ServiceName"])
        for e in synth.resources("AWS::EC2::VPCEndpoint", "Network").values()
    }


def test_dev_has_no_bedrock_endpoint_and_no_bedrock_grant(
    dev: Synthesized, prod: Synthesized
) -> None:
    assert STAGES["dev"].embedder == "none"
    assert STAGES["dev"].extractor == "rules"
    assert not [s for s in _endpoint_services(dev) if "bedrock" in s]
    assert _bedrock_actions(dev) == []
    assert [s for s in _endpoint_services(prod) if "bedrock-runtime" in s]
    assert set(_bedrock_actions(prod)) == {"bedrock:InvokeModel"}


def test_bedrock_grants_name_only_the_models_in_use(custom: Synthesized) -> None:
    """The custom stage embeds with Bedrock but extracts by rules: one model ARN."""
    resources = set()
    for policy in custom.resources("AWS::IAM::Policy").values():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            if statement["Action"] == "bedrock:InvokeModel":
                resources.add(json.dumps(statement["Resource"]))
    assert resources
    assert all(CUSTOM.bedrock_embedding_model_id in r for r in resources)
    assert not any(CUSTOM.bedrock_extraction_model_id in r for r in resources)


# --- API access log -------------------------------------------------------------------------


def test_access_log_records_route_subject_integration_error_and_latency(
    prod: Synthesized,
) -> None:
    (stage,) = prod.resources("AWS::ApiGatewayV2::Stage", "Service").values()
    fields = json.loads(stage["Properties"]["AccessLogSettings"]["Format"])
    assert fields == ACCESS_LOG_FIELDS
    values = set(fields.values())
    for variable in (
        "$context.routeKey",
        "$context.authorizer.claims.sub",
        "$context.integrationErrorMessage",
        "$context.responseLatency",
    ):
        assert variable in values, variable
    # Always "-" on an HTTP API: REST API variables have no place here.
    assert not {"$context.resourcePath", "$context.identity.user"} & values


# --- alarms ---------------------------------------------------------------------------------


def test_alarms_cover_api_aurora_proxy_and_cache_and_report_recovery(prod: Synthesized) -> None:
    alarms = prod.resources("AWS::CloudWatch::Alarm", "Monitoring")
    metrics = {
        (a["Properties"].get("Namespace"), a["Properties"].get("MetricName"))
        for a in alarms.values()
    }
    for expected in (
        ("AWS/ApiGateway", "5xx"),
        ("AWS/ApiGateway", "Latency"),
        ("AWS/RDS", "ACUUtilization"),
        ("AWS/RDS", "DatabaseConnections"),
        ("AWS/RDS", "AvailabilityPercentage"),
        ("AWS/ElastiCache", "ThrottledCmds"),
    ):
        assert expected in metrics, expected
    for logical_id, alarm in alarms.items():
        props = alarm["Properties"]
        assert props["AlarmActions"], logical_id
        assert props["OKActions"] == props["AlarmActions"], logical_id
    (cache_alarm,) = (
        a for a in alarms.values() if a["Properties"].get("MetricName") == "ThrottledCmds"
    )
    (dimension,) = cache_alarm["Properties"]["Dimensions"]
    assert dimension["Name"] == "clusterId"
    assert "Fn::ImportValue" in dimension["Value"]  # the cache's generated name


# --- availability zones ---------------------------------------------------------------------


def _subnet_azs(synth: Synthesized) -> list[Any]:
    return [
        s["Properties"]["AvailabilityZone"]
        for s in synth.resources("AWS::EC2::Subnet", "Network").values()
    ]


def test_the_configured_azs_are_the_subnets_azs(custom: Synthesized) -> None:
    assert sorted(_subnet_azs(custom)) == sorted(CUSTOM.availability_zones)
    # the cache and every function sit in exactly those subnets
    (cache,) = custom.resources("AWS::ElastiCache::ServerlessCache", "Data").values()
    assert len(cache["Properties"]["SubnetIds"]) == len(CUSTOM.availability_zones)


def test_without_configured_azs_the_first_two_of_the_region_are_used(prod: Synthesized) -> None:
    azs = _subnet_azs(prod)
    assert len(azs) == STAGES["prod"].max_azs
    for index, az in enumerate(azs):
        assert az == {"Fn::Select": [index, {"Fn::GetAZs": ""}]}


# --- the cost of a stage at rest (docs/deployment.md) ---------------------------------------

DEPLOYMENT_DOC = Path(__file__).resolve().parents[2] / "docs" / "deployment.md"
HOURS = 730


def _table(text: str, header: str) -> list[list[str]]:
    lines = text[text.index(header) :].splitlines()
    rows = []
    for line in lines[2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def _prices(text: str) -> dict[str, float]:
    prices = {}
    for key, _service, _unit, price in _table(text, "| key | service | unit | price |"):
        keys = re.findall(r"`([a-z0-9-]+)`", key)
        values = [float(v) for v in re.findall(r"[\d.]+", price)]
        prices.update(zip(keys, values, strict=True))
    return prices


def _cost(cell: str) -> float:
    return float(re.findall(r"\d+\.\d\d", cell)[-1])


def _count(cell: str) -> float:
    return float(cell.split("→", maxsplit=1)[0].split("×", maxsplit=1)[0].strip())


def test_the_cost_at_rest_follows_the_templates_and_the_price_table(synth_cache: Any) -> None:
    """The per-stage figures of docs/deployment.md: counts as synthesised, prices from its one
    price table, and the totals add up."""
    text = DEPLOYMENT_DOC.read_text()
    prices = _prices(text)
    rows = {
        row[0].split(" (")[0]: row[1:] for row in _table(text, "| item | dev | staging | prod |")
    }
    for column, stage in enumerate(("dev", "staging", "prod")):
        synth: Synthesized = synth_cache(stage)
        config = STAGES[stage]
        cells = {item: cells[column] for item, cells in rows.items()}
        endpoints = len(synth.resources("AWS::EC2::VPCEndpoint"))
        azs = len(synth.resources("AWS::EC2::Subnet"))
        assert _count(cells["interface endpoints"]) == endpoints
        assert _cost(cells["interface endpoints"]) == round(
            prices["endpoint-hour"] * endpoints * azs * HOURS, 2
        )
        assert not synth.resources("AWS::EC2::NatGateway")
        instances = len(synth.resources("AWS::RDS::DBInstance"))
        assert cells["Aurora at its minimum"].startswith(f"{config.aurora_min_acu:g} × {instances}")
        assert _cost(cells["Aurora at its minimum"]) == round(
            prices["aurora-acu"] * config.aurora_min_acu * instances * HOURS, 2
        )
        assert _cost(cells["RDS Proxy at its minimum"]) == round(
            prices["rds-proxy-acu"] * 8 * HOURS, 2
        )
        assert _cost(cells["ElastiCache Serverless Valkey at its minimum"]) == round(
            prices["valkey-storage"] * 0.1 * HOURS, 2
        )
        for item, type_, key in (
            ("KMS keys", "AWS::KMS::Key", "kms-key"),
            ("secrets", "AWS::SecretsManager::Secret", "secret"),
            ("alarms", "AWS::CloudWatch::Alarm", "alarm"),
        ):
            found = len(synth.resources(type_))
            assert _count(cells[item]) == found, (stage, item)
            assert _cost(cells[item]) == round(prices[key] * found, 2), (stage, item)
        assert len(synth.resources("AWS::CloudWatch::Dashboard")) == 1
        assert _cost(cells["dashboard"]) == prices["dashboard"]
        machine = [
            c
            for c in synth.resources("AWS::Cognito::UserPoolClient").values()
            if c["Properties"].get("AllowedOAuthFlows") == ["client_credentials"]
        ]
        item = "Cognito machine-to-machine clients"
        assert _count(cells[item]) == len(machine)
        assert _cost(cells[item]) == round(prices["cognito-m2m-client"] * len(machine), 2)
        parts = sum(_cost(cell) for name, cell in cells.items() if name != "**total at rest**")
        assert _count(cells["**total at rest**"].strip("*≈ ")) == round(parts)
