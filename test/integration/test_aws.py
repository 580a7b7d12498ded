"""Iceberg tables in the AWS Glue Data Catalog, and the AWS credential chain, against moto's server
on loopback (moto_server.py: S3, STS, IAM and Glue in one process).

pyiceberg's Glue catalog (a writer we did not write) creates and appends the tables; our
maintenance then runs with moto's authentication switched on, so every request of ours — Glue's
JSON API signed by our SigV4 signer, S3 through object_store, the data through DuckDB's httpfs —
must carry a key moto issued and a matching signature. Credentials come from what AWS users have:
catalog properties, a profile that assumes a role (`role_arn` + `source_profile`), a web identity
token file (EKS), a `credential_process` whose short-lived credentials are fetched again during a
run. After, pyiceberg (through Glue) and DuckDB's iceberg extension read the same rows.

The writers run with authentication off (pyarrow's S3 client signs listings in a way moto's check
does not reproduce); it is on for everything of ours.
"""

from __future__ import annotations

import contextlib
import os
import stat

import pyarrow as pa
import pytest

from conftest import lakehouse_extension_path, new_connection, pip_extension_path, run_paused_before_commit
from moto_server import REGION, MotoServer

SMALL = "small_file_threshold_mb := 1, target_file_size_mb := 2"
SCHEMA = pa.schema([("id", pa.int64()), ("day", pa.string()), ("amount", pa.float64())])


@pytest.fixture(scope="module")
def moto(tmp_path_factory):
    server = MotoServer.start(tmp_path_factory.mktemp("moto") / "moto.log")
    server.key_id, server.secret = server.create_user("maintainer")
    server.role_arn = server.create_role("maintenance")
    server.web_role_arn = server.create_role("eks-maintenance", web_identity=True)
    server.client("s3").create_bucket(Bucket="lake")
    yield server
    server.stop()


@contextlib.contextmanager
def authenticated(moto: MotoServer):
    """moto refuses any request not signed with a key it issued, until the block ends."""
    moto.enforce_auth()
    try:
        yield
    finally:
        moto.relax_auth()


@pytest.fixture
def aws_env(moto, monkeypatch, tmp_path):
    """A process environment with no AWS keys of its own: only what each test gives."""
    for key in list(os.environ):
        if key.startswith("AWS_") or key.startswith("PYICEBERG_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_REGION", REGION)
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto.endpoint)
    monkeypatch.setenv("PYICEBERG_HOME", str(tmp_path))
    return monkeypatch


def glue_properties(moto: MotoServer, keys: bool = True) -> dict[str, str]:
    props = {"type": "glue", "glue.endpoint": moto.endpoint, "glue.region": REGION,
             "s3.endpoint": moto.endpoint, "s3.region": REGION, "warehouse": "s3://lake/wh"}
    if keys:
        props |= {"glue.access-key-id": moto.key_id, "glue.secret-access-key": moto.secret,
                  "s3.access-key-id": moto.key_id, "s3.secret-access-key": moto.secret}
    return props


def configure(env, name: str, props: dict[str, str]) -> None:
    for key, value in props.items():
        env.setenv(f"PYICEBERG_CATALOG__{name.upper()}__{key.upper().replace('.', '__').replace('-', '_')}", value)


def writer_catalog(moto: MotoServer):
    from pyiceberg.catalog import load_catalog

    return load_catalog("writer", **glue_properties(moto))


def fragmented(moto: MotoServer, namespace: str, name: str, appends: int = 6):
    """A partitioned table of small files, written by pyiceberg through Glue."""
    from pyiceberg.transforms import IdentityTransform

    catalog = writer_catalog(moto)
    with contextlib.suppress(Exception):
        catalog.create_namespace(namespace, {"location": f"s3://lake/wh/{namespace}"})
    table = catalog.create_table(f"{namespace}.{name}", SCHEMA)
    with table.update_spec() as spec:
        spec.add_field("day", IdentityTransform(), "day")
    for i in range(appends):
        rows = [{"id": i * 100 + j, "day": f"2026-10-0{1 + j % 2}", "amount": j / 4} for j in range(100)]
        table.append(pa.Table.from_pylist(rows, schema=SCHEMA))
    return table


