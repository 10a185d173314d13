"""Requests checked as Google's front end checks them, by the discovery document's schemas.

An unknown query parameter, an unknown body field, a value of the wrong JSON type or outside an
enum is answered 400 INVALID_ARGUMENT in the wording Google's API front end uses
("Invalid JSON payload received. Unknown name ..."), so a misspelt field fails the call that sent
it instead of being dropped. Enum values sent as numbers (what the generated REST clients send
with `enum-encoding=int`) are taken by their position in the enum, as protobuf numbers them.
"""

from __future__ import annotations

import re
from typing import Any

from gcpsim.discovery import SYSTEM_QUERY, Api, Method
from gcpsim.errors import ApiError, invalid_argument


def snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def camel_query(method: Method, query: dict[str, list[str]]) -> dict[str, list[str]]:
    """Google's front end binds a query parameter by its JSON name or by its proto field name
    (the Terraform provider sends `repository_id=`): the snake form folded onto the camel one."""
    names = method.query_names()
    out = {}
    for key, value in query.items():
        camel = re.sub(r"_([a-z0-9])", lambda m: m[1].upper(), key)
        out[camel if camel in names and key not in names else key] = value
    return out


def check_query(method: Method, query: dict[str, list[str]]) -> None:
    allowed = method.query_names() | SYSTEM_QUERY | set(method.api.doc.get("parameters", {}))
    for name in query:
        if name not in allowed:
            raise invalid_argument(
                f"Invalid JSON payload received. Unknown name \"{name}\": Cannot bind query "
                f"parameter. Field '{name}' could not be found in request message.")
    for name, spec in method.parameters.items():
        if spec.get("location") == "query" and spec.get("required") and name not in query:
            raise invalid_argument(f"Required parameter '{name}' is missing.")


def check_body(method: Method, body: Any) -> Any:
    """The body with numeric enums turned into their names; raises ApiError where it breaks
    the request schema."""
    if method.request is None:
        if body not in (None, {}):
            raise invalid_argument("Invalid JSON payload received. The request takes no body.")
        return body
    if body is None:
        body = {}
    return _check(method.api, {"$ref": method.request}, body, snake(method.request))


def _check(api: Api, schema: dict[str, Any], value: Any, at: str) -> Any:
    if "$ref" in schema:
        schema = api.schema(schema["$ref"])
    kind = schema.get("type")
    if kind == "any" or value is None:
        return value
    if kind == "object":
        if not isinstance(value, dict):
            raise _type_error(at, value, "object")
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        out = {}
        for key, item in value.items():
            if props and key in props:
                out[key] = _check(api, props[key], item, f"{at}.{snake(key)}")
            elif extra is not None:
                out[key] = _check(api, extra, item, f"{at}[{key!r}]")
            elif props is None and extra is None:
                out[key] = item  # a free-form object (Struct)
            else:
                raise invalid_argument(
                    f"Invalid JSON payload received. Unknown name \"{key}\" at '{at}': Cannot find field.")
        return out
    if kind == "array":
        if not isinstance(value, list):
            raise _type_error(at, value, "array")
        return [_check(api, schema.get("items", {}), item, f"{at}[{i}]") for i, item in enumerate(value)]
    if "enum" in schema:
        return _enum(schema["enum"], value, at)
    if kind == "boolean" and not isinstance(value, bool):
        raise _type_error(at, value, "bool")
    if kind == "integer" and not _is_int(value):
        raise _type_error(at, value, schema.get("format", "int32"))
    if kind == "number" and not isinstance(value, (int, float)):
        raise _type_error(at, value, schema.get("format", "double"))
    if kind == "string" and not isinstance(value, str):
        # int64 fields travel as strings, but a JSON number is taken as well
        if not (schema.get("format") in ("int64", "uint64") and _is_int(value)):
            raise _type_error(at, value, "string")
    return value


def _is_int(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, str) and re.fullmatch(r"-?\d+", value) is not None


def _enum(values: list[str], value: Any, at: str) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < len(values):
        return values[value]
    if isinstance(value, str) and value in values:
        return value
    raise invalid_argument(f"Invalid value at '{at}', {value!r}")


def _type_error(at: str, value: Any, wanted: str) -> ApiError:
    return invalid_argument(f"Invalid value at '{at}' ({wanted}), {value!r}")
