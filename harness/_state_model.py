"""Pydantic plumbing shared by the state models: read-through fields and the hand-assembled dump.

Storage is not access (SPEC §2.0): every value a state hands out must be detached, so the models keep
immutable encoded forms in the fields' `__dict__` slots, and a property installed after pydantic built
the class (`read_through`) turns each read into a fresh value. Validation, `__init__`, `model_copy` and
frozen-assignment errors stay pydantic's own.

`model_dump_json()` with default arguments is hand-assembled by each model's `_json()` (the key order of
SPEC §2.1.2, the stored bytes and canonical texts verbatim); any argument that changes the output goes
through pydantic's serializer, which writes the same keys in the same order but formats floats inside
capability data and environment state the pydantic way (`1e16` rather than `1e+16`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from pydantic import BaseModel, ConfigDict

__all__ = ("StateModel", "read_through")

# `model_dump_json` arguments that leave a state's output unchanged at these values...
_NEUTRAL: dict[str, Any] = {
    "indent": None,
    "ensure_ascii": False,
    "include": None,
    "exclude": None,
    "context": None,
    "exclude_unset": False,
    "exclude_defaults": False,
    "exclude_none": False,
    "exclude_computed_fields": False,
    "round_trip": False,
}
# ...and those that never change it (states have no aliases, no unknown types, no subclass fields).
_HARMLESS = frozenset({"by_alias", "warnings", "fallback", "serialize_as_any", "polymorphic_serialization"})


def read_through(model: type[BaseModel], name: str, read: Callable[[Any], Any]) -> None:
    """Make reads of field `name` return `read(stored)`, a fresh value, after pydantic built `model`.

    Pydantic removes field defaults from the class namespace, so a property set afterwards is the only
    class attribute with that name; as a data descriptor it wins over the instance `__dict__` slot where
    pydantic keeps the stored (encoded) value. Validation and frozen assignment are untouched.
    """
    doc = model.model_fields[name].description

    def get(self: BaseModel) -> Any:
        return read(self.__dict__[name])

    setattr(model, name, property(get, doc=doc))


class StateModel(BaseModel):
    """Shared behaviour: frozen, reads through `read_through`, and a hand-written default JSON dump."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    def _json(self) -> str:
        raise NotImplementedError

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        for name, field in type(self).model_fields.items():
            if field.repr:
                yield name, getattr(self, name)
        if self.__pydantic_extra__:
            yield from self.__pydantic_extra__.items()

    def model_dump_json(self, **kwargs: Any) -> str:
        """The JSON form. With default arguments it is the exact form of SPEC §2.1.2 (stored bytes verbatim).

        Any argument that changes the output goes through pydantic's serializer: same keys and order, but
        floats inside canonical JSON values are formatted by pydantic.
        """
        if not kwargs or all(
            key in _HARMLESS or (key in _NEUTRAL and value == _NEUTRAL[key]) for key, value in kwargs.items()
        ):
            return self._json()
        return super().model_dump_json(**kwargs)
