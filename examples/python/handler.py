#!/usr/bin/env python3
"""An exec handler for partq, in Python with the standard library only.

    FOLLOWUP_QUEUE=squares partq worker numbers --handler exec:'python3 examples/python/handler.py'

For an item whose payload is JSON like {"n": 5}, it answers the result "25"
(what `partq wait` prints) and, when FOLLOWUP_QUEUE is set, enqueues
{"n": 25} into that queue, keyed like the item. partq applies both in the
transaction that acknowledges the item, so they happen exactly once.
A payload that is not such JSON can never succeed: it is dead-lettered at
once (dead: true) instead of being retried.

The protocol (docs/handler-protocol.md): partq writes one JSON request per
line to stdin, one line per batch of items, and reads one JSON reply per
line from stdout. So stdout carries replies only: log to stderr, which
partq copies into its own log as `exec[pid N]: ...`. Exit when stdin ends.
"""
import base64
import json
import os
import sys

FOLLOWUP_QUEUE = os.environ.get("FOLLOWUP_QUEUE", "")


def log(*args):
    print("handler.py:", *args, file=sys.stderr, flush=True)


def payload_bytes(item):
    if item["payload_encoding"] == "base64":
        return base64.b64decode(item["payload"])
    return item["payload"].encode("utf-8")


def handle(item):
    """The reply for one item: {"id", "ok": True, ...} or {"id", "ok": False, "error"}."""
    try:
        n = json.loads(payload_bytes(item))["n"]
        if not isinstance(n, int):
            raise ValueError("n must be an integer")
    except (ValueError, KeyError, TypeError) as e:
        # Retrying cannot fix the payload: give up now.
        return {"id": item["id"], "ok": False, "error": f"bad payload: {e}", "dead": True}
    square = n * n
    log(f"item {item['id']} (attempt {item['attempt']}): {n}^2 = {square}")
    reply = {"id": item["id"], "ok": True, "result": str(square)}
    if FOLLOWUP_QUEUE:
        reply["enqueue"] = [{"queue": FOLLOWUP_QUEUE, "payload": json.dumps({"n": square}),
                             "key": item["key"]}]
    return reply


def main():
    log(f"ready (pid {os.getpid()}, follow-ups to {FOLLOWUP_QUEUE or 'nowhere'})")
    for line in sys.stdin:  # one request per line; the loop ends when partq closes stdin
        request = json.loads(line)
        if request["version"] != 1:
            log(f"unsupported protocol version {request['version']}")
            sys.exit(1)
        results = [handle(item) for item in request["items"]]
        reply = {"version": 1, "batch": request["batch"], "results": results}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()
    log("stdin closed, exiting")


if __name__ == "__main__":
    main()
