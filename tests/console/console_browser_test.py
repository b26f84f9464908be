"""The web console as a person uses it: headless Chromium against `partq console`, a real
PostgreSQL and live `partq worker` processes (issue 25).

  - the part map changes colour when a worker is SIGKILLed and its parts move;
  - with every worker of a queue SIGKILLed, the pages count their sessions as expired, their
    parts as without a live owner (hatched) and their items in flight as `partq status` does;
  - requeueing a dead item from the page puts it back; a script's bearer token needs no CSRF
    token;
  - payloads show every backslash once and bytes that are not text as \\xNN, marked apart;
  - a 63-character queue name leaves the pause button on screen at 1400 and 1280 px;
  - a <script> payload shows as text and does not run;
  - an action without the token (or without the page's CSRF token) is refused;
  - wrong tokens are throttled per address; a request that cannot be parsed gets no page, and
    the console's errors carry the security headers; the cookie is Secure when a proxy says TLS;
  - pausing a queue from the page pauses it;
  - after a drain the queue page charts the acks the workers' heartbeats reported, and the
    queues page shows acked/s;
  - the schedules page lists schedules (payloads as text) and deletes one; the groups page
    lists groups.

Usage: console_browser_test.py PARTQ_BINARY SCREENSHOT_DIR. Needs $PARTQ_TEST_DSN (./scripts/test
sets it); without it the test is skipped (exit 77). Screenshots go to SCREENSHOT_DIR.
"""

import http.client
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.request

import psycopg2

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cdp  # noqa: E402

PARTQ = None
SHOTS = None
DSN = os.environ.get("PARTQ_TEST_DSN")

# Payloads that would run script if the page ever parsed one as markup.
EVIL = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'
# Typed backslashes (a Windows path, an escape as text), and bytes that are not text.
BACKSLASHES = 'C:\\new\\temp \\x00 \\\\server'
BINARY = b"a\x00b\\x00"



