#!/usr/bin/env python3
"""A handler child for tests/handlers/exec_handler_test.cc (stdlib only).

Speaks the handler protocol (docs/handler-protocol.md) on stdin/stdout, and
misbehaves as asked: by MODE (argv[1]) for the whole process, or by an item's
payload for one batch.

With TEST_CHILD_TRACE=1 in its environment it writes "request: P,P,..." (the
payloads of each request, in order) to stderr as it reads each request; with
TEST_CHILD_TRACE_FILE=PATH, it appends the same line to PATH (which a worker's
rate-limited log of its children's stderr does not cut).

Modes:
  serve            answer each batch (payload rules below)
  partial-hang     read a request, write half a line, then hang
  huge-line        read a request, write a 100 MB line without its end
  unknown-id       answer for an id it was not given
  fewer            answer only the first item of each batch
  garbage          answer with a line that is not JSON
  two-lines        answer each batch twice
  never            read requests and never answer
  chatter          answer, then write another line while idle
  padded N         answer with replies padded with spaces to N bytes (without '\n')
Payload rules (serve):
  crash            exit with status 3 before answering
  misbehave:MODE   misbehave in MODE (one of the modes above) for the batch that
                   holds this item; in mode fewer, leave out this item's result
  fail             answer ok: false, retry_in 7, dead
  dead             answer ok: false, dead
  retry:SECONDS    at attempt 1, answer ok: false, retry_in SECONDS; later, ok
                   with the result "attempt N"
  effects          answer with a result, enqueue and publish effects
  effects:QUEUE    answer ok with the result "done", enqueueing one item into
                   "next" and then one into QUEUE
  log:TEXT         write TEXT to stderr, then answer ok
  anything else    answer ok with the payload's bytes as the result
"""
import base64
import json
import os
import sys
import time


def payload_of(item):
    raw = item["payload"]
    if item["payload_encoding"] == "base64":
        return base64.b64decode(raw)
    return raw.encode("utf-8")


def result_for(item):
    payload = payload_of(item)
    if payload == b"fail":
        return {"id": item["id"], "ok": False, "error": "failed as asked", "retry_in": 7,
                "dead": True}
    if payload == b"dead":
        return {"id": item["id"], "ok": False, "error": "can never succeed", "dead": True}
    if payload.startswith(b"retry:"):
        if item["attempt"] == 1:
            return {"id": item["id"], "ok": False, "error": "not yet",
                    "retry_in": float(payload[6:])}
        return {"id": item["id"], "ok": True, "result": f"attempt {item['attempt']}"}
    if payload == b"effects":
        return {
            "id": item["id"], "ok": True, "result": "done",
            "enqueue": [{"queue": "next", "payload": "AAH/", "payload_encoding": "base64",
                         "key": "k1", "delay": 1.5, "priority": 3}],
            "publish": [{"topic": "events", "key": "k2", "payload": "published",
                         "headers": [{"key": "h", "value": "v"}]}],
        }
    if payload.startswith(b"effects:"):
        return {
            "id": item["id"], "ok": True, "result": "done",
            "enqueue": [{"queue": "next", "payload": "first of " + str(item["id"])},
                        {"queue": payload[8:].decode("utf-8"), "payload": "second"}],
        }
    if payload.startswith(b"log:"):
        print(payload[4:].decode("utf-8"), file=sys.stderr, flush=True)
    return {"id": item["id"], "ok": True, "result": base64.b64encode(payload).decode("ascii"),
            "result_encoding": "base64"}


def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def main():
    process_mode = sys.argv[1] if len(sys.argv) > 1 else "serve"
    for line in sys.stdin:
        request = json.loads(line)
        items = request["items"]
        traced = "request: " + ",".join(payload_of(i).decode("utf-8", "replace") for i in items)
        if os.environ.get("TEST_CHILD_TRACE") == "1":
            print(traced, file=sys.stderr, flush=True)
        if os.environ.get("TEST_CHILD_TRACE_FILE"):
            with open(os.environ["TEST_CHILD_TRACE_FILE"], "a", encoding="utf-8") as f:
                f.write(traced + "\n")
        mode = process_mode
        misbehaving = [i for i in items if payload_of(i).startswith(b"misbehave:")]
        if misbehaving:
            mode = payload_of(misbehaving[0])[len(b"misbehave:"):].decode("utf-8")
        reply = {"version": 1, "batch": request["batch"], "results": []}
        if mode == "partial-hang":
            sys.stdout.write('{"version": 1, "batch": ')
            sys.stdout.flush()
            time.sleep(3600)
        if mode == "huge-line":
            chunk = b"x" * (1 << 20)
            for _ in range(100):
                sys.stdout.buffer.write(chunk)
            sys.stdout.flush()
            time.sleep(3600)
        if mode == "never":
            continue
        if mode == "garbage":
            sys.stdout.write("hello, this is not JSON\n")
            sys.stdout.flush()
            continue
        if any(payload_of(i) == b"crash" for i in items):
            print("crashing on purpose", file=sys.stderr, flush=True)
            os._exit(3)
        reply["results"] = [result_for(i) for i in items]
        if mode == "unknown-id":
            reply["results"][0]["id"] += 1000
        if mode == "fewer" and misbehaving:
            reply["results"] = [r for r in reply["results"] if r["id"] != misbehaving[0]["id"]]
        elif mode == "fewer":
            reply["results"] = reply["results"][:1]
        if mode == "padded":
            text = json.dumps(reply)
            sys.stdout.write(text + " " * (int(sys.argv[2]) - len(text)) + "\n")
            sys.stdout.flush()
            continue
        send(reply)
        if mode == "two-lines":
            send(reply)
        if mode == "chatter":
            sys.stdout.write("unsolicited\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
