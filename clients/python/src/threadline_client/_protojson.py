"""Proto3 JSON for the generated messages, both directions side by side.

betterproto2's own `to_dict`/`from_dict` derive JSON names by re-casing the Python field name,
which breaks on a digit followed by a letter: `RunUsage.cache_write_1h_tokens` comes out as
`cacheWrite1HTokens` (protoc says `cacheWrite1hTokens`) in camel case and as
`cache_write_1_h_tokens` in snake case, which its parser then rejects. So this module walks the
messages' field metadata itself and follows the proto3 JSON mapping:

- output uses the original proto field names (as DESIGN's golden vectors do), or protoc's
  `json_name` with `use_proto_names=False`; input accepts either;
- fields at their default value are omitted, except set proto3 `optional` fields, set oneof
  cases and set (even empty) messages;
- 64-bit integers are strings, bytes are standard base64, enums are their full proto names (an
  unknown number stays a number), `Timestamp` is RFC 3339 in UTC, NaN/Infinity are strings;
- unknown fields and enum names are rejected unless `ignore_unknown_fields` is set, and `null`
  means "unset".

The generated `Timestamp` becomes a `datetime`, so sub-microsecond digits do not survive decoding.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import json
import math
import re
from collections.abc import Mapping
from functools import cache
from typing import Any, TypeVar

import betterproto2

__all__ = ("message_from_dict", "message_from_json", "message_to_dict", "message_to_json")

M = TypeVar("M", bound=betterproto2.Message)

_INT64 = frozenset(
    {
        betterproto2.TYPE_INT64,
        betterproto2.TYPE_UINT64,
        betterproto2.TYPE_SINT64,
        betterproto2.TYPE_FIXED64,
        betterproto2.TYPE_SFIXED64,
    }
)
_INT32 = frozenset(
    {
        betterproto2.TYPE_INT32,
        betterproto2.TYPE_UINT32,
        betterproto2.TYPE_SINT32,
        betterproto2.TYPE_FIXED32,
        betterproto2.TYPE_SFIXED32,
    }
)
_FLOATS = frozenset({betterproto2.TYPE_FLOAT, betterproto2.TYPE_DOUBLE})
_DEFAULTS: dict[str, object] = {
    betterproto2.TYPE_STRING: "",
    betterproto2.TYPE_BYTES: b"",
    betterproto2.TYPE_BOOL: False,
    betterproto2.TYPE_FLOAT: 0.0,
    betterproto2.TYPE_DOUBLE: 0.0,
}  # every other scalar (integers, enums) defaults to 0
_RFC3339 = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?([Zz]|[+-]\d{2}:\d{2})$"
)


def json_name(proto_name: str) -> str:
    """protoc's default `json_name`: drop each `_` and upper-case the character after it."""
    out: list[str] = []
    upper_next = False
    for char in proto_name:
        if char == "_":
            upper_next = True
        elif upper_next:
            out.append(char.upper())
            upper_next = False
        else:
            out.append(char)
    return "".join(out)


class _Field:
    __slots__ = ("default", "group", "json_name", "meta", "name", "proto_name", "type")

    def __init__(self, name: str, meta: betterproto2.FieldMetadata, field_type: type) -> None:
        self.name = name
        # betterproto2 appends "_" to names that clash with Python keywords.
        self.proto_name = name.rstrip("_")
        self.json_name = json_name(self.proto_name)
        self.meta = meta
        self.group = meta.group
        self.type = field_type
        self.default = _DEFAULTS.get(meta.proto_type, 0)


@cache
def _fields(cls: type[betterproto2.Message]) -> tuple[tuple[_Field, ...], dict[str, _Field]]:
    # `_betterproto` is betterproto2's per-class metadata; the generated messages expose no other
    # description of their fields (no descriptors were generated).
    info = cls._betterproto  # type: ignore[arg-type]  # classproperty typed for concrete subclasses
    fields = tuple(
        _Field(name, info.meta_by_field_name[name], info.cls_by_field[name])
        for name in info.sorted_field_names
    )
    by_key: dict[str, _Field] = {}
    for f in fields:
        by_key[f.proto_name] = f
        by_key[f.json_name] = f
    return fields, by_key


# --- encoding --------------------------------------------------------------------------------------


def message_to_dict(message: betterproto2.Message, *, use_proto_names: bool = True) -> dict[str, Any]:
    """The proto3 JSON object of a message, as plain Python values (`json.dumps` writes it)."""
    fields, _ = _fields(type(message))
    out: dict[str, Any] = {}
    for f in fields:
        value = getattr(message, f.name)
        key = f.proto_name if use_proto_names else f.json_name
        if f.meta.repeated:
            if value:
                out[key] = [_value_to_json(f, item, use_proto_names) for item in value]
        elif f.meta.proto_type == betterproto2.TYPE_MAP:  # pragma: no cover - the contract has no maps
            raise TypeError(f"map fields are not supported: {type(message).__name__}.{f.name}")
        elif f.meta.optional or f.group is not None or f.meta.proto_type == betterproto2.TYPE_MESSAGE:
            # Presence is explicit: None is unset, anything else is written even at its default.
            if value is not None:
                out[key] = _value_to_json(f, value, use_proto_names)
        elif value != f.default:
            out[key] = _value_to_json(f, value, use_proto_names)
    return out


