#!/usr/bin/env python3
"""Writes API/OpenAPIDocument.swift from API/openapi.json (`make openapi`); `--check` only compares them (CI).

The OpenAPI document is the source; the server serves it from a Swift string so that the statically
linked binary needs no resource bundle.
"""
import json
import pathlib
import sys

api = pathlib.Path(__file__).resolve().parent.parent / "Sources" / "SealedPushGateway" / "API"
text = (api / "openapi.json").read_text(encoding="ascii")
json.loads(text)  # must be valid JSON
if "\"##" in text:
    sys.exit("openapi.json must not contain the raw-string delimiter")
swift = (
    "// GENERATED from API/openapi.json by Apps/Scripts/generate-openapi-swift.py (`make openapi`): do not edit by hand.\n"
    "\n"
    "/// The gateway's OpenAPI 3.1 document, served at `GET /openapi.json`.\n"
    "enum OpenAPIDocument {\n"
    "    /// The document's text, byte for byte as `openapi.json`.\n"
    "    static let json = ##\"\"\"\n"
    + text
    + "\n\"\"\"##\n"  # a multi-line literal drops the line break before its closing delimiter
    "}\n"
)
out = api / "OpenAPIDocument.swift"
if "--check" in sys.argv[1:]:
    # CI: the committed Swift file must be what this script writes from the committed openapi.json.
    if not out.exists() or out.read_text(encoding="ascii") != swift:
        sys.exit(f"{out} is not generated from openapi.json: run `make openapi` and commit both")
    print("OpenAPIDocument.swift agrees with openapi.json")
else:
    out.write_text(swift, encoding="ascii")
