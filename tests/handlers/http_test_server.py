#!/usr/bin/env python3
"""An HTTP handler server that misbehaves on request, for the consumer-level
tests of the http: handler (tests/handlers/consumer_handlers_test.cc). Stdlib
only.

Listens on 127.0.0.1 at a free port and writes that port to --port-file once
it accepts connections. A POST is a batch of the handler protocol
(docs/handler-protocol.md). The path says how to misbehave:

  /ok         never: serve every batch
  /html       200 with an HTML error page
  /500        500 with a text body
  /redirect   302 to itself, forever
  /trickle    200 application/json whose body comes at 5 bytes a second
  /throttle   429 with Retry-After: SECONDS (query retry_after, default 1)
  /badreply   200 application/json with a reply that breaks the protocol

and when: for a batch holding an item whose payload is "poison", or, with the
query first=N, for the first N batches POSTed to that path. Otherwise the
batch is served: each item ok, its payload (text) as its result, except
items whose payload asks otherwise:

  fail           ok: false, error "failed as asked", dead: true
  retry:SECONDS  at attempt 1, ok: false, retry_in SECONDS; later ok, with
                 the result "attempt N"
  effects        ok, the result "done", an item enqueued into "next" and a
                 message published to "events"

GET /log answers the batches received so far, oldest first, as JSON:
[{"path", "status", "at" (seconds, monotonic), "authorization" (or null),
  "items": [{"id", "attempt", "payload"}]}].
HTTP/1.1 with keep-alive.
"""
import argparse
import http.server
import json
import sys
import threading
import time
import urllib.parse

import port_file

HTML = (b"<!DOCTYPE html>\n<html><head><title>502 Bad Gateway</title></head>\n"
        b"<body><h1>Bad Gateway</h1><p>The upstream server is not answering.</p></body></html>\n")

lock = threading.Lock()
received = []  # what GET /log answers
counts = {}    # batches POSTed, by path


def result_for(item):
    payload = item["payload"]
    if payload == "fail":
        return {"id": item["id"], "ok": False, "error": "failed as asked", "dead": True}
    if payload.startswith("retry:"):
        if item["attempt"] == 1:
            return {"id": item["id"], "ok": False, "error": "not yet",
                    "retry_in": float(payload[6:])}
        return {"id": item["id"], "ok": True, "result": "attempt %d" % item["attempt"]}
    if payload == "effects":
        return {"id": item["id"], "ok": True, "result": "done",
                "enqueue": [{"queue": "next", "payload": "from %d" % item["id"]}],
                "publish": [{"topic": "events", "payload": "published"}]}
    return {"id": item["id"], "ok": True, "result": payload}


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def send(self, status, content_type, body, headers=()):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        with lock:
            body = json.dumps(received).encode()
        self.send(200, "application/json", body)

    def do_POST(self):
        url = urllib.parse.urlsplit(self.path)
        query = dict(urllib.parse.parse_qsl(url.query))
        request = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
        items = request["items"]
        with lock:
            n = counts[url.path] = counts.get(url.path, 0) + 1
        if "first" in query:
            misbehave = n <= int(query["first"])
        else:
            misbehave = any(i["payload"] == "poison" for i in items)
        how = url.path if misbehave else "/ok"
        status = {"/html": 200, "/500": 500, "/redirect": 302, "/trickle": 200,
                  "/throttle": 429, "/badreply": 200}.get(how, 200)
        with lock:
            received.append({"path": url.path, "status": status, "at": time.monotonic(),
                             "authorization": self.headers.get("Authorization"),
                             "items": [{"id": i["id"], "attempt": i["attempt"],
                                        "payload": i["payload"]} for i in items]})
        if how == "/html":
            self.send(200, "text/html; charset=utf-8", HTML)
        elif how == "/500":
            self.send(500, "text/plain", b"Internal Server Error: KeyError: 'n'\n")
        elif how == "/redirect":
            self.send(302, "text/plain", b"", [("Location", self.path)])
        elif how == "/badreply":
            self.send(200, "application/json", b'{"version": 1, "results": []}')
        elif how == "/throttle":
            self.send(429, "text/plain", b"slow down\n",
                      [("Retry-After", query.get("retry_after", "1"))])
        elif how == "/trickle":
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "100000")
            self.end_headers()
            try:
                while True:  # until the client gives up and the write fails
                    self.wfile.write(b" ")
                    self.wfile.flush()
                    time.sleep(0.2)
            except OSError:
                self.close_connection = True
        else:
            results = [result_for(i) for i in items]
            reply = {"version": 1, "batch": request["batch"], "results": results}
            self.send(200, "application/json", json.dumps(reply).encode())

    def log_message(self, fmt, *args):
        sys.stderr.write("http_test_server: " + (fmt % args) + "\n")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port-file", required=True)
    a = p.parse_args()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    port_file.write_port(server, a.port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