def _value_to_json(f: _Field, value: Any, use_proto_names: bool) -> Any:
    proto_type = f.meta.proto_type
    if proto_type == betterproto2.TYPE_MESSAGE:
        if isinstance(value, datetime.datetime):
            return _timestamp_to_json(value)
        if not isinstance(value, betterproto2.Message):
            raise TypeError(f"field {f.proto_name}: unsupported wrapped value {type(value).__name__}")
        return message_to_dict(value, use_proto_names=use_proto_names)
    if proto_type == betterproto2.TYPE_ENUM:
        proto_name = getattr(value, "proto_name", None)
        if proto_name:
            return proto_name
        name = getattr(value, "name", "")
        return name if name else int(value)
    if proto_type in _INT64:
        return str(int(value))
    if proto_type in _INT32:
        return int(value)
    if proto_type in _FLOATS:
        number = float(value)
        if math.isnan(number):
            return "NaN"
        if math.isinf(number):
            return "Infinity" if number > 0 else "-Infinity"
        return number
    if proto_type == betterproto2.TYPE_BYTES:
        return base64.b64encode(bytes(value)).decode("ascii")
    return value


def _timestamp_to_json(value: datetime.datetime) -> str:
    if value.tzinfo is None:
        value = value.replace(tzinfo=datetime.UTC)
    value = value.astimezone(datetime.UTC)
    text = f"{value.year:04d}-{value.month:02d}-{value.day:02d}T{value.hour:02d}:{value.minute:02d}:{value.second:02d}"
    micros = value.microsecond
    if micros:
        text += f".{micros // 1000:03d}" if micros % 1000 == 0 else f".{micros:06d}"
    return text + "Z"


def message_to_json(
    message: betterproto2.Message, *, use_proto_names: bool = True, indent: int | None = None
) -> str:
    """The proto3 JSON text of a message (UTF-8 characters kept as they are)."""
    separators = (",", ":") if indent is None else (",", ": ")
    return json.dumps(
        message_to_dict(message, use_proto_names=use_proto_names),
        ensure_ascii=False,
        indent=indent,
        separators=separators,
        allow_nan=False,
    )


# --- decoding --------------------------------------------------------------------------------------


def message_from_dict(cls: type[M], data: Mapping[str, Any], *, ignore_unknown_fields: bool = False) -> M:
    """Build a message from its proto3 JSON object (proto or JSON field names).

    Raises:
        ValueError: The object does not match the message (unknown field, wrong type, a field given
            twice, two cases of one oneof, a value out of range).
    """
    if not isinstance(data, Mapping):
        raise ValueError(f"{cls.__name__}: expected a JSON object, got {type(data).__name__}")
    _, by_key = _fields(cls)
    kwargs: dict[str, Any] = {}
    groups: dict[str, str] = {}
    for key, raw in data.items():
        f = by_key.get(key)
        if f is None:
            if ignore_unknown_fields:
                continue
            raise ValueError(f"{cls.__name__}: unknown field {key!r}")
        if f.name in kwargs:
            raise ValueError(f"{cls.__name__}: field {f.proto_name!r} is given twice")
        if raw is None:
            continue  # null = unset (no field of the contract is a google.protobuf.Value)
        if f.group is not None:
            other = groups.setdefault(f.group, f.proto_name)
            if other != f.proto_name:
                raise ValueError(f"{cls.__name__}: oneof {f.group!r} has both {other!r} and {f.proto_name!r}")
        try:
            if f.meta.repeated:
                if not isinstance(raw, list):
                    raise ValueError("expected a JSON array")
                items = [_value_from_json(f, item, ignore_unknown_fields) for item in raw]
                kwargs[f.name] = [item for item in items if item is not _SKIP]
            else:
                value = _value_from_json(f, raw, ignore_unknown_fields)
                if value is not _SKIP:
                    kwargs[f.name] = value
        except ValueError as exc:
            raise ValueError(f"{cls.__name__}.{f.proto_name}: {exc}") from None
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as exc:  # pydantic's ValidationError is a ValueError
        raise ValueError(f"{cls.__name__}: {exc}") from None


_SKIP = object()  # an unknown enum name under ignore_unknown_fields: leave the field unset


