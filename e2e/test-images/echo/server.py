"""e2e test server: answers questions about the pod it runs in, over HTTP on :8080.

  GET  /            {"hostname", "pod_name"}       GET /env      the environment
  GET  /file?path=  a file's text (404 if absent)  POST /file?path=  write the body to a file
  GET  /resolve?name=  the IPv4 addresses a name resolves to inside the pod
  GET  /fetch?url=  fetches an http URL from inside the pod (pod-to-pod traffic)
  GET  /api?path=[&base=]  calls the Kubernetes API as the pod's service account (at base, else
                    KUBERNETES_SERVICE_HOST/PORT; mounted token and ca.crt); answers its status
  GET  /healthz     200
Arguments: `crash [SECONDS]` exits 3 after SECONDS instead of serving (restart tests).
"""
import json
import os
import signal
import socket
import sys
import time
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


def call_api(path: str, base: str | None = None) -> tuple[int, object]:
    import ssl
    import urllib.error
    host = os.environ["KUBERNETES_SERVICE_HOST"]
    port = os.environ["KUBERNETES_SERVICE_PORT"]
    base = base or f"https://{host}:{port}"
    with open(f"{SA_DIR}/token") as f:
        token = f.read().strip()
    ctx = ssl.create_default_context(cafile=f"{SA_DIR}/ca.crt")
    req = urllib.request.Request(f"{base}{path}",
                                 headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(req, timeout=5, context=ctx) as r:
            return 200, {"status": r.status, "body": r.read().decode()}
    except urllib.error.HTTPError as e:
        return 200, {"status": e.code, "body": e.read().decode()}
    except OSError as e:
        return 502, str(e)


class Handler(BaseHTTPRequestHandler):
    def _send(self, code: int, body: object) -> None:
        data = (body if isinstance(body, str) else json.dumps(body)).encode()
        self.send_response(code)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802 - http.server naming
        url = urllib.parse.urlsplit(self.path)
        q = dict(urllib.parse.parse_qsl(url.query))
        if url.path == "/":
            self._send(200, {"hostname": socket.gethostname(), "pod_name": os.environ.get("POD_NAME")})
        elif url.path == "/healthz":
            self._send(200, "ok")
        elif url.path == "/env":
            self._send(200, dict(os.environ))
        elif url.path == "/file":
            try:
                with open(q["path"]) as f:
                    self._send(200, f.read())
            except OSError as e:
                self._send(404, str(e))
        elif url.path == "/resolve":
            try:
                infos = socket.getaddrinfo(q["name"], None, socket.AF_INET, socket.SOCK_STREAM)
                self._send(200, sorted({i[4][0] for i in infos}))
            except OSError as e:
                self._send(404, str(e))
        elif url.path == "/api":
            self._send(*call_api(q["path"], q.get("base")))
        elif url.path == "/fetch":
            try:
                with urllib.request.urlopen(q["url"], timeout=5) as r:
                    self._send(200, r.read().decode())
            except OSError as e:
                self._send(502, str(e))
        else:
            self._send(404, "no such path")

    def do_POST(self) -> None:  # noqa: N802
        url = urllib.parse.urlsplit(self.path)
        q = dict(urllib.parse.parse_qsl(url.query))
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if url.path != "/file":
            self._send(404, "no such path")
            return
        os.makedirs(os.path.dirname(q["path"]) or ".", exist_ok=True)
        with open(q["path"], "wb") as f:
            f.write(body)
        self._send(200, "written")

    def log_message(self, fmt: str, *args: object) -> None:
        print("request:", fmt % args, flush=True)


def main() -> None:
    # PID 1 in a container ignores signals it has no handler for: exit on SIGTERM like a
    # well-behaved server, so graceful deletion is quick.
    signal.signal(signal.SIGTERM, lambda *_: (print("got SIGTERM, exiting", flush=True), os._exit(0)))
    if len(sys.argv) > 1 and sys.argv[1] == "crash":
        print("crashing on purpose", flush=True)
        time.sleep(float(sys.argv[2]) if len(sys.argv) > 2 else 0.5)
        sys.exit(3)
    port = int(os.environ.get("PORT", "8080"))
    server = ThreadingHTTPServer(("0.0.0.0", port), Handler)
    print(f"serving on :{port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
