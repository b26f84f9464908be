"""A small Chrome DevTools Protocol client over Debian's chromium and python3-websocket.

Starts a headless Chromium with a throwaway profile, opens one page and drives
it: navigate, evaluate JavaScript (to read the DOM and click), wait for a
condition in the page, take screenshots. No downloads: the browser is the
`chromium` package, the websocket client `python3-websocket`.
"""

import base64
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import urllib.request

import websocket


class BrowserError(Exception):
    pass


class Browser:
    def __init__(self, width=1280, height=900):
        self.profile = tempfile.mkdtemp(prefix="partq-chromium-")
        binary = shutil.which("chromium") or shutil.which("chromium-browser")
        if not binary:
            raise BrowserError("chromium is not installed (apt-get install chromium)")
        # --no-sandbox: the tests may run as root (containers, CI), where
        # Chromium refuses its sandbox; the pages are our own console.
        self.proc = subprocess.Popen(
            [binary, "--headless=new", "--no-sandbox", "--disable-gpu",
             "--disable-dev-shm-usage", "--no-first-run", "--no-default-browser-check",
             "--disable-extensions", "--disable-background-networking",
             "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0",
             "--remote-allow-origins=*", f"--user-data-dir={self.profile}",
             f"--window-size={width},{height}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        port = None
        deadline = time.monotonic() + 60
        lines = []
        # Chromium says where DevTools listens on stderr, then keeps writing
        # there: read up to that line, then let the rest drain in a thread.
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                if self.proc.poll() is not None:
                    break
                continue
            lines.append(line)
            m = re.search(r"DevTools listening on ws://127\.0\.0\.1:(\d+)/", line)
            if m:
                port = int(m.group(1))
                break
        if port is None:
            self.close()
            raise BrowserError("chromium did not start:\n" + "".join(lines))
        import threading
        threading.Thread(target=self._drain, daemon=True).start()
        self.port = port
        req = urllib.request.Request(f"http://127.0.0.1:{port}/json/new?about:blank", method="PUT")
        with urllib.request.urlopen(req, timeout=30) as r:
            target = json.load(r)
        self.ws = websocket.create_connection(target["webSocketDebuggerUrl"], timeout=60,
                                              suppress_origin=True)
        self.next_id = 0
        self.events = []
        self.call("Page.enable")
        self.call("Runtime.enable")
        self.call("Network.enable")
        self.resize(width, height)

    def resize(self, width, height):
        """The viewport's size in CSS pixels."""
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})

    def _drain(self):
        for _ in self.proc.stderr:
            pass

    def call(self, method, params=None):
        self.next_id += 1
        my_id = self.next_id
        self.ws.send(json.dumps({"id": my_id, "method": method, "params": params or {}}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == my_id:
                if "error" in msg:
                    raise BrowserError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            if "method" in msg:
                self.events.append(msg)
                if msg["method"] == "Page.javascriptDialogOpening":
                    # A page must never open one; answer it so the page goes on, and let
                    # the test find the event.
                    self.ws.send(json.dumps({"id": 0, "method": "Page.handleJavaScriptDialog",
                                             "params": {"accept": True}}))

    def evaluate(self, expression):
        """The value of `expression` in the page (promises awaited)."""
        r = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                           "awaitPromise": True})
        if "exceptionDetails" in r:
            raise BrowserError(f"{expression}: {r['exceptionDetails']}")
        return r["result"].get("value")

    def navigate(self, url):
        self.call("Page.navigate", {"url": url})

    def wait_for(self, expression, timeout=60, what=None):
        """Polls `expression` until it is truthy; returns its value. The timeout only
        bounds a failing test."""
        deadline = time.monotonic() + timeout
        last_error = None
        # A DOM node comes back as {} (falsy here): say that it exists.
        wrapped = f"(() => {{ const v = ({expression}); return v instanceof Node ? true : v; }})()"
        while True:
            try:
                v = self.evaluate(wrapped)
                if v:
                    return v
            except BrowserError as e:  # the page may be between loads
                last_error = e
            if time.monotonic() > deadline:
                try:
                    page = self.evaluate("location.href + '\\n' + document.body.innerText")
                except BrowserError:
                    page = "(unreadable)"
                raise BrowserError(f"timed out waiting for {what or expression}"
                                   + (f" (last error: {last_error})" if last_error else "")
                                   + f"; the page:\n{page}")
            time.sleep(0.05)

    def dialogs(self):
        # Events that arrived since the last call are read by the next call.
        self.call("Runtime.evaluate", {"expression": "0"})
        return [e for e in self.events if e["method"] == "Page.javascriptDialogOpening"]

    def cookies(self):
        return self.call("Network.getAllCookies")["cookies"]

    def screenshot(self, path):
        data = self.call("Page.captureScreenshot", {"format": "png"})["data"]
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))

    def close(self):
        try:
            if getattr(self, "ws", None):
                self.ws.close()
        finally:
            if self.proc.poll() is None:
                self.proc.terminate()
                try:
                    self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
            shutil.rmtree(self.profile, ignore_errors=True)
