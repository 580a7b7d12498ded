"""A real S3-compatible server on loopback for the integration tests, and a latency proxy.

The server is versitygw v1.8.0 (posix backend: buckets are directories under ``root/data``),
built once from the Go module proxy by ``scripts/s3_server.sh`` into
``${LAKEHOUSE_CACHE:-~/.cache/lakehouse}/bin``. Signatures are enforced: requests must be AWS
SigV4-signed with :data:`ACCESS_KEY_ID` / :data:`SECRET_ACCESS_KEY` (a wrong secret gets 403
``SignatureDoesNotMatch``, an unknown key id 403 ``InvalidAccessKeyId``). Addressing is
path-style (``http://127.0.0.1:PORT/bucket/key``); conditional writes (``If-None-Match: *``,
``If-Match``) are supported.

No pytest fixtures here: only classes and functions for conftest to wire up::

    server = S3Server.start(tmp_path / "s3")
    server.create_bucket("lake")
    con.execute(duckdb_secret_sql(server, "s3://lake/"))
    ...
    server.stop()

:meth:`S3Server.request` signs and sends one raw S3 request (stdlib only), for checks that need
exact headers such as ``If-None-Match``.
"""

from __future__ import annotations

import datetime as dt
import glob
import hashlib
import hmac
import http.client
import os
import select
import signal
import subprocess
import sys
import time
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping
from loopback import free_port

REPO_ROOT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO_ROOT / "scripts" / "s3_server.sh"

ACCESS_KEY_ID = "lakehouse-test-key"
SECRET_ACCESS_KEY = "lakehouse-test-secret-0123456789"
REGION = "us-east-1"
HEALTH_PATH = "/_lakehouse_health"

_binaries: dict[str, Path] = {}


def build_binaries() -> tuple[Path, Path]:
    """Runs ``scripts/s3_server.sh all`` (a no-op when the cache is warm) once per process and
    returns (versitygw, latency_proxy) paths. Env overrides: ``LAKEHOUSE_VERSITYGW`` and
    ``LAKEHOUSE_LATENCY_PROXY`` point at prebuilt binaries and skip the script."""
    if not _binaries:
        vgw = os.environ.get("LAKEHOUSE_VERSITYGW")
        proxy = os.environ.get("LAKEHOUSE_LATENCY_PROXY")
        if not (vgw and proxy):
            out = subprocess.run(
                ["bash", str(BUILD_SCRIPT), "all"],
                check=True,
                stdout=subprocess.PIPE,
                text=True,
                timeout=1200,
            ).stdout.split()
            vgw = vgw or out[0]
            proxy = proxy or out[1]
        _binaries["versitygw"] = Path(vgw)
        _binaries["proxy"] = Path(proxy)
    return _binaries["versitygw"], _binaries["proxy"]



def _xattrs_supported(directory: Path) -> bool:
    probe = directory / ".xattr_probe"
    probe.touch()
    try:
        os.setxattr(probe, "user.lakehouse_probe", b"1")
        return True
    except OSError:
        return False
    finally:
        probe.unlink(missing_ok=True)


def _die_with_parent() -> None:
    """In the child before exec (Linux): get SIGTERM when the test process dies, so a crashed or
    killed pytest leaves no server behind. Best effort elsewhere."""
    try:
        import ctypes

        PR_SET_PDEATHSIG = 1
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except Exception:  # noqa: BLE001
        pass


def _stop_process(proc: subprocess.Popen, timeout: float = 10.0) -> None:
    """SIGTERM by PID, wait, then SIGKILL by PID."""
    if proc.poll() is not None:
        return
    try:
        os.kill(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=timeout)


# ----------------------------------------------------------------------------------------------
# SigV4 (enough for path-style S3 requests)


@dataclass
class S3Response:
    status: int
    headers: dict[str, str]
    body: bytes

    @property
    def error_code(self) -> str | None:
        """The <Code> of an S3 XML error body, if any."""
        text = self.body.decode("utf-8", "replace")
        start = text.find("<Code>")
        end = text.find("</Code>")
        return text[start + 6 : end] if 0 <= start < end else None


def _hmac(key: bytes, msg: str) -> bytes:
    return hmac.new(key, msg.encode(), hashlib.sha256).digest()


