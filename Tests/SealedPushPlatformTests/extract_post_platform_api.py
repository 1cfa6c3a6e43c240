#!/usr/bin/env python3
"""Lists the declarations of the toolchain's own module interfaces that are newer than the platforms
Package.swift declares (iOS 18, macOS 15): one `Module.Type`, `Module.Type.property` or
`Module.Type.function(label:label:)` per line.

A name that is also declared, with the same argument labels, at or below those platforms (an
overload that differs only in types, or a back-deployed twin such as UnsafeBufferPointer.span next
to Array.span, which have different containers and so stay apart) is left out: a name alone cannot
tell those overloads apart. Extensions are not declarations of their own: their availability
passes to their members.

The interfaces mark availability that Linux does not enforce. PlatformAvailabilityTests checks the
object code of the modules an iOS extension links against this list.

Usage: extract_post_platform_api.py [SWIFT_LIB_DIR] > post-platform-api.txt
SWIFT_LIB_DIR defaults to the toolchain's usr/lib/swift/linux (found from `swift` on PATH).
"""
import os, re, shutil, sys

MODULES = ["Swift", "_Concurrency", "Synchronization"]
LIMITS = {"iOS": (18, 0), "macOS": (15, 0)}
DECL = re.compile(r"\b(struct|class|enum|protocol|extension|actor|typealias|func|init|var|let|subscript|case|associatedtype)\b\s*([^\s:(<{=]*)")
AVAILABLE = re.compile(r"@available\(([^)]*)\)")
ATTRIBUTE = re.compile(r"^\s*@[A-Za-z_]+(\([^()]*(\([^()]*\)[^()]*)*\))?\s*")

def version(text):
    parts = [int(p) for p in text.split(".")]
    return tuple(parts + [0] * (2 - len(parts)))

def availability(attrs):
    """The (iOS, macOS) introduction versions named by @available attributes, or None each."""
    found = {"iOS": None, "macOS": None}
    for attr in attrs:
        for item in attr.split(","):
            m = re.match(r"\s*(iOS|macOS)\s+([0-9.]+)\s*$", item)
            if m:
                found[m.group(1)] = version(m.group(2))
    return found

def newer(a, b):
    return a if b is None or (a is not None and a > b) else b

def split_params(text):
    """The parameter list of a declaration line: its text between the first '(' and its match."""
    start = text.find("(")
    if start < 0:
        return None
    depth, params, cur = 0, [], ""
    for ch in text[start:]:
        if ch in "([<":
            depth += 1
            if depth == 1:
                continue
        elif ch in ")]>":
            depth -= 1
            if depth == 0:
                params.append(cur)
                break
        if ch == "," and depth == 1:
            params.append(cur)
            cur = ""
            continue
        cur += ch
    return [p.strip() for p in params if p.strip()]

def labels(rest, kind):
    if kind not in ("func", "init", "subscript"):
        return ""
    params = split_params(rest[rest.find(kind):]) or []
    out = []
    for p in params:
        head = p.split(":")[0].split()
        if kind == "subscript":
            out.append(head[0] if len(head) == 2 else "_")
        else:
            out.append(head[0] if head else "_")
    return "(" + "".join(l + ":" for l in out) + ")"

def extract(path, module):
    entries = {}
    stack = []  # (name or None, {"iOS":v, "macOS":v})
    pending = []
    for raw in open(path, encoding="utf-8"):
        line = raw.strip()
        if line.startswith("#") or line.startswith("//") or not line:
            continue
        # Attributes, alone on a line or before a declaration.
        rest = line
        while True:
            m = ATTRIBUTE.match(rest)
            if not m or not rest.startswith("@"):
                break
            a = AVAILABLE.match(m.group(0).strip())
            if a:
                pending.append(a.group(1))
            rest = rest[m.end():]
        outer = {"iOS": None, "macOS": None}
        for _, av in stack:
            outer = {k: newer(outer[k], av[k]) for k in outer}
        opened = rest.count("{") - rest.count("}")
        d = DECL.search(rest) if rest else None
        in_body = bool(stack) and stack[-1][0] is None  # a function or accessor body: locals are not API
        if d and not rest.startswith("}") and not in_body:
            own = availability(pending)
            eff = {k: newer(outer[k], own[k]) for k in outer}
            kind, name = d.group(1), d.group(2)
            if kind == "extension":
                name = name.split(".")[-1]
            container = ".".join(n for n, _ in stack if n)
            if kind == "init":
                name = "init"
            full = ".".join(p for p in [module, container, name] if p) + labels(rest, kind)
            if kind != "extension" and name:
                is_newer = any(eff[k] is not None and eff[k] > LIMITS[k] for k in LIMITS)
                entries[full] = entries.get(full, True) and is_newer
            pending = []
            if opened > 0:
                stack.append((name if kind in ("struct", "class", "enum", "protocol", "extension", "actor") else None, own))
                for _ in range(opened - 1):
                    stack.append((None, {"iOS": None, "macOS": None}))
                continue
        elif rest:
            pending = [] if not rest.startswith("@") else pending
        for _ in range(max(0, opened)):
            stack.append((None, {"iOS": None, "macOS": None}))
        for _ in range(max(0, -opened)):
            if stack:
                stack.pop()
    return {k for k, v in entries.items() if v}

def main():
    if len(sys.argv) > 1:
        lib = sys.argv[1]
    else:
        swift = os.path.realpath(shutil.which("swift"))
        lib = os.path.join(os.path.dirname(os.path.dirname(swift)), "lib", "swift", "linux")
    triple = "x86_64-unknown-linux-gnu"
    out = set()
    for module in MODULES:
        path = os.path.join(lib, module + ".swiftmodule", triple + ".swiftinterface")
        out |= extract(path, module)
    print("# Declarations newer than iOS 18 / macOS 15 in the toolchain's interfaces (" + ", ".join(MODULES) + ").")
    print("# Made by extract_post_platform_api.py; one Module.Container.member per line.")
    for e in sorted(out):
        print(e)

if __name__ == "__main__":
    main()
