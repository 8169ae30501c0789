"""Checks answers of the live service against docs/openapi.yaml: the status must be documented
for the operation, the media type must be the documented one, and a JSON body must validate
against the documented schema (JSON Schema 2020-12, as OpenAPI 3.1 uses)."""

from __future__ import annotations

import json
from typing import Any, Optional

import httpx
import yaml
from jsonschema import Draft202012Validator

from conftest import OPENAPI_PATH

METHODS = ("get", "put", "post", "delete", "patch", "head", "options")


class Contract:
    """The OpenAPI document and which (method, path, status) answers were checked."""

    def __init__(self) -> None:
        self.doc: dict[str, Any] = yaml.safe_load(OPENAPI_PATH.read_text())
        self.checked: set[tuple[str, str, str]] = set()

    def operations(self) -> set[tuple[str, str]]:
        """Every documented (method, path template)."""
        return {(m, p) for p, item in self.doc["paths"].items() for m in item if m in METHODS}

    def _resolve(self, node: dict[str, Any]) -> dict[str, Any]:
        while "$ref" in node:
            target: Any = self.doc
            for part in node["$ref"].lstrip("#/").split("/"):
                target = target[part.replace("~1", "/").replace("~0", "~")]
            node = target
        return node

    def schema_validator(self, schema: dict[str, Any]) -> Draft202012Validator:
        """A validator of ``schema`` whose ``#/components/...`` references resolve in the document."""
        root = dict(schema)
        root["components"] = self.doc["components"]
        return Draft202012Validator(root)

    def check(self, response: httpx.Response, template: str, *, method: Optional[str] = None) -> Any:
        """Validates one answer; returns its parsed body."""
        method = (method or response.request.method).lower()
        operation = self.doc["paths"][template][method]
        status = str(response.status_code)
        where = f"{method.upper()} {template} -> {status} {response.text[:300]}"
        assert status in operation["responses"], f"undocumented status: {where}"
        documented = self._resolve(operation["responses"][status])
        content = documented.get("content")
        body: Any = None
        if content:
            media = response.headers.get("content-type", "").split(";")[0].strip()
            assert media in content, f"undocumented media type {media!r}: {where}"
            if media == "application/json":
                body = json.loads(response.content)
                errors = sorted(self.schema_validator(content[media]["schema"]).iter_errors(body), key=str)
                assert not errors, f"{where}\n" + "\n".join(f"{list(e.absolute_path)}: {e.message}" for e in errors[:5])
            else:
                body = response.text
        self.checked.add((method, template, status))
        return body
