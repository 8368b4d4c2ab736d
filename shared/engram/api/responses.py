"""The base of the v1 HTTP API's response models (``engram.api.models``) and their time type."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Self

from pydantic import BaseModel, BeforeValidator, ConfigDict

from engram.fields import CAMEL_CASE


class ResponseModel(BaseModel):
    """Base of every response body: built with snake_case names, or read from the
    same-named attributes of a domain object (``model_validate(obj)``); serialised as
    camelCase."""

    model_config = ConfigDict(**CAMEL_CASE, from_attributes=True)

    @classmethod
    def of(cls, source: BaseModel) -> Self:
        """This response from the same-named fields of a domain model, read from its
        ``__dict__`` (``model_validate(source)`` would look each field up by its camelCase
        alias first, and a pydantic model raises on every miss: five times slower)."""
        return cls.model_validate(source.__dict__)


def epoch_ms(value: datetime) -> int:
    return int(value.timestamp() * 1000)


def _epoch_ms_of(value: Any) -> Any:
    return epoch_ms(value) if isinstance(value, datetime) else value


#: Milliseconds since the epoch; a ``datetime`` (how the domain keeps some times) is converted.
EpochMs = Annotated[int, BeforeValidator(_epoch_ms_of)]
