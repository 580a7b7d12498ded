"""A SigV4-verifying proxy in front of Iceberg's REST catalog fixture, standing in for the REST
endpoints AWS signs (Glue's Iceberg endpoint, S3 Tables'), which have no emulator.

Each request must carry an ``AWS4-HMAC-SHA256`` ``Authorization`` for the expected key id,
region and signing name; the proxy recomputes the signature with botocore's signer (AWS's Python
SDK, not our code) over the request exactly as it arrived (method, path and query as sent, the
signed headers, the body) and refuses a mismatch with 403 — so a test that signs wrongly fails.
Verified requests are forwarded to the catalog without the signature headers.

Runs in a thread of the test process: ``proxy = SigV4Proxy.start(upstream, key_id, secret,
region, service)``, ``proxy.uri``, ``proxy.refused`` (the refusals so far), ``proxy.stop()``.
"""

from __future__ import annotations

import http.client
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

HOP_HEADERS = {"host", "authorization", "x-amz-date", "x-amz-security-token", "x-amz-content-sha256",
               "connection", "transfer-encoding", "content-length", "original-authorization"}


def verify(method: str, host: str, path: str, headers, body: bytes, key_id: str, secret: str, region: str,
           service: str) -> str | None:
    """None when the request is signed correctly; else why not."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    auth = headers.get("Authorization", "")
    if not auth.startswith("AWS4-HMAC-SHA256 "):
        return "no SigV4 signature"
    fields = dict(part.strip().split("=", 1) for part in auth[len("AWS4-HMAC-SHA256 "):].split(","))
    scope = fields.get("Credential", "").split("/")
    if len(scope) != 5 or scope[0] != key_id:
        return "unknown access key"
    if scope[2] != region or scope[3] != service:
        return f"signed for {scope[2]}/{scope[3]}, expected {region}/{service}"
    signed = fields.get("SignedHeaders", "").split(";")
    request = AWSRequest(method=method, url=f"http://{host}{path}", data=body,
                         headers={name: headers.get(name, "") for name in signed})
    request.context["timestamp"] = headers.get("X-Amz-Date", "")
    signer = SigV4Auth(Credentials(key_id, secret, headers.get("X-Amz-Security-Token")), service, region)
    canonical = signer.canonical_request(request)
    expected = signer.signature(signer.string_to_sign(request, canonical), request)
    return None if expected == fields.get("Signature") else "signature does not match"


class SigV4Proxy:
    def __init__(self, upstream: str, key_id: str, secret: str, region: str, service: str) -> None:
        self.upstream = urlsplit(upstream)
        self.key_id, self.secret, self.region, self.service = key_id, secret, region, service
        self.refused: list[str] = []
        self.verified = 0
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def handle_any(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                why = verify(self.command, self.headers.get("Host", ""), self.path, self.headers, body,
                             proxy.key_id, proxy.secret, proxy.region, proxy.service)
                if why is not None:
                    proxy.refused.append(why)
                    payload = json.dumps({"error": {"message": f"SigV4: {why}", "type": "NotAuthorizedException",
                                                    "code": 403}}).encode()
                    self.send_response(403)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                proxy.verified += 1
                upstream = http.client.HTTPConnection(proxy.upstream.hostname, proxy.upstream.port, timeout=60)
                forwarded = {k: v for k, v in self.headers.items() if k.lower() not in HOP_HEADERS}
                upstream.request(self.command, self.path, body=body or None, headers=forwarded)
                response = upstream.getresponse()
                payload = response.read()
                self.send_response(response.status)
                for key, value in response.getheaders():
                    if key.lower() not in ("transfer-encoding", "connection", "content-length"):
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
                upstream.close()

            do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = handle_any

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @classmethod
    def start(cls, upstream: str, key_id: str, secret: str, region: str, service: str) -> "SigV4Proxy":
        proxy = cls(upstream, key_id, secret, region, service)
        proxy.thread.start()
        return proxy

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
