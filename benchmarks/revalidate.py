"""The warm run's conditional GET: stackctl's own 304 reader against http.client, the standard library's
client a reader would pick instead.

    python benchmarks/revalidate.py [--repeat 15] [--pages 20]

Measures, in the same run and against the same loopback server (which answers every request 304 on a
kept-alive connection, as an index does for an unchanged page):
  import   the import of each, in a fresh interpreter that has already imported what a warm
           `stackctl resolve` imports before its first revalidation (the CLI, the index client)
  round    `--pages` conditional GETs, one connection kept alive, each answer's status and headers read
  run      a whole warm-run-sized share: import plus one round, in a fresh interpreter
Medians of `--repeat` runs, each tool alternating with the other, and the ratio stackctl / http.client.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PRELUDE = "import stackctl.cli, stackctl.cli.resolve, stackctl.index.client\n"

OURS = """
from stackctl.index.revalidate import not_modified
for i in range(PAGES):
    h = not_modified(f"{URL}/simple/p{i}/", {"If-None-Match": '"e"'}, None, True, 10.0)
    assert h is not None and h["etag"] == '"e"', h
"""

PEER = """
import http.client
from urllib.parse import urlsplit
u = urlsplit(URL)
conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10.0)
for i in range(PAGES):
    conn.request("GET", f"/simple/p{i}/", headers={"If-None-Match": '"e"', "Accept-Encoding": "gzip, deflate"})
    r = conn.getresponse()
    r.read()
    h = {k.lower(): v for k, v in r.getheaders()}
    assert r.status == 304 and h["etag"] == '"e"', (r.status, h)
conn.close()
"""


class NotModified(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self.send_response(304)
        self.send_header("ETag", '"e"')
        self.send_header("Cache-Control", "max-age=0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


def timed(body: str, url: str, pages: int, what: str) -> float:
    """Seconds `what` took in a fresh interpreter: the import alone, the round alone, or both."""
    name, _, rest = body.strip().partition("\n")
    script = PRELUDE + f"URL, PAGES = {url!r}, {pages}\nimport time\n"
    if what == "import":
        script += f"t = time.perf_counter()\n{name}\nprint(time.perf_counter() - t)\n"
    elif what == "round":
        script += f"{name}\nt = time.perf_counter()\n{rest}\nprint(time.perf_counter() - t)\n"
    else:
        script += f"t = time.perf_counter()\n{name}\n{rest}\nprint(time.perf_counter() - t)\n"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=ROOT)
    return float(out.stdout.strip())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--pages", type=int, default=20)
    args = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", 0), NotModified)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        print(f"{args.pages} pages, {args.repeat} runs each, medians (python {sys.version.split()[0]})")
        print(f"{'':8} {'stackctl':>10} {'http.client':>12} {'ratio':>7}")
        for what in ("import", "round", "run"):
            ours: list[float] = []
            peer: list[float] = []
            for _ in range(args.repeat):
                ours.append(timed(OURS, url, args.pages, what))
                peer.append(timed(PEER, url, args.pages, what))
            a, b = statistics.median(ours), statistics.median(peer)
            print(f"{what:8} {a * 1000:8.2f} ms {b * 1000:10.2f} ms {a / b:6.2f}x")
    finally:
        server.shutdown()


if __name__ == "__main__":
    sys.exit(main())
