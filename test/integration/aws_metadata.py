"""The two credential endpoints AWS runs beside a workload, emulated on loopback for the credential
chain's tests (moto serves neither): ECS's container credentials endpoint
(``AWS_CONTAINER_CREDENTIALS_FULL_URI``, with ``AWS_CONTAINER_AUTHORIZATION_TOKEN``) and EC2's
instance metadata service, IMDSv2 (a session token from ``PUT /latest/api/token``, then the role
name and its credentials under ``/latest/meta-data/iam/security-credentials/``).

Both hand out the temporary credentials they are given (as the real ones do: a role's session),
with an expiry, and count what they served; requests
without the authorization header or IMDSv2 token are refused (401), as AWS's are.
"""

from __future__ import annotations

import datetime as dt
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ROLE = "lakehouse-instance-role"


class CredentialsEndpoint:
    def __init__(self, session: dict, kind: str, authorization: str = "ecs-auth-token") -> None:
        self.session, self.kind, self.authorization = session, kind, authorization
        self.served = 0
        self.refused = 0
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def reply(self, status: int, body: str, content_type: str = "text/plain", headers=()) -> None:
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                for name, value in headers:
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def credentials(self) -> str:
                endpoint.served += 1
                expiry = (dt.datetime.now(dt.timezone.utc) + dt.timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
                return json.dumps({"Code": "Success", "Type": "AWS-HMAC",
                                   "AccessKeyId": endpoint.session["AccessKeyId"],
                                   "SecretAccessKey": endpoint.session["SecretAccessKey"],
                                   "Token": endpoint.session["SessionToken"], "Expiration": expiry,
                                   "RoleArn": f"arn:aws:iam::123456789012:role/{ROLE}"})

            def do_PUT(self):
                if endpoint.kind == "imds" and self.path == "/latest/api/token":
                    return self.reply(200, "imds-session-token",
                                      headers=[("X-aws-ec2-metadata-token-ttl-seconds", "21600")])
                self.reply(404, "")

            def do_GET(self):
                if endpoint.kind == "ecs":
                    if self.headers.get("Authorization") != endpoint.authorization:
                        endpoint.refused += 1
                        return self.reply(401, "")
                    return self.reply(200, self.credentials(), "application/json")
                if self.headers.get("X-aws-ec2-metadata-token") != "imds-session-token":
                    endpoint.refused += 1
                    return self.reply(401, "")
                base = "/latest/meta-data/iam/security-credentials/"
                if self.path in (base, base.rstrip("/")):
                    return self.reply(200, ROLE)
                if self.path == base + ROLE:
                    return self.reply(200, self.credentials(), "application/json")
                self.reply(404, "")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
