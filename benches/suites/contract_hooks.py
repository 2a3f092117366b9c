"""schemathesis hooks for thresher's API (loaded by the contract suite, benches/suites/contract.py, through
SCHEMATHESIS_HOOKS).

- `application/x-ndjson`: the document describes the body as an array of sample objects; on the wire
  each object is one line.
- Positive cases only: JSON Schema cannot say "as many values as indices" or "indices strictly
  increasing" (the document says so in words), so a generated positive sample is brought into that
  shape before it is sent: pairs up to the shorter list, sorted by index, duplicates dropped, and an
  index drawn as an integral float (8758.0, an "integer" to JSON Schema) written as an integer, as the
  reader requires. The same for the pairs of a generated LIBSVM line. Negative cases are sent as
  generated.
- `text/html` (the status page, `GET /`): the document describes it as a string; the text is that
  string, so its schema is checked like any other response.
"""
import json
import re

import schemathesis


@schemathesis.serializer("application/x-ndjson")
def ndjson(ctx, value):
    if isinstance(value, list):
        return "".join(json.dumps(v) + "\n" for v in value).encode()
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    return json.dumps(value).encode() if not isinstance(value, str) else value.encode()


@schemathesis.deserializer("text/html")
def html(ctx, response):
    return response.text


def _fix_object(obj):
    if not isinstance(obj, dict) or "indices" not in obj and "values" not in obj:
        return obj
    if obj.get("indices") is None and obj.get("values") is None:
        return obj
    indices = obj.get("indices") or []
    values = obj.get("values") or []
    if not isinstance(indices, list) or not isinstance(values, list):
        return obj
    # JSON Schema counts 8758.0 as an integer; the reader wants an index written as one (8758).
    indices = [int(i) if isinstance(i, float) else i for i in indices]
    pairs = {}
    for i, v in zip(indices, values):
        pairs.setdefault(i, v)
    keys = sorted(pairs)
    obj = dict(obj)
    obj["indices"] = keys
    obj["values"] = [pairs[k] for k in keys]
    return obj


PAIR = re.compile(r"^\+?[0-9]+:")


def _fix_libsvm(text):
    out = []
    for line in text.split("\n"):
        tokens = line.split(" ")
        head = [t for t in tokens if not PAIR.match(t)]
        pairs = {}
        for t in tokens:
            if PAIR.match(t):
                idx, val = t.split(":", 1)
                pairs.setdefault(int(idx), t)
        out.append(" ".join(head + [pairs[k] for k in sorted(pairs)]))
    return "\n".join(out)


@schemathesis.hook
def before_call(ctx, case, kwargs):
    meta = case.meta
    if meta is None or not meta.generation.mode.is_positive or case.body is None:
        return
    if case.media_type == "text/plain" and isinstance(case.body, str):
        case.body = _fix_libsvm(case.body)
    elif isinstance(case.body, list):
        case.body = [_fix_object(o) for o in case.body]
