"""The base of the v1 HTTP API's response models (``engram.api.models``) and the types of
their fields: times, and the names of the table of observation kinds."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Self

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
)
from pydantic_core import core_schema

from engram.behaviour import kinds
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


@dataclass(frozen=True, slots=True)
class _TableNames:
    """A name of the table of observation kinds in a response: whatever the table holds (a
    fact of a registered kind is listed and exported like any other), documented as the names
    it holds when the document is built (the built-in ones: ``FactCategoryName``,
    ``ObservationTypeName``)."""

    names: Callable[[], Iterable[str]]

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.str_schema()

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> dict[str, Any]:
        return {"enum": list(self.names()), "type": "string"}


#: a fact's category in a response
FactCategoryOut = Annotated[str, _TableNames(lambda: kinds.CATEGORIES)]
#: an observation's kind in a response
ObservationTypeOut = Annotated[str, _TableNames(lambda: kinds.KINDS)]