def sign_request(
    method: str,
    host: str,
    path: str,
    query: Mapping[str, str],
    headers: Mapping[str, str],
    body: bytes,
    access_key_id: str,
    secret_access_key: str,
    region: str = REGION,
    now: dt.datetime | None = None,
) -> dict[str, str]:
    """Returns ``headers`` plus host, x-amz-date, x-amz-content-sha256 and Authorization."""
    now = now or dt.datetime.now(dt.timezone.utc)
    amz_date = now.strftime("%Y%m%dT%H%M%SZ")
    day = amz_date[:8]
    payload_hash = hashlib.sha256(body).hexdigest()
    out = {k.lower(): str(v).strip() for k, v in headers.items()}
    out["host"] = host
    out["x-amz-date"] = amz_date
    out["x-amz-content-sha256"] = payload_hash
    signed = sorted(out)
    canonical_query = "&".join(
        f"{urllib.parse.quote(k, safe='')}={urllib.parse.quote(v, safe='')}"
        for k, v in sorted(query.items())
    )
    canonical = "\n".join(
        [
            method,
            urllib.parse.quote(path, safe="/"),
            canonical_query,
            "".join(f"{k}:{out[k]}\n" for k in signed),
            ";".join(signed),
            payload_hash,
        ]
    )
    scope = f"{day}/{region}/s3/aws4_request"
    to_sign = "\n".join(
        ["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()]
    )
    key = _hmac(_hmac(_hmac(_hmac(f"AWS4{secret_access_key}".encode(), day), region), "s3"), "aws4_request")
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    out["authorization"] = (
        f"AWS4-HMAC-SHA256 Credential={access_key_id}/{scope}, "
        f"SignedHeaders={';'.join(signed)}, Signature={signature}"
    )
    return out


def s3_request(
    endpoint: str,
    method: str,
    bucket: str = "",
    key: str = "",
    *,
    body: bytes = b"",
    headers: Mapping[str, str] | None = None,
    query: Mapping[str, str] | None = None,
    access_key_id: str = ACCESS_KEY_ID,
    secret_access_key: str = SECRET_ACCESS_KEY,
    region: str = REGION,
    timeout: float = 30.0,
) -> S3Response:
    """Signs and sends one path-style request to ``endpoint`` (``http://host:port``)."""
    parsed = urllib.parse.urlsplit(endpoint)
    path = "/" + bucket + ("/" + key if key else "") if bucket else "/"
    query = dict(query or {})
    signed = sign_request(
        method, parsed.netloc, path, query, headers or {}, body, access_key_id, secret_access_key, region
    )
    target = urllib.parse.quote(path, safe="/")
    if query:
        target += "?" + urllib.parse.urlencode(query, quote_via=urllib.parse.quote)
    conn = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=timeout)
    try:
        conn.request(method, target, body=body if body or method in ("PUT", "POST") else None, headers=signed)
        resp = conn.getresponse()
        return S3Response(resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read())
    finally:
        conn.close()


# ----------------------------------------------------------------------------------------------
# The server