def rows_pyiceberg(moto: MotoServer, identifier: str) -> list[tuple]:
    table = writer_catalog(moto).load_table(identifier)
    return sorted(tuple(r.values()) for r in table.scan().to_arrow().to_pylist())


def rows_duckdb(moto: MotoServer, identifier: str) -> list[tuple]:
    """DuckDB's iceberg extension on the metadata Glue points at: an independent reader."""
    location = writer_catalog(moto).load_table(identifier).metadata_location
    con = new_connection()
    for name in ("httpfs", "avro", "iceberg"):
        con.execute(f"LOAD '{pip_extension_path(name)}'")
    host = moto.endpoint.removeprefix("http://")
    con.execute(f"CREATE SECRET m (TYPE s3, KEY_ID '{moto.key_id}', SECRET '{moto.secret}', ENDPOINT '{host}', "
                f"USE_SSL false, URL_STYLE 'path', REGION '{REGION}')")
    rows = sorted(con.execute(f"SELECT id, day, amount FROM iceberg_scan('{location}')").fetchall())
    con.close()
    return rows


@pytest.fixture
def lh(aws_env):
    connection = new_connection()
    connection.execute(f"LOAD '{pip_extension_path('httpfs')}'")
    connection.execute(f"LOAD '{lakehouse_extension_path()}'")
    yield connection
    connection.close()


def test_the_gate_maintains_a_glue_table_written_by_pyiceberg(moto, aws_env, lh):
    fragmented(moto, "sales", "orders")
    before = rows_pyiceberg(moto, "sales.orders")
    assert before == rows_duckdb(moto, "sales.orders") and len(before) == 600
    glue = moto.client("glue")
    version_before = glue.get_table(DatabaseName="sales", Name="orders")["Table"]["VersionId"]
    base = writer_catalog(moto).load_table("sales.orders").metadata_location
    configure(aws_env, "prod", glue_properties(moto))
    with authenticated(moto):
        rows = lh.execute(f"SELECT partition, verdict, files_before, files_after FROM lakehouse_gate('prod.sales.orders', "
                          f"{SMALL}, snapshot_retention_days := 0, retain_last := 1) ORDER BY partition").fetchall()
    assert [r[1] for r in rows] == ["compacted", "compacted"], rows
    assert all(r[2] == 6 and r[3] == 1 for r in rows), rows
    entry = glue.get_table(DatabaseName="sales", Name="orders")["Table"]
    table = writer_catalog(moto).load_table("sales.orders")
    assert entry["Parameters"]["metadata_location"] == table.metadata_location != base
    assert entry["Parameters"]["table_type"] == "ICEBERG"
    assert entry["Parameters"]["previous_metadata_location"].endswith(".metadata.json")
    assert entry["VersionId"] != version_before
    assert len(table.snapshots()) == 1 and table.current_snapshot().summary.operation.value == "replace"
    assert rows_pyiceberg(moto, "sales.orders") == before
    assert rows_duckdb(moto, "sales.orders") == before
    live = {f["file_path"] for f in table.inspect.files().to_pylist()}
    assert len(live) == 2
    listed = {f"s3://lake/{o['Key']}" for o in moto.client("s3").list_objects_v2(Bucket="lake", Prefix="wh/sales/orders/data")
              .get("Contents", [])}
    assert live <= listed


