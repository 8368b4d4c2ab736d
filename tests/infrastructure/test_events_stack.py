"""The domain events in the templates: the stage's bus, its archive, the example rule, the
events function on its schedule with PutEvents on that bus only, the EventBridge interface
endpoint (the VPC has no NAT) and the outbox alarms."""

from __future__ import annotations

import json
from typing import Any

import pytest
from tests.infrastructure.synth import Synthesized
from tests.infrastructure.synth import ref as _ref
from tests.infrastructure.test_stacks import _engram_functions, _function_named

pytestmark = pytest.mark.infrastructure


def _bus(prod: Synthesized) -> tuple[str, dict[str, Any]]:
    (found,) = prod.resources("AWS::Events::EventBus", "Service").items()
    return found


def test_one_custom_bus_per_stage_with_an_archive_of_every_engram_event(
    prod: Synthesized, dev: Synthesized
) -> None:
    bus_id, bus = _bus(prod)
    assert bus["Properties"]["Name"] == "engram-prod"
    assert _bus(dev)[1]["Properties"]["Name"] == "engram-dev"
    (archive,) = prod.resources("AWS::Events::Archive", "Service").values()
    props = archive["Properties"]
    assert _ref(props["SourceArn"]) == bus_id
    assert props["EventPattern"] == {"source": ["engram"]}
    assert props["RetentionDays"] == 30


def test_the_example_rule_sends_proposals_to_a_queue_with_a_dead_letter_queue(
    prod: Synthesized,
) -> None:
    bus_id, _ = _bus(prod)
    rules = [
        r
        for r in prod.resources("AWS::Events::Rule", "Service").values()
        if "EventPattern" in r["Properties"]
    ]
    (rule,) = rules
    props = rule["Properties"]
    assert _ref(props["EventBusName"]) == bus_id
    assert props["EventPattern"] == {
        "source": ["engram"],
        "detail-type": ["memory.proposed"],
        "detail": {"schemaVersion": [1]},
    }
    (target,) = props["Targets"]
    queues = prod.resources("AWS::SQS::Queue", "Service")
    queue = queues[_ref(target["Arn"])]
    assert queue["Properties"]["QueueName"] == "engram-prod-review-notifications"
    assert "RedrivePolicy" in queue["Properties"]
    assert _ref(target["DeadLetterConfig"]["Arn"]) in queues


def test_the_events_function_runs_every_minute_and_may_put_events_on_the_bus_only(
    prod: Synthesized,
) -> None:
    bus_id, _ = _bus(prod)
    relay = _function_named(prod, "events")
    schedules = [
        r
        for r in prod.resources("AWS::Events::Rule", "Service").values()
        if r["Properties"].get("ScheduleExpression") == "rate(1 minute)"
    ]
    (schedule,) = schedules
    assert [_ref(t["Arn"]) for t in schedule["Properties"]["Targets"]] == [relay]
    fn = _engram_functions(prod)[relay]["Properties"]
    variables = fn["Environment"]["Variables"]
    assert _ref(variables["ENGRAM_EVENT_BUS_NAME"]) == bus_id
    assert int(variables["ENGRAM_EVENTS_RELAY_RUN_S"]) + 10 <= fn["Timeout"]
    assert "ENGRAM_DATABASE_SECRET_ARN" in variables
    assert "ENGRAM_REDIS_URL" not in variables  # the relay never touches the cache

    puts = []
    for policy in prod.resources("AWS::IAM::Policy", "Service").values():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            actions = (
                statement["Action"]
                if isinstance(statement["Action"], list)
                else [statement["Action"]]
            )
            if "events:PutEvents" in actions:
                puts.append((policy["Properties"]["Roles"], statement["Resource"]))
    (put,) = puts
    roles, resource = put
    assert _ref(resource) == bus_id
    role = _ref(fn["Role"])
    assert [_ref(r) for r in roles] == [role]
    (invoke_config,) = [
        c
        for c in prod.resources("AWS::Lambda::EventInvokeConfig", "Service").values()
        if _ref(c["Properties"]["FunctionName"]) == relay
    ]
    assert invoke_config["Properties"]["MaximumRetryAttempts"] == 0


def test_the_vpc_reaches_eventbridge_through_an_interface_endpoint(prod: Synthesized) -> None:
    services = [
        json.dumps(e["Properties"]["ServiceName"])
        for e in prod.resources("AWS::EC2::VPCEndpoint", "Network").values()
        if e["Properties"].get("VpcEndpointType") == "Interface"
    ]
    assert any(".events" in s for s in services), services


def test_alarms_watch_the_outbox_age_depth_and_dead_entries(prod: Synthesized) -> None:
    alarms = {
        a["Properties"]["MetricName"]: a["Properties"]
        for a in prod.resources("AWS::CloudWatch::Alarm", "Monitoring").values()
        if a["Properties"].get("Namespace") == "Engram"
    }
    age = alarms["OutboxOldestAgeSeconds"]
    assert (age["Threshold"], age["TreatMissingData"]) == (300, "breaching")
    assert alarms["OutboxDepth"]["Threshold"] == 10_000
    assert alarms["OutboxDeadEntries"]["Threshold"] == 1
    for name in ("OutboxOldestAgeSeconds", "OutboxDepth", "OutboxDeadEntries"):
        assert alarms[name]["Dimensions"] == [{"Name": "service", "Value": "engram"}]
        assert alarms[name]["AlarmActions"]
