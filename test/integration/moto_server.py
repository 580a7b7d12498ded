"""moto's server on loopback (``moto[server]`` from test/requirements.txt): S3, STS, IAM, Glue and
S3 Tables in one process, for the AWS tests (test_aws.py).

It runs through moto_launch.py, which corrects one flaw of moto's signature check (it hashed the
decoded query string). moto accepts any request until authentication is switched on; :meth:`MotoServer.enforce_auth`
does that after the tests created their IAM user, keys and roles. From then on every request must
be SigV4-signed with a key moto issued (an IAM user's, or the session of a role assumed through
its STS), the signature must match (``SignatureDoesNotMatch`` otherwise), and the caller's policy
must allow the action: a test that signs with the wrong key fails.

What moto leaves untested (docs/tests.md, the test_aws.py entry): Glue's ``UpdateTable``
ignores ``VersionId`` (the optimistic lock is not checked; our commit's re-read before the update
is), EC2 instance metadata and ECS container credentials are not served, and SSO is not.
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from loopback import answers, start_listening, stop_group

REGION = "us-east-1"
ACCOUNT = "123456789012"  # moto's default account

ALLOW_ALL = json.dumps({"Version": "2012-10-17",
                        "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]})



@dataclass
class MotoServer:
    process: subprocess.Popen
    port: int

    @classmethod
    def start(cls, log: Path) -> "MotoServer":
        launcher = Path(__file__).with_name("moto_launch.py")
        process, port = start_listening(
            lambda port: [sys.executable, str(launcher), "-H", "127.0.0.1", "-p", str(port)],
            lambda port: answers(f"http://127.0.0.1:{port}/moto-api/"), log=open(log, "ab"),
            what="moto's server")
        return cls(process, port)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def client(self, service: str, **credentials):
        import boto3

        return boto3.client(service, endpoint_url=self.endpoint, region_name=REGION,
                            aws_access_key_id=credentials.get("key_id", "bootstrap"),
                            aws_secret_access_key=credentials.get("secret", "bootstrap"),
                            aws_session_token=credentials.get("token"))

    def create_user(self, name: str) -> tuple[str, str]:
        """An IAM user allowed everything, and its access key (id, secret)."""
        iam = self.client("iam")
        iam.create_user(UserName=name)
        iam.put_user_policy(UserName=name, PolicyName="all", PolicyDocument=ALLOW_ALL)
        key = iam.create_access_key(UserName=name)["AccessKey"]
        return key["AccessKeyId"], key["SecretAccessKey"]

    def create_role(self, name: str, web_identity: bool = False) -> str:
        """A role allowed everything that any principal (or any web identity) may assume; its ARN."""
        principal = {"Federated": "oidc.example"} if web_identity else {"AWS": "*"}
        action = "sts:AssumeRoleWithWebIdentity" if web_identity else "sts:AssumeRole"
        trust = json.dumps({"Version": "2012-10-17",
                            "Statement": [{"Effect": "Allow", "Principal": principal, "Action": action}]})
        iam = self.client("iam")
        arn = iam.create_role(RoleName=name, AssumeRolePolicyDocument=trust)["Role"]["Arn"]
        iam.put_role_policy(RoleName=name, PolicyName="all", PolicyDocument=ALLOW_ALL)
        return arn

    def enforce_auth(self) -> None:
        """From now on, every request needs a key moto issued and a matching signature."""
        self._unauthenticated_requests(b"0")

    def relax_auth(self) -> None:
        """From now on, moto accepts any request again."""
        self._unauthenticated_requests(b"inf")

    def _unauthenticated_requests(self, count: bytes) -> None:
        request = urllib.request.Request(f"{self.endpoint}/moto-api/reset-auth", data=count, method="POST",
                                         headers={"Content-Type": "text/plain"})
        urllib.request.urlopen(request, timeout=10).close()

    def stop(self) -> None:
        stop_group(self.process)