def test_a_pyiceberg_commit_through_glue_meanwhile_is_a_conflict_we_rebase_on(moto, aws_env, lh):
    fragmented(moto, "sales", "raced", appends=4)
    before = rows_pyiceberg(moto, "sales.raced")
    configure(aws_env, "prod", glue_properties(moto))
    late = [{"id": 9_000 + i, "day": "2026-10-03", "amount": 1.0} for i in range(10)]

    def run():
        return lh.execute(f"SELECT partition, verdict FROM lakehouse_compact('prod.sales.raced', {SMALL})").fetchall()

    def concurrent():
        writer_catalog(moto).load_table("sales.raced").append(pa.Table.from_pylist(late, schema=SCHEMA))

    # Held back long enough for pyiceberg's whole commit: moto's UpdateTable ignores VersionId, so
    # a pyiceberg commit that read the table before ours and wrote after would overwrite ours
    # (real Glue refuses it); the race is kept out of the test, which is about ours.
    outcome = run_paused_before_commit(run, concurrent, lambda: True, aws_env, pause_ms=10_000)
    assert outcome["paused"] and "error" not in outcome, outcome
    table = writer_catalog(moto).load_table("sales.raced")
    ops = [s.summary.operation.value for s in sorted(table.snapshots(), key=lambda s: s.sequence_number)]
    assert ops[-2:] == ["append", "replace"], ops
    assert rows_pyiceberg(moto, "sales.raced") == sorted(before + [tuple(r.values()) for r in late])


def test_a_profile_that_assumes_a_role_reads_and_commits(moto, aws_env, lh, tmp_path):
    fragmented(moto, "team", "assumed", appends=3)
    before = rows_pyiceberg(moto, "team.assumed")
    (tmp_path / "credentials").write_text(
        f"[base]\naws_access_key_id = {moto.key_id}\naws_secret_access_key = {moto.secret}\n")
    (tmp_path / "config").write_text(
        f"[profile maintenance]\nrole_arn = {moto.role_arn}\nsource_profile = base\nregion = {REGION}\n")
    aws_env.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    aws_env.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    configure(aws_env, "prod", glue_properties(moto, keys=False) | {"client.profile-name": "maintenance"})
    with authenticated(moto):
        rows = lh.execute(f"SELECT verdict FROM lakehouse_compact('prod.team.assumed', {SMALL})").fetchall()
    assert [r[0] for r in rows] == ["compacted", "compacted"], rows
    assert rows_pyiceberg(moto, "team.assumed") == before == rows_duckdb(moto, "team.assumed")
    assert writer_catalog(moto).load_table("team.assumed").current_snapshot().summary.operation.value == "replace"


def test_a_web_identity_token_file_assumes_its_role(moto, aws_env, lh, tmp_path):
    fragmented(moto, "team", "federated", appends=3)
    before = rows_pyiceberg(moto, "team.federated")
    token = tmp_path / "token"
    token.write_text("eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQ6bGFrZSJ9.c2ln")
    aws_env.setenv("AWS_WEB_IDENTITY_TOKEN_FILE", str(token))
    aws_env.setenv("AWS_ROLE_ARN", moto.web_role_arn)
    aws_env.setenv("AWS_ROLE_SESSION_NAME", "lakehouse-test")
    configure(aws_env, "prod", glue_properties(moto, keys=False))
    with authenticated(moto):
        rows = lh.execute(f"SELECT verdict FROM lakehouse_compact('prod.team.federated', {SMALL})").fetchall()
    assert [r[0] for r in rows] == ["compacted", "compacted"], rows
    assert rows_pyiceberg(moto, "team.federated") == before == rows_duckdb(moto, "team.federated")


