#!/usr/bin/env python3
"""An HTTPS server for tests/handlers/http_client_test.cc (stdlib only).

Debian 12's civetweb cannot serve TLS with OpenSSL 3 (it looks up
SSL_get_peer_certificate, which OpenSSL 3 no longer exports, and calls a null
pointer on the first connection), so the https tests use Python's ssl module.

Listens on 127.0.0.1 at a free port and writes that port to --port-file once
it accepts connections. Every POST gets 200 application/json
{"ok": true, "client_port": N}: the client's TCP port, so a test can tell
whether calls shared a connection. HTTP/1.1 with keep-alive.
"""
import argparse
import http.server
import json
import ssl
import sys

import port_file


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        body = json.dumps({"ok": True, "client_port": self.client_address[1]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, fmt, *args):
        sys.stderr.write("https_test_server: " + (fmt % args) + "\n")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--cert", required=True, help="PEM certificate")
    p.add_argument("--key", required=True, help="PEM private key")
    p.add_argument("--client-ca", help="require client certificates from this CA")
    p.add_argument("--port-file", required=True)
    a = p.parse_args()

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(a.cert, a.key)
    if a.client_ca:
        ctx.verify_mode = ssl.CERT_REQUIRED
        ctx.load_verify_locations(a.client_ca)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    # The handshake runs in each request's thread, not in accept(): a client
    # that fails it cannot hold up the others.
    server.socket = ctx.wrap_socket(server.socket, server_side=True,
                                    do_handshake_on_connect=False)
    port_file.write_port(server, a.port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
