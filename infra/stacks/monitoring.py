"""Monitoring: alarms to an encrypted SNS topic (which also hears when each alarm is OK again)
and one dashboard (``infra.constructs.alarms``, ``infra.constructs.dashboard``); the stack only
composes them."""

from __future__ import annotations

from typing import Any

from aws_cdk import Stack

from constructs import Construct
from infra.config import StageConfig
from infra.constructs.alarms import Alarms
from infra.constructs.dashboard import Dashboard
from infra.stacks.data import DataStack
from infra.stacks.service import ServiceStack


class MonitoringStack(Stack):
    """Alarms and the dashboard of one stage."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        config: StageConfig,
        service: ServiceStack,
        data: DataStack,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, id, **kwargs)
        queues = {"Ingest": service.ingest, "Extraction": service.extraction}
        alarms = Alarms(
            self,
            config=config,
            queues=queues,
            functions=service.functions,
            cache_rotation=service.cache_rotation_function,
            maintenance_failures=service.maintenance_failures,
            api=service.api,
            cluster=data.cluster,
            proxy=data.proxy,
            cache=data.cache,
        )
        self.topic, self.alarms = alarms.topic, alarms.alarms
        Dashboard(
            self,
            config=config,
            functions=service.functions,
            queues=list(queues.values()),
            alarms=self.alarms,
        )