def test_short_lived_credentials_are_fetched_again_during_a_run(moto, aws_env, lh, tmp_path):
    """A credential_process whose sessions expire within the refresh margin: every use of the
    credentials fetches them again, and the run (Glue, S3 and DuckDB's reads and writes) succeeds."""
    fragmented(moto, "team", "refreshed", appends=3)
    before = rows_pyiceberg(moto, "team.refreshed")
    calls = tmp_path / "calls"
    process = tmp_path / "credentials.sh"
    process.write_text(
        "#!/bin/sh\n"
        f"echo call >> '{calls}'\n"
        "expiry=$(date -u -d '+2 minutes' +%Y-%m-%dT%H:%M:%SZ)\n"
        f"printf '{{\"Version\": 1, \"AccessKeyId\": \"{moto.key_id}\", \"SecretAccessKey\": \"{moto.secret}\", "
        "\"Expiration\": \"%s\"}' \"$expiry\"\n")
    process.chmod(process.stat().st_mode | stat.S_IXUSR)
    (tmp_path / "config").write_text(f"[profile short]\ncredential_process = {process}\nregion = {REGION}\n")
    aws_env.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    configure(aws_env, "prod", glue_properties(moto, keys=False) | {"client.profile-name": "short"})
    with authenticated(moto):
        rows = lh.execute(f"SELECT verdict FROM lakehouse_gate('prod.team.refreshed', {SMALL}, "
                          "snapshot_retention_days := 0, retain_last := 1)").fetchall()
    assert [r[0] for r in rows] == ["compacted", "compacted"], rows
    assert len(calls.read_text().splitlines()) >= 3, "the credentials were fetched again as they neared expiry"
    assert rows_pyiceberg(moto, "team.refreshed") == before == rows_duckdb(moto, "team.refreshed")


def test_a_wrong_key_names_the_service_and_its_error_code_never_the_secret(moto, aws_env, lh):
    fragmented(moto, "team", "guarded", appends=2)
    wrong = "wJalrXUtnFEMIwrongSECRETkey0000000000000"
    props = glue_properties(moto) | {"glue.secret-access-key": wrong, "s3.secret-access-key": wrong}
    configure(aws_env, "prod", props)
    with authenticated(moto):
        with pytest.raises(Exception) as glue_error:
            lh.execute(f"SELECT * FROM lakehouse_compact('prod.team.guarded', {SMALL})").fetchall()
        message = str(glue_error.value)
        assert "Glue catalog 'prod'" in message and "SignatureDoesNotMatch" in message, message
        assert wrong not in message and moto.secret not in message
        # The right Glue key, a wrong S3 key: the error names the file and S3's code.
        configure(aws_env, "prod", props | {"glue.secret-access-key": moto.secret})
        with pytest.raises(Exception) as s3_error:
            lh.execute("SELECT * FROM lakehouse_fragmentation('prod.team.guarded')").fetchall()
    message = str(s3_error.value)
    assert "s3://lake/wh/team/guarded/metadata/" in message and "SignatureDoesNotMatch" in message, message
    assert wrong not in message and moto.secret not in message


def test_a_glue_table_that_is_not_iceberg_is_refused_by_name(moto, aws_env, lh):
    glue = moto.client("glue")
    with contextlib.suppress(Exception):
        glue.create_database(DatabaseInput={"Name": "hive"})
    glue.create_table(DatabaseName="hive", TableInput={
        "Name": "legacy", "TableType": "EXTERNAL_TABLE", "Parameters": {"classification": "parquet"},
        "StorageDescriptor": {"Location": "s3://lake/hive/legacy"}})
    configure(aws_env, "prod", glue_properties(moto))
    with authenticated(moto):
        with pytest.raises(Exception, match=r"'hive.legacy' is not an Iceberg table"):
            lh.execute("SELECT * FROM lakehouse_fragmentation('prod.hive.legacy')").fetchall()
        with pytest.raises(Exception, match=r"(?s)EntityNotFoundException|not found"):
            lh.execute("SELECT * FROM lakehouse_fragmentation('prod.hive.missing')").fetchall()