def _value_from_json(f: _Field, raw: Any, ignore_unknown_fields: bool) -> Any:
    proto_type = f.meta.proto_type
    if proto_type == betterproto2.TYPE_MESSAGE:
        if f.meta.unwrap is not None and f.type is datetime.datetime:
            return _timestamp_from_json(raw)
        if f.meta.unwrap is not None:  # pragma: no cover - the contract wraps only Timestamp
            raise ValueError(f"unsupported wrapped type {f.type.__name__}")
        return message_from_dict(f.type, raw, ignore_unknown_fields=ignore_unknown_fields)
    if proto_type == betterproto2.TYPE_ENUM:
        return _enum_from_json(f.type, raw, ignore_unknown_fields)
    if proto_type in _INT64 or proto_type in _INT32:
        return _int_from_json(raw)
    if proto_type in _FLOATS:
        return _float_from_json(raw)
    if proto_type == betterproto2.TYPE_BOOL:
        if not isinstance(raw, bool):
            raise ValueError(f"expected true or false, got {raw!r}")
        return raw
    if proto_type == betterproto2.TYPE_STRING:
        if not isinstance(raw, str):
            raise ValueError(f"expected a string, got {type(raw).__name__}")
        return raw
    if proto_type == betterproto2.TYPE_BYTES:
        return _bytes_from_json(raw)
    raise ValueError(f"unsupported field type {proto_type}")  # pragma: no cover


def _enum_from_json(enum_type: Any, raw: Any, ignore_unknown_fields: bool) -> Any:
    if isinstance(raw, bool):
        raise ValueError(f"expected an enum name or number, got {raw!r}")
    if isinstance(raw, int):
        return enum_type(raw)  # unknown numbers are kept (betterproto2 enums are open)
    if isinstance(raw, str):
        value = enum_type.betterproto_renamed_proto_names_to_value().get(raw)
        if value is not None:
            return enum_type(value)
        if raw in enum_type.__members__:
            return enum_type[raw]
        if ignore_unknown_fields:
            return _SKIP
        raise ValueError(f"unknown {enum_type.__name__} value {raw!r}")
    raise ValueError(f"expected an enum name or number, got {type(raw).__name__}")


def _int_from_json(raw: Any) -> int:
    if isinstance(raw, bool):
        raise ValueError(f"expected an integer, got {raw!r}")
    if isinstance(raw, int):
        return raw
    if isinstance(raw, float):
        if raw.is_integer():
            return int(raw)
        raise ValueError(f"expected an integer, got {raw!r}")
    if isinstance(raw, str):
        text = raw.strip()
        if re.fullmatch(r"-?\d+", text):
            return int(text)
        try:
            number = float(text)
        except ValueError:
            number = math.nan
        if number.is_integer():
            return int(number)
        raise ValueError(f"expected an integer, got {raw!r}")
    raise ValueError(f"expected an integer, got {type(raw).__name__}")


def _float_from_json(raw: Any) -> float:
    if isinstance(raw, bool):
        raise ValueError(f"expected a number, got {raw!r}")
    if isinstance(raw, int | float):
        return float(raw)
    if isinstance(raw, str):
        special = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
        if raw in special:
            return special[raw]
        try:
            return float(raw)
        except ValueError:
            pass
    raise ValueError(f"expected a number, got {raw!r}")


def _bytes_from_json(raw: Any) -> bytes:
    if not isinstance(raw, str):
        raise ValueError(f"expected base64 text, got {type(raw).__name__}")
    text = raw.replace("-", "+").replace("_", "/")  # the parser accepts URL-safe base64 too
    text += "=" * (-len(text) % 4)
    try:
        return base64.b64decode(text, validate=True)
    except binascii.Error as exc:
        raise ValueError(f"invalid base64: {exc}") from None


def _timestamp_from_json(raw: Any) -> datetime.datetime:
    if not isinstance(raw, str):
        raise ValueError(f"expected an RFC 3339 timestamp, got {type(raw).__name__}")
    match = _RFC3339.match(raw)
    if match is None:
        raise ValueError(f"expected an RFC 3339 timestamp, got {raw!r}")
    year, month, day, hour, minute, second, fraction, zone = match.groups()
    micros = int((fraction or "").ljust(6, "0")[:6])
    if zone in ("Z", "z"):
        tz = datetime.UTC
    else:
        sign = 1 if zone[0] == "+" else -1
        tz = datetime.timezone(sign * datetime.timedelta(hours=int(zone[1:3]), minutes=int(zone[4:6])))
    value = datetime.datetime(
        int(year), int(month), int(day), int(hour), int(minute), int(second), micros, tzinfo=tz
    )
    return value.astimezone(datetime.UTC)


def message_from_json(cls: type[M], text: str | bytes, *, ignore_unknown_fields: bool = False) -> M:
    """Parse a message from proto3 JSON text.

    Raises:
        ValueError: The text is not JSON, or does not match the message.
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{cls.__name__}: not JSON: {exc}") from None
    return message_from_dict(cls, data, ignore_unknown_fields=ignore_unknown_fields)
