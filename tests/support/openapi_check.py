"""The OpenAPI 3.0 subset drf-spectacular emits, turned into JSON Schema for `jsonschema`
(a dependency of drf-spectacular), and sample values built from it.

Why here and not schemathesis: no new dependencies this stop. The subset is small: `$ref` to
`components/schemas`, `nullable`, `readOnly`/`writeOnly` (dropped), `oneOf`/`allOf`/`anyOf`,
`enum`, `format` (not checked) and the usual type keywords.
"""

from __future__ import annotations

import jsonschema

_REF = "#/components/schemas/"
_OPENAPI_ONLY = {"nullable", "readOnly", "writeOnly", "example", "examples", "discriminator",
                 "xml", "externalDocs", "deprecated"}  # fmt: skip


def to_json_schema(schema, spec: dict, _seen: tuple = ()) -> dict:
    """An OpenAPI schema object with every `$ref` inlined, as Draft 7 JSON Schema."""
    if not isinstance(schema, dict):
        return schema
    if "$ref" in schema:
        name = schema["$ref"].removeprefix(_REF)
        if name in _seen:  # a recursive component: stop checking below it
            return {}
        return to_json_schema(spec["components"]["schemas"][name], spec, (*_seen, name))
    out: dict = {}
    for key, value in schema.items():
        if key in _OPENAPI_ONLY:
            continue
        if key in ("properties", "patternProperties"):
            out[key] = {k: to_json_schema(v, spec, _seen) for k, v in value.items()}
        elif key in ("items", "additionalProperties", "not"):
            out[key] = to_json_schema(value, spec, _seen)
        elif key in ("oneOf", "anyOf", "allOf"):
            out[key] = [to_json_schema(v, spec, _seen) for v in value]
        else:
            out[key] = value
    if schema.get("nullable"):
        if "type" in out:
            out["type"] = [out["type"], "null"]
        if "enum" in out and None not in out["enum"]:
            out["enum"] = [*out["enum"], None]
        if "type" not in out and "enum" not in out:
            out = {"anyOf": [out, {"type": "null"}]}
    return out


def errors(instance, schema: dict, spec: dict) -> list[str]:
    """Where `instance` breaks the OpenAPI `schema` (empty when it conforms)."""
    validator = jsonschema.Draft7Validator(to_json_schema(schema, spec))
    return [
        f"{'/'.join(str(p) for p in e.absolute_path) or '<root>'}: {e.message[:200]}"
        for e in validator.iter_errors(instance)
    ][:5]


def sample(schema, spec: dict, _depth: int = 0):
    """One value the schema accepts: required properties only, the first enum value, the
    minimum of a range. Good enough for a happy-path request; a route may still refuse it."""
    schema = to_json_schema(schema, spec) if _depth == 0 else schema
    if not isinstance(schema, dict) or _depth > 8:
        return None
    if "enum" in schema:
        return next((v for v in schema["enum"] if v is not None), None)
    for key in ("oneOf", "anyOf", "allOf"):
        if schema.get(key):
            if key == "allOf":
                merged: dict = {}
                for part in schema[key]:
                    value = sample(part, spec, _depth + 1)
                    if isinstance(value, dict):
                        merged.update(value)
                return merged
            return sample(schema[key][0], spec, _depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    if kind == "object" or "properties" in schema:
        props = schema.get("properties", {})
        return {k: sample(props[k], spec, _depth + 1) for k in schema.get("required", [])}
    if kind == "array":
        count = schema.get("minItems", 0)
        return [sample(schema.get("items", {}), spec, _depth + 1) for _ in range(count)]
    if kind == "integer":
        return int(schema.get("minimum", 1))
    if kind == "number":
        return float(schema.get("minimum", 1))
    if kind == "boolean":
        return True
    if kind == "string":
        return "x" * max(1, schema.get("minLength", 1))
    return None
