#!/usr/bin/env python3
"""Removes the validation and versioning annotations from Envoy's .proto files.

Envoy's API files carry options of protoc-gen-validate (validate.rules), UDPA and xDS
(udpa.annotations, xds.annotations) and Envoy's own (envoy.annotations). They change nothing
on the wire, and generating them would mean vendoring their .proto files too. This removes
their imports, the file and message options that use them, and each such field option
(keeping any other option of the same field, such as deprecated = true).

Usage: strip_annotations.py FILE...   (each rewritten in place)
"""
import re
import sys

ANNOTATION = re.compile(r"\(\s*(validate|udpa\.annotations|xds\.annotations|envoy\.annotations)\.")
IMPORT = re.compile(r'^\s*import\s+"(validate|udpa/annotations|xds/annotations|envoy/annotations)/[^"]*";\s*$', re.M)


def matching(text, start, open_char, close_char):
    """The index just past the bracket that closes the one at `start`, skipping strings."""
    depth = 0
    index = start
    while index < len(text):
        char = text[index]
        if char == '"':
            index = text.index('"', index + 1)
        elif char == open_char:
            depth += 1
        elif char == close_char:
            depth -= 1
            if depth == 0:
                return index + 1
        index += 1
    raise ValueError("unbalanced %s at %d" % (open_char, start))


def split_top_level(text):
    """`text` split at the commas outside braces, brackets and strings."""
    parts, depth, current, index = [], 0, "", 0
    while index < len(text):
        char = text[index]
        if char == '"':
            end = text.index('"', index + 1)
            current += text[index:end + 1]
            index = end + 1
            continue
        if char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
        index += 1
    parts.append(current)
    return parts


def strip(text):
    text = IMPORT.sub("", text)
    out, index = [], 0
    # Statements `option (annotation...) = ...;`, whose value may be a braced literal over lines.
    statement = re.compile(r"\boption\s*\(\s*(validate|udpa\.annotations|xds\.annotations|envoy\.annotations)\.")
    while True:
        found = statement.search(text, index)
        if not found:
            out.append(text[index:])
            break
        out.append(text[index:found.start()])
        cursor = found.end()
        while text[cursor] != ";":
            if text[cursor] == "{":
                cursor = matching(text, cursor, "{", "}")
            elif text[cursor] == '"':
                cursor = text.index('"', cursor + 1) + 1
            else:
                cursor += 1
        index = cursor + 1
    text = "".join(out)
    # Field options `[...]`: the annotations among them dropped, the brackets too when nothing is left.
    out, index = [], 0
    while True:
        start = text.find("[", index)
        if start < 0:
            out.append(text[index:])
            break
        # Only option lists after a field number (`= 3 [`), not `repeated` or map types.
        before = text[index:start].rstrip()
        if not re.search(r"=\s*\d+$", before):
            out.append(text[index:start + 1])
            index = start + 1
            continue
        end = matching(text, start, "[", "]")
        kept = [part.strip() for part in split_top_level(text[start + 1:end - 1]) if not ANNOTATION.match(part.strip())]
        out.append(text[index:start].rstrip())
        if kept:
            out.append(" [" + ", ".join(kept) + "]")
        index = end
    return "".join(out)


for path in sys.argv[1:]:
    with open(path) as handle:
        source = handle.read()
    stripped = strip(source)
    if ANNOTATION.search(stripped):
        sys.exit("%s: an annotation is left after stripping" % path)
    with open(path, "w") as handle:
        handle.write(stripped)