@dataclass
class S3Server:
    proc: subprocess.Popen
    port: int
    root: Path
    data_dir: Path
    log_path: Path
    access_key_id: str = ACCESS_KEY_ID
    secret_access_key: str = SECRET_ACCESS_KEY
    region: str = REGION
    sidecar_dir: Path | None = None
    _log_file: object = field(default=None, repr=False)

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def host(self) -> str:
        """``127.0.0.1:PORT``: the form DuckDB's ENDPOINT wants (no scheme)."""
        return f"127.0.0.1:{self.port}"

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}"

    @classmethod
    def start(
        cls,
        root: Path,
        *,
        access_log: bool = False,
        metadata: str = "auto",
        timeout: float = 30.0,
        attempts: int = 3,
    ) -> "S3Server":
        """Starts versitygw on a free 127.0.0.1 port, storing buckets under ``root/data``
        (object metadata such as ETags in user xattrs; with ``metadata="sidecar"``, or "auto"
        where the filesystem has no user xattrs, in files under ``root/meta`` instead) and
        its (empty) IAM user store in ``root/iam``. With ``access_log`` every request is logged
        to ``root/access.log`` (see :meth:`access_log_lines`). Returns once its health endpoint
        answers; raises after ``timeout`` seconds."""
        versitygw, _ = build_binaries()
        root = Path(root)
        data_dir = root / "data"
        data_dir.mkdir(parents=True, exist_ok=True)
        if metadata not in ("auto", "xattr", "sidecar"):
            raise ValueError(f"metadata must be auto, xattr or sidecar, not {metadata!r}")
        sidecar = None
        if metadata == "sidecar" or (metadata == "auto" and not _xattrs_supported(data_dir)):
            sidecar = root / "meta"
            sidecar.mkdir(exist_ok=True)
        log_path = root / "versitygw.log"
        iam_dir = root / "iam"
        iam_dir.mkdir(exist_ok=True)
        last_error = ""
        for _ in range(attempts):
            port = free_port()
            cmd = [
                str(versitygw),
                "--port", f"127.0.0.1:{port}",
                "--access", ACCESS_KEY_ID,
                "--secret", SECRET_ACCESS_KEY,
                "--region", REGION,
                "--health", HEALTH_PATH,
                # A (file-backed) IAM store makes an unknown key id answer 403
                # InvalidAccessKeyId; single-account mode answers 404 XAdminUserNotFound.
                "--iam-dir", str(iam_dir),
                "--quiet",
            ]
            if access_log:
                cmd += ["--access-log", str(root / "access.log")]
            cmd.append("posix")
            if sidecar is not None:
                cmd += ["--sidecar", str(sidecar)]
            cmd.append(str(data_dir))
            # Credentials go on the command line; keep any ROOT_*/VGW_* of the caller out.
            env = {k: v for k, v in os.environ.items() if not k.startswith(("VGW_", "ROOT_"))}
            log_file = open(log_path, "ab")
            proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT, env=env,
                start_new_session=True, preexec_fn=_die_with_parent,
            )
            server = cls(proc, port, root, data_dir, log_path, sidecar_dir=sidecar, _log_file=log_file)
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                if proc.poll() is not None:
                    break
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
                try:
                    conn.request("GET", HEALTH_PATH)
                    if conn.getresponse().status == 200:
                        return server
                except OSError:
                    pass
                finally:
                    conn.close()
                time.sleep(0.05)
            server.stop()
            last_error = log_path.read_text(errors="replace")[-2000:]
        raise RuntimeError(f"versitygw did not become ready on loopback; log tail:\n{last_error}")

    def stop(self) -> None:
        _stop_process(self.proc)
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    def __enter__(self) -> "S3Server":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def access_log_lines(self) -> list[str]:
        """Lines of ``root/access.log`` (only with ``start(..., access_log=True)``)."""
        path = self.root / "access.log"
        return path.read_text(errors="replace").splitlines() if path.exists() else []

    def request(self, method: str, bucket: str = "", key: str = "", **kwargs) -> S3Response:
        """A SigV4-signed request with this server's credentials (override with
        ``access_key_id=`` / ``secret_access_key=``); see :func:`s3_request`."""
        kwargs.setdefault("access_key_id", self.access_key_id)
        kwargs.setdefault("secret_access_key", self.secret_access_key)
        kwargs.setdefault("region", self.region)
        return s3_request(self.endpoint, method, bucket, key, **kwargs)

    def create_bucket(self, name: str) -> None:
        resp = self.request("PUT", name)
        if resp.status != 200 and resp.error_code not in ("BucketAlreadyOwnedByYou",):
            raise RuntimeError(f"CreateBucket {name}: {resp.status} {resp.body[:500]!r}")


# ----------------------------------------------------------------------------------------------
# Latency proxy


@dataclass
class LatencyProxy:
    proc: subprocess.Popen
    endpoint: str  # http://127.0.0.1:PORT
    target_endpoint: str
    delay_ms: int

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def host(self) -> str:
        return urllib.parse.urlsplit(self.endpoint).netloc

    @property
    def port(self) -> int:
        return int(urllib.parse.urlsplit(self.endpoint).port)

    def stats(self) -> dict:
        """The proxy's counters: requests, max_in_flight, slowdowns."""
        import json
        import urllib.request

        with urllib.request.urlopen(f"{self.endpoint}/_proxy/stats", timeout=10) as reply:
            return json.loads(reply.read())

    def stop(self) -> None:
        _stop_process(self.proc)

    def __enter__(self) -> "LatencyProxy":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def start_latency_proxy(target_endpoint: str, delay_ms: int, *, slowdown_every: int = 0,
                        ignore_conditional: bool = False, fail_commits: str = "",
                        fail_put_before: str = "", fail_put_after_once: str = "",
                        timeout: float = 15.0) -> LatencyProxy:
    """Starts a reverse proxy on a free 127.0.0.1 port that waits ``delay_ms`` before forwarding
    each request to ``target_endpoint``, keeping the client's Host header (so SigV4 signatures
    made for the proxy's address verify at the server). Use its ``endpoint``/``host`` in place
    of the server's, with the server's credentials. ``fail_put_before``: every PUT whose path
    contains it is answered 503 unforwarded; ``fail_put_after_once``: the first such PUT lands
    and is answered 503 (scripts/latency_proxy/main.go)."""
    _, proxy_bin = build_binaries()
    proc = subprocess.Popen(
        [str(proxy_bin), "-listen", "127.0.0.1:0", "-target", target_endpoint, "-delay-ms", str(int(delay_ms)),
         "-slowdown-every", str(int(slowdown_every))] + (["-ignore-conditional"] if ignore_conditional else [])
        + (["-fail-commits", fail_commits] if fail_commits else [])
        + (["-fail-put-before", fail_put_before] if fail_put_before else [])
        + (["-fail-put-after-once", fail_put_after_once] if fail_put_after_once else []),
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=None, start_new_session=True,
        preexec_fn=_die_with_parent,
    )
    line = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not line.endswith(b"\n"):
        ready, _, _ = select.select([proc.stdout], [], [], 0.1)
        if ready:
            chunk = os.read(proc.stdout.fileno(), 256)
            if not chunk:
                break
            line += chunk
        elif proc.poll() is not None:
            break
    text = line.decode().strip()
    if not text.startswith("listening on http://"):
        _stop_process(proc)
        raise RuntimeError(f"latency proxy did not start (output {text!r}, exit {proc.poll()})")
    proc.stdout.close()  # it prints nothing else; logs go to stderr
    return LatencyProxy(proc, text.removeprefix("listening on "), target_endpoint, int(delay_ms))


