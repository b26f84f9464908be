#!/usr/bin/env python3
"""Prints the Markdown values table of a chart from its values.yaml.

A key is documented by the "# -- text" comment block right above it (continued by further
"# " lines). Keys without one are containers: their documented children get rows. The
default shown is the key's value in values.yaml, as JSON.
Usage: values_table.py CHART_DIR
"""
import json
import re
import sys

import yaml

chart = sys.argv[1]
lines = open(f"{chart}/values.yaml", encoding="utf-8").read().splitlines()
values = yaml.safe_load("\n".join(lines)) or {}

rows, stack, doc = [], [], None  # stack: (indent, key)
documented = []
key_re = re.compile(r"^( *)([A-Za-z_][A-Za-z0-9_]*):(.*)$")
for line in lines:
    stripped = line.strip()
    if stripped.startswith("# -- "):
        doc = [stripped[5:]]
        continue
    if stripped.startswith("#"):
        if doc is not None and stripped.startswith("# "):
            doc.append(stripped[2:])
        continue
    m = key_re.match(line)
    if not m:
        doc = None if not stripped.startswith("-") else doc
        continue
    indent = len(m.group(1))
    while stack and stack[-1][0] >= indent:
        stack.pop()
    stack.append((indent, m.group(2)))
    if doc is not None:
        path = [k for _, k in stack]
        documented.append(".".join(path))
        v = values
        for k in path:
            v = v[k]
        default = json.dumps(v, ensure_ascii=False)
        text = " ".join(doc).replace("|", "\\|")
        rows.append(f"| `{'.'.join(path)}` | `{default}` | {text} |".replace("``", "`\"\"`"))
        doc = None

def leaves(v, path=""):
    if isinstance(v, dict) and v:
        for k, x in v.items():
            yield from leaves(x, f"{path}.{k}" if path else k)
    else:
        yield path

missing = [p for p in leaves(values)
           if not any(p == d or p.startswith(d + ".") for d in documented)]
if missing:
    sys.exit("values without a '# --' description: " + ", ".join(missing))

print("| key | default | description |")
print("|---|---|---|")
print("\n".join(rows))
