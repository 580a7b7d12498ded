"""fake-gcs-server (Google Cloud Storage's JSON API, emulated; built once from the Go module proxy
by ``scripts/fake_gcs.sh``) on loopback for the GCS tests (test_gcs.py); started and stopped by
PID, buckets under a directory of the test's.

What it leaves untested: authentication (it accepts any request, so our clients run unsigned
against it: service accounts, application-default credentials and OAuth tokens are not
exercised), the XML API with HMAC keys that DuckDB's httpfs reads GCS through (so compaction,
which DuckDB does, is not run on it), and IAM.
"""

from __future__ import annotations

import json
import subprocess
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from loopback import answers, start_listening, stop_group

REPO_ROOT = Path(__file__).resolve().parents[2]


def fake_gcs_binary() -> Path:
    out = subprocess.run([str(REPO_ROOT / "scripts" / "fake_gcs.sh")], check=True, capture_output=True, text=True)
    return Path(out.stdout.strip().splitlines()[-1])


@dataclass
class GcsServer:
    process: subprocess.Popen
    port: int

    @classmethod
    def start(cls, root: Path) -> "GcsServer":
        binary = fake_gcs_binary()
        (root / "data").mkdir(parents=True, exist_ok=True)
        process, port = start_listening(
            lambda port: [str(binary), "-scheme", "http", "-host", "127.0.0.1", "-port", str(port), "-backend",
                          "filesystem", "-filesystem-root", str(root / "data"), "-public-host", f"127.0.0.1:{port}",
                          "-log-level", "error"],
            lambda port: answers(f"http://127.0.0.1:{port}/storage/v1/b?project=test"),
            log=open(root / "fake-gcs.log", "ab"), what="fake-gcs-server")
        return cls(process, port)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def create_bucket(self, name: str) -> None:
        request = urllib.request.Request(f"{self.endpoint}/storage/v1/b?project=test", method="POST",
                                         data=json.dumps({"name": name}).encode(),
                                         headers={"Content-Type": "application/json"})
        urllib.request.urlopen(request, timeout=10).close()

    def objects(self, bucket: str, prefix: str) -> set[str]:
        """The object names under ``prefix``, listed through the JSON API."""
        names: set[str] = set()
        token = ""
        while True:
            url = f"{self.endpoint}/storage/v1/b/{bucket}/o?prefix={prefix}" + (f"&pageToken={token}" if token else "")
            with urllib.request.urlopen(url, timeout=10) as response:
                page = json.load(response)
            names |= {item["name"] for item in page.get("items", [])}
            token = page.get("nextPageToken", "")
            if not token:
                return names

    def upload(self, bucket: str, name: str, data: bytes) -> None:
        request = urllib.request.Request(
            f"{self.endpoint}/upload/storage/v1/b/{bucket}/o?uploadType=media&name={name}", data=data, method="POST",
            headers={"Content-Type": "application/octet-stream"})
        urllib.request.urlopen(request, timeout=10).close()

    def stop(self) -> None:
        stop_group(self.process)