# ----------------------------------------------------------------------------------------------
# Client configuration


def duckdb_secret_sql(server, scope: str, name: str | None = None) -> str:
    """``CREATE SECRET`` for DuckDB httpfs, path-style, plain HTTP, limited to ``scope``
    (e.g. ``'s3://bucket/'``; a path outside it falls back to AWS). ``server`` may be an
    :class:`S3Server` or a :class:`LatencyProxy` (which uses the fixed test credentials).
    ``name`` makes it a named ``CREATE OR REPLACE SECRET``."""

    def lit(value: str) -> str:
        return "'" + value.replace("'", "''") + "'"

    key_id = getattr(server, "access_key_id", ACCESS_KEY_ID)
    secret = getattr(server, "secret_access_key", SECRET_ACCESS_KEY)
    region = getattr(server, "region", REGION)
    head = f"CREATE OR REPLACE SECRET {name} (" if name else "CREATE SECRET ("
    return (
        head
        + f"TYPE s3, KEY_ID {lit(key_id)}, SECRET {lit(secret)}, REGION {lit(region)}, "
        + f"ENDPOINT {lit(server.host)}, URL_STYLE 'path', USE_SSL false, SCOPE {lit(scope)})"
    )


def pyiceberg_s3_properties(server) -> dict[str, str]:
    """FileIO properties for pyiceberg (pyarrow FileIO) and iceberg-rust/opendal."""
    return {
        "s3.endpoint": server.endpoint,
        "s3.access-key-id": getattr(server, "access_key_id", ACCESS_KEY_ID),
        "s3.secret-access-key": getattr(server, "secret_access_key", SECRET_ACCESS_KEY),
        "s3.region": getattr(server, "region", REGION),
        "s3.path-style-access": "true",
    }


def pyarrow_s3_filesystem(server):
    """A ``pyarrow.fs.S3FileSystem`` pointed at ``server`` (plain HTTP, path-style)."""
    from pyarrow import fs

    return fs.S3FileSystem(
        access_key=getattr(server, "access_key_id", ACCESS_KEY_ID),
        secret_key=getattr(server, "secret_access_key", SECRET_ACCESS_KEY),
        region=getattr(server, "region", REGION),
        endpoint_override=server.host,
        scheme="http",
        force_virtual_addressing=False,
    )


def httpfs_extension_path() -> Path:
    """The httpfs extension file shipped by the ``duckdb-extension-httpfs`` wheel, for an offline
    ``INSTALL '<path>'`` (after ``SET extension_directory`` and
    ``SET autoinstall_known_extensions = false``)."""
    import duckdb_extension_httpfs  # type: ignore

    base = Path(duckdb_extension_httpfs.__file__).parent
    found = sorted(glob.glob(str(base / "extensions" / "*" / "httpfs.duckdb_extension")))
    if not found:
        raise FileNotFoundError(f"no httpfs.duckdb_extension under {base}")
    return Path(found[-1])


if __name__ == "__main__":  # manual use: python s3_server.py ROOT  → runs until Ctrl-C
    root = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/lakehouse-s3")
    with S3Server.start(root) as srv:
        print(f"endpoint {srv.endpoint} pid {srv.pid} key {srv.access_key_id} secret {srv.secret_access_key}")
        try:
            signal.pause()
        except KeyboardInterrupt:
            pass