def wait_until(condition, timeout=60, what="a condition"):
    """Polls `condition` until it returns something truthy; the timeout only bounds a
    failing test."""
    deadline = time.monotonic() + timeout
    while True:
        v = condition()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ConsoleInABrowser(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.schema = "t_console_" + secrets.token_hex(4)
        cls.env = dict(os.environ, PARTQ_DSN=DSN, PARTQ_SCHEMA=cls.schema)
        cls.procs = []
        cls.browser = None
        cls.tmp = tempfile.mkdtemp(prefix="partq-console-test-")
        try:
            cls.set_up()
        except BaseException:
            # unittest skips tearDownClass when setUpClass fails: stop what started.
            cls.tearDownClass()
            raise

    @classmethod
    def set_up(cls):
        cls.partq("migrate")
        # A short TTL: a killed worker's parts move within about a second.
        cls.partq("queue", "create", "cq", "--parts", "16", "--session-ttl", "1s")
        cls.partq("queue", "create", "dq", "--parts", "4", "--max-attempts", "1")
        cls.token = secrets.token_hex(32)
        token_file = os.path.join(cls.tmp, "token")
        with open(token_file, "w") as f:
            f.write(cls.token + "\n")
        os.chmod(token_file, 0o600)  # the console refuses a token others can read
        cls.port = free_port()
        cls.base = f"http://127.0.0.1:{cls.port}"
        cls.console = cls.start("console", "--listen", f"127.0.0.1:{cls.port}",
                                "--token-file", token_file)
        wait_until(lambda: cls.get("/healthz")[0] == 200, what="the console to serve")
        cls.browser = cdp.Browser()
        cls.login()

    @classmethod
    def tearDownClass(cls):
        if cls.browser:
            cls.browser.close()
        for p in cls.procs:
            if p.poll() is None:
                p.kill()
            p.wait()
        shutil.rmtree(cls.tmp, ignore_errors=True)
        with psycopg2.connect(DSN) as conn, conn.cursor() as cur:
            cur.execute(f"DROP SCHEMA IF EXISTS {cls.schema} CASCADE")

    # --- helpers ---------------------------------------------------------------------

    @classmethod
    def partq(cls, *args, stdin=None):
        r = subprocess.run([PARTQ, *args], env=cls.env, input=stdin, capture_output=True,
                           text=True, timeout=60)
        if r.returncode != 0:
            raise AssertionError(f"partq {' '.join(args)}: exit {r.returncode}: {r.stderr}")
        return r.stdout

    @classmethod
    def start(cls, *args):
        p = subprocess.Popen([PARTQ, *args], env=cls.env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        cls.procs.append(p)
        return p

    @classmethod
    def get(cls, path, headers=None):
        return cls.request("GET", path, None, headers)

    @classmethod
    def request(cls, method, path, body, headers=None):
        req = urllib.request.Request(cls.base + path, data=body, method=method,
                                     headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()
        except OSError:
            return 0, ""

    @classmethod
    def login(cls):
        b = cls.browser
        b.navigate(cls.base + "/")
        b.wait_for("document.getElementById('token') !== null", what="the login form")
        b.evaluate(f"document.getElementById('token').value = {json.dumps(cls.token)};"
                   "document.getElementById('login').click(); true")
        b.wait_for("document.getElementById('queues') !== null", what="the queues page")

    def show(self, hash_):
        self.browser.evaluate(f"location.hash = {json.dumps(hash_)}; true")

    def shot(self, name):
        self.browser.screenshot(os.path.join(SHOTS, name))

    def owners_in_map(self):
        """part -> owner session id ('' when none), as the page's cells show them."""
        return self.browser.evaluate(
            "Array.from(document.querySelectorAll('#map .cell')).map(c => c.dataset.owner || '')")

    def colours_in_map(self):
        return self.browser.evaluate(
            "Array.from(document.querySelectorAll('#map .cell'))"
            ".map(c => getComputedStyle(c).backgroundColor)")

    def dead_list(self, queue):
        return json.loads(self.partq("dead", "list", queue, "--json"))

    # --- the scenarios -----------------------------------------------------------------

    def test_part_map_changes_colour_when_a_worker_is_killed(self):
        a = self.start("worker", "cq", "--handler", "noop", "--quiet")
        b = self.start("worker", "cq", "--handler", "noop", "--quiet")
        self.show("#/queue/cq")
        # Both workers own parts, and every part has an owner.
        owners = wait_until(
            lambda: (lambda o: o if len(o) == 16 and "" not in o and len(set(o)) == 2 else None)(
                self.owners_in_map()), what="two workers sharing the 16 parts on the map")
        before = self.colours_in_map()
        self.assertEqual(len(set(before)), 2, before)
        self.shot("part_map_two_workers.png")

        # Which session is `a`? The sessions' pids are on the sessions endpoint.
        status = json.loads(self.get(f"/api/queue?name=cq",
                                     {"Authorization": f"Bearer {self.token}"})[1])
        a_session = next(s["id"] for s in status["sessions"] if s["pid"] == a.pid)
        a_parts = [p for p, o in enumerate(owners) if o == a_session]
        self.assertTrue(a_parts)
        a.send_signal(signal.SIGKILL)
        a.wait()
        # Its parts move to the survivor: the map shows one owner, and a's cells change colour.
        wait_until(lambda: (lambda o: len(o) == 16 and set(o) == {owners[p] for p in range(16)
                                                                  if owners[p] != a_session})(
            self.owners_in_map()), what="the killed worker's parts to move on the map")
        after = self.colours_in_map()
        for p in a_parts:
            self.assertNotEqual(before[p], after[p], f"part {p} kept its colour")
        self.assertEqual(len(set(after)), 1)
        # The hand-off is listed as this console saw it.
        self.browser.wait_for("document.querySelectorAll('#handoffs tbody tr').length > 0",
                              what="the hand-off in the list")
        self.shot("part_map_after_kill.png")
        b.terminate()
        b.wait()

    def test_dead_sessions_show_as_expired_when_every_worker_is_killed(self):
        self.partq("queue", "create", "kq", "--parts", "4", "--session-ttl", "1s")
        self.partq("enqueue", "kq", "--stdin", stdin="".join(f"{i}\n" for i in range(20)))
        workers = [self.start("worker", "kq", "--handler", "sleep:600000", "--quiet")
                   for _ in range(2)]

        def status():
            return json.loads(self.partq("status", "kq", "--json"))
        wait_until(lambda: (lambda s: s["totals"]["live_sessions"] == 2 and
                            all(x["parts_owned"] > 0 for x in s["sessions"]) and
                            s["totals"]["in_flight"] > 0)(status()),
                   what="two workers owning parts, with items in flight")
        for w in workers:
            w.send_signal(signal.SIGKILL)
            w.wait()
        # Nobody is left to delete the sessions: their rows, parts and claims stay, expired.
        st = wait_until(lambda: (lambda s: s if s["totals"]["live_sessions"] == 0 else None)(
            status()), what="partq status to count no live session")
        t = st["totals"]
        self.assertEqual(t["expired_sessions"], 2)
        self.assertEqual(t["unowned_parts"], 4)
        self.assertEqual(t["in_flight_unowned"], t["in_flight"])

        self.show("#/")
        row = "document.querySelector('tr[data-queue=\"kq\"]')"
        cell = lambda cls: self.browser.evaluate(f"{row} ? {row}.querySelector('td.{cls}').textContent : ''")
        # The console's counts are spaced reads: wait for the first that saw the kill.
        wait_until(lambda: cell("in-flight").startswith(f"{t['in_flight']} ("),
                   what="the queues page to count the in-flight items as ownerless")
        self.assertEqual(cell("sessions"), "0 (+2 expired)")
        self.assertEqual(cell("unowned"), "4")
        self.assertEqual(cell("in-flight"),
                         f"{t['in_flight']} ({t['in_flight_unowned']} with no live owner)")
        self.shot("queues_after_kill_all.png")

        self.show("#/queue/kq")
        self.browser.wait_for("document.querySelectorAll('#map .cell').length === 4",
                              what="the part map")
        self.assertEqual(self.owners_in_map(), [""] * 4, "no part shows a live owner")
        expired = self.browser.evaluate(
            "Array.from(document.querySelectorAll('#map .cell'))"
            ".map(c => c.classList.contains('expired') ? c.dataset.expiredOwner : '')")
        self.assertEqual(sorted(set(expired)),
                         sorted(s["id"] for s in st["sessions"] if s["parts_owned"] > 0),
                         "every part hatched as its expired owner's")
        self.assertNotIn("", expired)
        self.assertIn("0 live session(s), 2 expired; 4 part(s) without a live owner",
                      self.browser.evaluate("document.getElementById('summary').textContent"))
        self.shot("part_map_all_killed.png")

    def test_dead_items_page_escapes_requeues_and_refuses_without_tokens(self):
        for payload in (EVIL, "plain", BACKSLASHES):
            self.partq("enqueue", "dq", "--", payload)
        with psycopg2.connect(DSN) as conn, conn.cursor() as cur:
            cur.execute(f"SELECT {self.schema}.enqueue('dq', %s)", (BINARY,))
        w = self.start("worker", "dq", "--handler", "fail:1", "--quiet")
        wait_until(lambda: len(self.dead_list("dq")) == 4, what="four dead items")
        w.terminate()
        w.wait()
        dead = {d["payload_bytes"]: d["id"] for d in self.dead_list("dq")}
        plain_id = dead[len("plain")]
        evil_id = dead[len(EVIL)]
        backslashes_id = dead[len(BACKSLASHES)]
        binary_id = dead[len(BINARY)]

        self.show("#/queue/dq/dead")
        self.browser.wait_for(f"document.querySelector('#dead tr[data-id=\"{evil_id}\"]')",
                              what="the dead items on the page")
        # The payload is on the page as text, byte for byte, and nothing of it ran.
        shown = self.browser.evaluate(
            f"document.querySelector('#dead tr[data-id=\"{evil_id}\"] td.payload').textContent")
        self.assertEqual(shown, EVIL)
        self.assertIsNone(self.browser.evaluate("window.__pwned === undefined ? null : window.__pwned"))
        self.assertEqual(self.browser.evaluate("document.querySelectorAll('#dead script').length"), 0)
        self.assertEqual(self.browser.evaluate("document.querySelectorAll('#dead img').length"), 0)
        self.assertEqual(self.browser.dialogs(), [])
        # A backslash shows as one backslash (issue 49: every one showed doubled); bytes that
        # are not text show as \xNN marked apart, so the typed "\x00" is not a NUL byte.
        cell = lambda id_: f"document.querySelector('#dead tr[data-id=\"{id_}\"] td.payload')"
        self.assertEqual(self.browser.evaluate(f"{cell(backslashes_id)}.textContent"), BACKSLASHES)
        self.assertEqual(self.browser.evaluate(f"{cell(backslashes_id)}.querySelectorAll('.esc').length"), 0)
        self.assertEqual(self.browser.evaluate(f"{cell(binary_id)}.textContent"), "a\\x00b\\x00")
        self.assertEqual(self.browser.evaluate(
            f"Array.from({cell(binary_id)}.querySelectorAll('.esc')).map(e => e.textContent)"),
            ["\\x00"])
        self.shot("dead_items.png")

        # Actions without the token, or without the page's CSRF token, are refused.
        csrf = self.browser.evaluate(
            "document.querySelector('meta[name=\"partq-csrf\"]').content")
        body = json.dumps({"queue": "dq", "ids": [plain_id]}).encode()
        code, _ = self.request("POST", "/api/dead/requeue", body,
                               {"Content-Type": "application/json", "X-CSRF-Token": csrf})
        self.assertEqual(code, 401, "no token")
        # From the page itself, a request that leaves out the CSRF header is refused too.
        code = self.browser.evaluate(
            "fetch('/api/dead/requeue', {method: 'POST', headers: {'Content-Type': "
            f"'application/json'}}, body: JSON.stringify({{queue: 'dq', ids: [{plain_id}]}})}})"
            ".then(r => r.status)")
        self.assertEqual(code, 403)
        self.assertEqual(len(self.dead_list("dq")), 4, "a refused action changed nothing")
        # A script with the bearer token needs no CSRF token: no other site's page can send it.
        code, _ = self.request("POST", "/api/dead/delete",
                               json.dumps({"queue": "dq", "ids": [binary_id]}).encode(),
                               {"Content-Type": "application/json",
                                "Authorization": f"Bearer {self.token}"})
        self.assertEqual(code, 200, "a script's bearer token")

        # Requeue from the page: the item leaves the dead items and is ready again.
        self.browser.evaluate(
            f"document.querySelector('#dead tr[data-id=\"{plain_id}\"] button.requeue').click(); true")
        self.browser.wait_for(f"document.getElementById('msg').textContent.includes('requeued item {plain_id}')",
                              what="the requeue's message")
        self.assertEqual(sorted(d["id"] for d in self.dead_list("dq")),
                         sorted([evil_id, backslashes_id]))
        status = json.loads(self.partq("status", "dq", "--json"))
        self.assertEqual(status["totals"]["ready"], 1)
        self.browser.wait_for(f"!document.querySelector('#dead tr[data-id=\"{plain_id}\"]')",
                              what="the requeued item to leave the page")

    def test_a_long_queue_name_keeps_the_pause_button_on_screen(self):
        name = "q" * 63  # the longest a queue name may be
        self.partq("queue", "create", name, "--parts", "1")
        try:
            for width in (1400, 1280):
                self.browser.resize(width, 900)
                self.show("#/")
                button = f"document.querySelector('button.pause[data-queue=\"{name}\"]')"
                self.browser.wait_for(button, what="the queues page")
                right = self.browser.evaluate(f"{button}.getBoundingClientRect().right")
                inner = self.browser.evaluate("document.documentElement.clientWidth")
                self.assertLessEqual(right, inner, f"the pause button at {width} px")
                self.shot(f"queues_long_name_{width}.png")
        finally:
            self.browser.resize(1280, 900)
            self.partq("queue", "delete", name)

    def test_logins_throttled_and_security_headers_on_every_answer(self):
        # A console of its own: its throttling must not make the other tests' requests wait.
        port = free_port()
        token = secrets.token_hex(32)
        token_file = os.path.join(self.tmp, "token2")
        with open(token_file, "w") as f:
            f.write(token)
        os.chmod(token_file, 0o600)
        self.start("console", "--listen", f"127.0.0.1:{port}", "--token-file", token_file)

        def call(method, path, body=None, headers=None):
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            try:
                c.request(method, path, body=body, headers=headers or {})
                r = c.getresponse()
                return r.status, dict(r.getheaders()), r.read().decode()
            except OSError:
                return 0, {}, ""
            finally:
                c.close()

        wait_until(lambda: call("GET", "/healthz")[0] == 200, what="the second console")
        # A request the server cannot parse gets no page at all: the connection is closed
        # unanswered (libmicrohttpd). The console's own errors (a method it does not take)
        # carry its headers.
        with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
            s.sendall(b"GARBAGE\r\n\r\n")
            raw = b""
            while chunk := s.recv(4096):
                raw += chunk
        self.assertEqual(raw, b"")
        code, headers, _ = call("PUT", "/api/queues")
        self.assertEqual(code, 405)
        self.assertIn("frame-ancestors 'none'", headers.get("Content-Security-Policy", ""))

        # Past five wrong tokens an address waits, twice as long after each: 429, the right
        # token not even compared meanwhile.
        page = call("GET", "/login")[2]
        csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', page).group(1)
        form = {"Content-Type": "application/x-www-form-urlencoded"}
        login = lambda t: call("POST", "/login", f"token={t}&csrf={csrf}", form)
        for i in range(5):
            self.assertEqual(login("wrong-token-0123456")[0], 401, i)
        code, headers, body = login("wrong-token-0123456")
        self.assertEqual(code, 429)
        self.assertEqual(headers.get("Retry-After"), "1")
        self.assertIn("try again in 1 s", body)
        self.assertEqual(login(token)[0], 429)
        code, headers, _ = wait_until(lambda: (lambda r: r if r[0] != 429 else None)(login(token)),
                                      what="the wait to end")
        self.assertEqual(code, 303)
        self.assertIn("partq_console=", headers.get("Set-Cookie", ""))
        self.assertIn("Max-Age=", headers.get("Set-Cookie", ""))
        self.assertNotIn("Secure", headers.get("Set-Cookie", ""), "plain HTTP")
        code, headers, _ = call("POST", "/login", f"token={token}&csrf={csrf}",
                                dict(form, **{"X-Forwarded-Proto": "https"}))
        self.assertIn("; Secure", headers.get("Set-Cookie", ""), "a proxy said TLS")

    def test_pause_from_the_queues_page(self):
        self.show("#/")
        self.browser.wait_for("document.querySelector('button.pause[data-queue=\"cq\"]')",
                              what="the queues page")
        self.shot("queues.png")
        self.browser.evaluate("document.querySelector('button.pause[data-queue=\"cq\"]').click(); true")
        wait_until(lambda: next(q for q in json.loads(self.partq("queue", "list", "--json"))
                                if q["name"] == "cq")["paused"], what="cq to be paused")
        self.browser.wait_for("document.querySelector('tr[data-queue=\"cq\"] td.paused')",
                              what="the page to say paused")
        self.browser.evaluate("document.querySelector('button.pause[data-queue=\"cq\"]').click(); true")
        wait_until(lambda: not next(q for q in json.loads(self.partq("queue", "list", "--json"))
                                    if q["name"] == "cq")["paused"], what="cq to be resumed")

    def test_a_worker_serves_the_console_too(self):
        port = free_port()
        w = self.start("worker", "cq", "--handler", "noop", "--quiet",
                       "--console-listen", f"127.0.0.1:{port}", "--console-read-only")
        base = f"http://127.0.0.1:{port}"

        def get(path):
            try:
                with urllib.request.urlopen(base + path, timeout=30) as r:
                    return r.status, r.read().decode()
            except urllib.error.HTTPError as e:
                return e.code, e.read().decode()
            except OSError:
                return 0, ""

        wait_until(lambda: get("/healthz")[0] == 200, what="the worker's console")
        # Without a token it answers its own names only: not a rebinding page's (issue 48).
        for host, want in ((f"rebind.example:{port}", 421), (f"localhost:{port}", 200),
                           (f"127.0.0.1:{port}", 200)):
            req = urllib.request.Request(base + "/api/dead?name=cq", headers={"Host": host})
            try:
                with urllib.request.urlopen(req, timeout=30) as r:
                    code, body = r.status, r.read().decode()
            except urllib.error.HTTPError as e:
                code, body = e.code, e.read().decode()
            self.assertEqual(code, want, f"Host: {host}: {body}")
        queues = wait_until(lambda: (lambda r: r[1] if r[0] == 200 and '"cq"' in r[1] else None)(
            get("/api/queues")), what="the worker's console to list the queues")
        self.assertIn('"actions":false', queues)
        req = urllib.request.Request(base + "/api/pause", data=b'{"queue": "cq"}', method="POST",
                                     headers={"Content-Type": "application/json"})
        with self.assertRaises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(req, timeout=30)
        self.assertEqual(refused.exception.code, 403, "read-only: no actions")
        w.terminate()
        w.wait()

    # Named to run last: deleting a schedule asks confirm(), a dialog the dead items test
    # asserts the page never opened before it.
    def test_throughput_after_a_drain_and_the_schedules_page(self):
        self.partq("queue", "create", "tq", "--parts", "4", "--session-ttl", "1s")
        self.partq("enqueue", "tq", "--stdin", stdin="".join(f"{i}\n" for i in range(200)))
        w = self.start("worker", "tq", "--handler", "noop", "--quiet")

        # The workers' heartbeats carry what they finished: `partq status` counts the drain.
        def acked():
            t = json.loads(self.partq("status", "tq", "--json"))["throughput"]
            return sum(m["acked"] for m in t["minutes"]), t
        done, t = wait_until(lambda: (lambda a: a if a[0] == 200 else None)(acked()),
                             what="status to count the 200 acks")
        self.assertGreater(t["acked_per_second"], 0)
        self.assertEqual(t["failed_per_second"], 0)

        # The queue page charts them: the acked bars add up to the drain.
        self.show("#/queue/tq")
        charted = ("Array.from(document.querySelectorAll('#throughput rect.ok'))"
                   ".reduce((s, r) => s + Number(r.dataset.count), 0)")
        self.browser.wait_for(f"{charted} === 200", what="the chart to show the 200 acks")
        self.assertNotEqual(self.browser.evaluate(
            "document.querySelector('#rates').textContent"), "")
        self.shot("throughput.png")
        self.show("#/")
        self.browser.wait_for(
            "Number(document.querySelector('tr[data-queue=\"tq\"] td.acked').textContent) > 0",
            what="acked/s on the queues page")

        # The schedules page: both schedules, the payload as text, a delete that works.
        # (Added after the drain was counted: a tick that fired meanwhile adds an item.)
        self.partq("schedule", "add", "nightly", "tq", "--cron", "0 3 * * *", "--tz",
                   "Europe/Berlin", "--catch-up", "2h", EVIL)
        self.partq("schedule", "add", "often", "tq", "--every", "1h", "x")
        self.show("#/queue/tq/schedules")
        self.browser.wait_for("document.querySelector('#schedules tr[data-schedule=\"often\"]')",
                              what="the schedules page")
        row = "document.querySelector('#schedules tr[data-schedule=\"nightly\"]')"
        self.assertIn("cron 0 3 * * *", self.browser.evaluate(f"{row}.textContent"))
        self.assertIn("Europe/Berlin", self.browser.evaluate(f"{row}.textContent"))
        self.assertEqual(self.browser.evaluate(f"{row}.querySelector('td.catch-up').textContent"),
                         "2h")
        self.assertEqual(self.browser.evaluate(f"{row}.querySelector('td.payload').textContent"),
                         EVIL)
        self.assertIsNone(self.browser.evaluate("window.__pwned === undefined ? null : window.__pwned"))
        next_tick = self.browser.evaluate(f"{row}.children[3].textContent")
        self.assertRegex(next_tick, r"^\d{4}-\d\d-\d\d (01|02):00:00$", "03:00 Berlin in UTC")
        self.shot("schedules.png")
        # Deleting without the token is refused; from the page it works.
        code, _ = self.request("POST", "/api/schedule/delete",
                               json.dumps({"queue": "tq", "schedule": "often"}).encode(),
                               {"Content-Type": "application/json"})
        self.assertEqual(code, 401)
        self.browser.evaluate(
            "document.querySelector('#schedules tr[data-schedule=\"often\"] button.delete')"
            ".click(); true")
        self.browser.wait_for("document.getElementById('msg').textContent.includes("
                              "'deleted schedule often')", what="the delete's message")
        names = [s["name"] for s in json.loads(self.partq("schedule", "list", "tq", "--json"))]
        self.assertEqual(names, ["nightly"])

        # The groups page lists a queue's groups.
        self.partq("enqueue", "tq", "--group", "batch-7", "y")
        self.show("#/queue/tq/groups")
        self.browser.wait_for("document.querySelector('#groups tr[data-group=\"batch-7\"]')",
                              what="the groups page")
        self.shot("groups.png")
        w.terminate()
        w.wait()


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    PARTQ, SHOTS = sys.argv[1], sys.argv[2]
    if not DSN:
        print("PARTQ_TEST_DSN is not set: skipped (./scripts/test sets it)")
        sys.exit(77)
    unittest.main(argv=[sys.argv[0], "-v"])