def test_spark_through_icebergs_glue_catalog_reads_the_same_after_our_gate(moto, aws_env, lh, spark):
    """Spark (the reference implementation) with Iceberg's own GlueCatalog and S3FileIO, its AWS SDK
    pointed at moto, writes a partitioned table; after our gate (with authentication on) Spark
    reads the same rows, sees one `replace` snapshot, and writes on top."""
    jvm = spark._jvm
    jvm.java.lang.System.setProperty("aws.accessKeyId", moto.key_id)
    jvm.java.lang.System.setProperty("aws.secretAccessKey", moto.secret)
    jvm.java.lang.System.setProperty("aws.region", REGION)
    settings = {
        "": "org.apache.iceberg.spark.SparkCatalog",
        ".catalog-impl": "org.apache.iceberg.aws.glue.GlueCatalog",
        ".glue.endpoint": moto.endpoint,
        ".client.region": REGION,
        ".warehouse": "s3://lake/spark",
        ".io-impl": "org.apache.iceberg.aws.s3.S3FileIO",
        ".s3.endpoint": moto.endpoint,
        ".s3.path-style-access": "true",
        ".s3.access-key-id": moto.key_id,
        ".s3.secret-access-key": moto.secret,
        # Every statement sees the table as Glue has it now (we commit behind Spark's back).
        ".cache-enabled": "false",
    }
    for key, value in settings.items():
        spark.conf.set(f"spark.sql.catalog.glue{key}", value)
    spark.sql("CREATE NAMESPACE IF NOT EXISTS glue.sparkdb")
    spark.sql("CREATE TABLE glue.sparkdb.events (id BIGINT, day DATE, name STRING) USING iceberg "
              "PARTITIONED BY (day) TBLPROPERTIES ('format-version' = '2')")
    for b in range(5):
        spark.sql(f"INSERT INTO glue.sparkdb.events SELECT id + {b * 1000}, "
                  "date_add(DATE'2026-10-01', CAST(id % 2 AS INT)), concat('s', id) FROM range(200)")
    spark_rows = lambda: sorted(tuple(r) for r in spark.sql("SELECT * FROM glue.sparkdb.events").collect())  # noqa: E731
    before = spark_rows()
    assert len(before) == 1000
    configure(aws_env, "prod", glue_properties(moto))
    with authenticated(moto):
        got = lh.execute(f"SELECT verdict, files_after FROM lakehouse_gate('prod.sparkdb.events', {SMALL}, "
                         "snapshot_retention_days := 0, retain_last := 1)").fetchall()
    assert got == [("compacted", 1), ("compacted", 1)], got
    assert spark_rows() == before
    assert [r.operation for r in spark.sql("SELECT operation FROM glue.sparkdb.events.snapshots").collect()] == [
        "replace"]
    assert rows_pyiceberg(moto, "sparkdb.events") == before
    spark.sql("INSERT INTO glue.sparkdb.events VALUES (99999, DATE'2026-10-05', 'after')")
    assert len(spark_rows()) == 1001


@pytest.mark.parametrize("kind", ["ecs", "imds"])
def test_container_and_instance_credentials_serve_a_run(moto, aws_env, lh, kind):
    """ECS's container credentials endpoint and EC2's IMDSv2, emulated on loopback (aws_metadata.py),
    hand out a role's session: the chain finds it when nothing else is configured."""
    from aws_metadata import CredentialsEndpoint

    name = f"from_{kind}"
    fragmented(moto, "team", name, appends=3)
    before = rows_pyiceberg(moto, f"team.{name}")
    session = moto.client("sts", key_id=moto.key_id, secret=moto.secret).assume_role(
        RoleArn=moto.role_arn, RoleSessionName=f"lakehouse-{kind}")["Credentials"]
    endpoint = CredentialsEndpoint(session, kind)
    try:
        if kind == "ecs":
            aws_env.setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", f"{endpoint.url}/v2/credentials/lakehouse")
            aws_env.setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN", endpoint.authorization)
        else:
            aws_env.setenv("AWS_EC2_METADATA_DISABLED", "false")
            aws_env.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", endpoint.url)
        configure(aws_env, "prod", glue_properties(moto, keys=False))
        with authenticated(moto):
            rows = lh.execute(f"SELECT verdict FROM lakehouse_compact('prod.team.{name}', {SMALL})").fetchall()
    finally:
        endpoint.stop()
    assert [r[0] for r in rows] == ["compacted", "compacted"], rows
    assert endpoint.served >= 1 and endpoint.refused == 0
    assert rows_pyiceberg(moto, f"team.{name}") == before == rows_duckdb(moto, f"team.{name}")
