#!/usr/bin/env python3
"""Writes OpenAPIDocument.swift from openapi.json (run by `make openapi`; a test checks they agree).

The OpenAPI document is the source; the server serves it from a Swift string so that the statically
linked binary needs no resource bundle.
"""
import json
import pathlib
import sys

here = pathlib.Path(__file__).resolve().parent
text = (here / "openapi.json").read_text(encoding="ascii")
json.loads(text)  # must be valid JSON
if "\"##" in text:
    sys.exit("openapi.json must not contain the raw-string delimiter")
swift = (
    "// Generated from openapi.json by generate-openapi-swift.py (`make openapi`); do not edit.\n"
    "\n"
    "/// The gateway's OpenAPI 3.1 document, served at `GET /openapi.json`.\n"
    "enum OpenAPIDocument {\n"
    "    /// The document's text, byte for byte as `openapi.json`.\n"
    "    static let json = ##\"\"\"\n"
    + text
    + "\n\"\"\"##\n"  # a multi-line literal drops the line break before its closing delimiter
    "}\n"
)
(here / "OpenAPIDocument.swift").write_text(swift, encoding="ascii")
