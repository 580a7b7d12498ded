//! A Spark Connect client for the one thing the Spark executor asks of Spark: run a SQL
//! statement (`CALL <catalog>.system.rewrite_data_files(…)`) and return its result rows.
//!
//! Spark Connect is gRPC (`spark.connect.SparkConnectService/ExecutePlan`, server streaming).
//! The transport is tonic's (HTTP/2, keep-alives that notice a dead server); the messages are the
//! handful in [`proto`], written with prost's derive. Why not a Spark Connect client crate: the
//! Rust ones (`spark-connect-rs`) generate the whole protocol, pin their own arrow (we share
//! arrow 58 with DuckDB and iceberg-rust) and have been unmaintained since Spark 3.5; the part
//! of the protocol a SQL statement needs has been stable since Spark 3.4.
//!
//! What can go wrong is told apart, because the executor acts on it ([`Failure`]): Spark not
//! reachable (nothing was sent), Spark refused or failed the statement (it answered with an
//! error: nothing of it was committed, as `rewrite_data_files` commits once, at the end), or the
//! call broke off after it was sent (the outcome is unknown: Spark may still commit).
//!
//! `spark_remote` is Spark's own connection string, `sc://host:port/;user_id=…;session_id=…`
//! (port 15002 by default). A `token` or `use_ssl=true` needs TLS, which this version does not
//! speak: it is refused by name rather than sent in clear text. The host and port are the only
//! parts ever shown in a message.

pub mod predicate;
pub mod proto;

use std::time::Duration;

use arrow_array::RecordBatch;
use tonic::codec::ProstCodec;
use tonic::transport::{Channel, Endpoint};

use crate::error::{Error, Result};
use proto::{Command, ExecutePlanRequest, ExecutePlanResponse, Plan, Relation, Sql, SqlCommand, UserContext};

/// Spark Connect's default port.
pub const DEFAULT_PORT: u16 = 15002;
/// How long connecting may take before Spark counts as unreachable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// HTTP/2 pings while a statement runs: a server that stops answering them is gone.
const KEEP_ALIVE_INTERVAL: Duration = Duration::from_secs(20);
/// See [`KEEP_ALIVE_INTERVAL`].
const KEEP_ALIVE_TIMEOUT: Duration = Duration::from_secs(20);
/// How often a running statement checks for Ctrl-C.
const INTERRUPT_POLL: Duration = Duration::from_millis(250);
/// The gRPC method.
const EXECUTE_PLAN: &str = "/spark.connect.SparkConnectService/ExecutePlan";

/// A parsed `spark_remote`.
#[derive(Debug, Clone, PartialEq)]
pub struct Remote {
    /// Host name or address.
    pub host: String,
    /// Port.
    pub port: u16,
    /// `user_id` parameter (default: the OS user, else `lakehouse`).
    pub user_id: String,
    /// `session_id` parameter (default: a new UUID per call of a SQL function).
    pub session_id: Option<String>,
}

impl Remote {
    /// Parses `sc://host[:port][/;key=value…]`.
    pub fn parse(text: &str) -> Result<Self> {
        let invalid = |why: &str| {
            Error::invalid(format!("spark_remote {why} (expected sc://host:port, e.g. sc://localhost:15002)"))
        };
        let rest = text.trim().strip_prefix("sc://").ok_or_else(|| invalid("must start with sc://"))?;
        let (authority, params) = match rest.split_once('/') {
            Some((authority, params)) => (authority, params),
            None => (rest, ""),
        };
        let (host, port) = match authority.rsplit_once(':') {
            Some((host, port)) if !host.ends_with(']') || host.starts_with('[') => {
                (host, port.parse::<u16>().map_err(|_| invalid("has a port that is not a number from 1 to 65535"))?)
            }
            _ => (authority, DEFAULT_PORT),
        };
        if host.is_empty() || port == 0 || host.contains(['@', '?', '#', ' ']) {
            return Err(invalid("has no valid host and port"));
        }
        let mut remote = Remote {
            host: host.to_string(),
            port,
            user_id: std::env::var("USER").ok().filter(|u| !u.is_empty()).unwrap_or_else(|| "lakehouse".into()),
            session_id: None,
        };
        for param in params.split(';').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, value) = param.split_once('=').ok_or_else(|| invalid("has a parameter without '='"))?;
            match key.trim() {
                "user_id" if !value.trim().is_empty() => remote.user_id = value.trim().to_string(),
                "session_id" => {
                    let id = uuid::Uuid::parse_str(value.trim())
                        .map_err(|_| invalid("has a session_id that is not a UUID"))?;
                    remote.session_id = Some(id.to_string());
                }
                "use_ssl" if value.trim().eq_ignore_ascii_case("false") => {}
                "use_ssl" | "token" => {
                    return Err(Error::new(
                        crate::error::ErrorKind::Unsupported,
                        "spark_remote asks for TLS (use_ssl=true or a token), which this version does not speak; \
                         reach Spark Connect over loopback or a private network (an SSH tunnel or a TLS-terminating \
                         proxy on this host)",
                    ));
                }
                // Client-side settings of Spark's own clients that change nothing here.
                "user_agent" | "grpc_max_message_size" => {}
                other => return Err(invalid(&format!("has an unknown parameter '{other}'"))),
            }
        }
        Ok(remote)
    }

    /// `host:port`, the only part of the remote any message shows.
    pub fn describe(&self) -> String {
        format!("Spark Connect at {}:{}", self.host, self.port)
    }

    fn uri(&self) -> String {
        if self.host.contains(':') && !self.host.starts_with('[') {
            format!("http://[{}]:{}", self.host, self.port)
        } else {
            format!("http://{}:{}", self.host, self.port)
        }
    }
}

/// Why a statement did not run to completion.
#[derive(Debug, Clone, PartialEq)]
pub enum Failure {
    /// No connection: nothing was sent.
    Unreachable(String),
    /// Spark answered with an error: the statement failed (a `rewrite_data_files` without partial
    /// progress commits nothing then).
    Failed(String),
    /// The call broke off after it was sent (connection lost, Ctrl-C): Spark may still commit.
    Unknown(String),
}

impl Failure {
    /// The message, whatever the kind.
    pub fn message(&self) -> &str {
        match self {
            Failure::Unreachable(m) | Failure::Failed(m) | Failure::Unknown(m) => m,
        }
    }
}

/// One Spark Connect session.
pub struct Session {
    remote: Remote,
    session_id: String,
    channel: Option<Channel>,
}

impl Session {
    /// A session on `remote` (connected at the first statement).
    pub fn new(remote: &Remote) -> Self {
        let session_id = remote.session_id.clone().unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        Self { remote: remote.clone(), session_id, channel: None }
    }

    /// The request that runs `plan` in this session.
    fn request(&self, plan: Plan, operation_id: &str) -> ExecutePlanRequest {
        let user = self.remote.user_id.clone();
        ExecutePlanRequest {
            session_id: self.session_id.clone(),
            user_context: Some(UserContext { user_id: user.clone(), user_name: user }),
            plan: Some(plan),
            client_type: Some(format!("lakehouse/{}", env!("CARGO_PKG_VERSION"))),
            operation_id: Some(operation_id.to_string()),
            tags: vec!["lakehouse".into()],
        }
    }

    /// Connects (once), then runs `statement` and returns its result rows. `operation_id` names
    /// the operation on the server (a UUID).
    pub fn sql(&mut self, statement: &str, operation_id: &str) -> std::result::Result<Vec<RecordBatch>, Failure> {
        let remote = self.remote.clone();
        let channel = match &self.channel {
            Some(channel) => channel.clone(),
            None => {
                let channel =
                    crate::runtime::block_on(connect(&remote)).map_err(|e| Failure::Unreachable(e.to_string()))??;
                self.channel = Some(channel.clone());
                channel
            }
        };
        let command = Command { sql_command: Some(SqlCommand { sql: statement.to_string() }) };
        let request = self.request(Plan { root: None, command: Some(command) }, operation_id);
        let batches = crate::runtime::block_on(execute(channel.clone(), request, &remote))
            .map_err(|e| Failure::Unknown(e.to_string()))??;
        match batches {
            Answer::Rows(rows) => Ok(rows),
            // The statement was a query: the server hands it back to be run as a relation.
            Answer::Query(query) => {
                let relation = Relation { sql: Some(Sql { query }), local_relation: None };
                let request =
                    self.request(Plan { root: Some(relation), command: None }, &uuid::Uuid::new_v4().to_string());
                match crate::runtime::block_on(execute(channel, request, &remote))
                    .map_err(|e| Failure::Unknown(e.to_string()))??
                {
                    Answer::Rows(rows) => Ok(rows),
                    Answer::Query(_) => Err(Failure::Failed(format!(
                        "{} answered a query with another query instead of rows",
                        remote.describe()
                    ))),
                }
            }
        }
    }
}

async fn connect(remote: &Remote) -> std::result::Result<Channel, Failure> {
    let endpoint = Endpoint::from_shared(remote.uri())
        .map_err(|_| Failure::Unreachable(format!("{} is not a valid address", remote.describe())))?
        .connect_timeout(CONNECT_TIMEOUT)
        .http2_keep_alive_interval(KEEP_ALIVE_INTERVAL)
        .keep_alive_timeout(KEEP_ALIVE_TIMEOUT)
        .keep_alive_while_idle(true);
    endpoint
        .connect()
        .await
        .map_err(|e| Failure::Unreachable(format!("{} is unreachable: {}", remote.describe(), transport_cause(&e))))
}

/// The innermost cause of a transport error (tonic's own text is only "transport error").
fn transport_cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut cause: &dyn std::error::Error = error;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}

enum Answer {
    Rows(Vec<RecordBatch>),
    Query(String),
}

async fn execute(
    channel: Channel,
    request: ExecutePlanRequest,
    remote: &Remote,
) -> std::result::Result<Answer, Failure> {
    let mut grpc = tonic::client::Grpc::new(channel);
    let path = tonic::codegen::http::uri::PathAndQuery::from_static(EXECUTE_PLAN);
    let call = async {
        grpc.ready().await.map_err(|e| {
            Failure::Unreachable(format!("{} is unreachable: {}", remote.describe(), transport_cause(&e)))
        })?;
        let codec = ProstCodec::<ExecutePlanRequest, ExecutePlanResponse>::default();
        let mut stream = grpc
            .server_streaming(tonic::Request::new(request), path, codec)
            .await
            .map_err(|status| status_failure(&status, remote))?
            .into_inner();
        let mut rows = Vec::new();
        let mut query = None;
        while let Some(message) = stream.message().await.map_err(|status| status_failure(&status, remote))? {
            if let Some(batch) = &message.arrow_batch {
                rows.extend(decode_arrow(&batch.data).map_err(Failure::Failed)?);
            }
            if let Some(relation) = message.sql_command_result.and_then(|r| r.relation) {
                if let Some(data) = relation.local_relation.and_then(|l| l.data) {
                    rows.extend(decode_arrow(&data).map_err(Failure::Failed)?);
                } else if let Some(sql) = relation.sql {
                    query = Some(sql.query);
                }
            }
        }
        Ok(match query {
            Some(query) if rows.is_empty() => Answer::Query(query),
            _ => Answer::Rows(rows),
        })
    };
    tokio::pin!(call);
    loop {
        tokio::select! {
            result = &mut call => return result,
            _ = tokio::time::sleep(INTERRUPT_POLL) => {
                if crate::interrupt::check("").is_err() {
                    // Dropping the call cancels the HTTP/2 stream; the server then interrupts the
                    // operation, but a commit already under way may still land.
                    return Err(Failure::Unknown(format!(
                        "interrupted while {} was running the statement; Spark may still commit it",
                        remote.describe()
                    )));
                }
            }
        }
    }
}

/// A gRPC status as a [`Failure`]: an answer of Spark's own (an error it raised) is `Failed`;
/// a broken transport after the request went out is `Unknown`.
fn status_failure(status: &tonic::Status, remote: &Remote) -> Failure {
    use tonic::Code;
    let message = status.message().trim();
    // Spark's errors carry google.rpc.ErrorInfo details (the exception class); a broken
    // connection does not.
    let from_spark = !status.details().is_empty()
        || status.metadata().contains_key("grpc-status-details-bin")
        || !matches!(status.code(), Code::Unknown | Code::Unavailable | Code::Cancelled | Code::DeadlineExceeded);
    if from_spark {
        Failure::Failed(format!("{} failed the statement: {message}", remote.describe()))
    } else {
        Failure::Unknown(format!(
            "the call to {} broke off ({:?}: {message}); Spark may still commit what it was doing",
            remote.describe(),
            status.code()
        ))
    }
}

/// Record batches from an Arrow IPC stream.
fn decode_arrow(data: &[u8]) -> std::result::Result<Vec<RecordBatch>, String> {
    if data.is_empty() {
        return Ok(Vec::new());
    }
    let reader = arrow_ipc::reader::StreamReader::try_new(std::io::Cursor::new(data), None)
        .map_err(|e| format!("Spark's result is not an Arrow stream: {e}"))?;
    reader.collect::<std::result::Result<Vec<_>, _>>().map_err(|e| format!("Spark's result cannot be read: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remotes_parse_like_sparks_connection_string() {
        let r = Remote::parse("sc://localhost").unwrap();
        assert_eq!((r.host.as_str(), r.port, r.session_id.clone()), ("localhost", DEFAULT_PORT, None));
        let r =
            Remote::parse("sc://10.0.0.5:15003/;user_id=etl;session_id=2f8b6f3a-9a3e-4f1e-8a43-1b1f7b1c9d10").unwrap();
        assert_eq!((r.host.as_str(), r.port, r.user_id.as_str()), ("10.0.0.5", 15003, "etl"));
        assert_eq!(r.session_id.as_deref(), Some("2f8b6f3a-9a3e-4f1e-8a43-1b1f7b1c9d10"));
        assert_eq!(r.describe(), "Spark Connect at 10.0.0.5:15003");
        assert!(Remote::parse("sc://h:1/;use_ssl=false").is_ok());
        for bad in [
            "",
            "http://h:15002",
            "sc://",
            "sc://:15002",
            "sc://h:x",
            "sc://h:0",
            "sc://h:99999",
            "sc://h/;x=1",
            "sc://h/;session_id=1",
            "sc://u@h",
        ] {
            assert!(Remote::parse(bad).is_err(), "{bad}");
        }
        // A token is refused without echoing it.
        let e = Remote::parse("sc://h/;token=s3cret").unwrap_err().to_string();
        assert!(e.contains("TLS") && !e.contains("s3cret"), "{e}");
    }

    #[test]
    fn a_closed_port_is_unreachable_and_nothing_is_sent() {
        // Bind and drop: the port is closed for the call.
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let remote = Remote::parse(&format!("sc://127.0.0.1:{port}")).unwrap();
        match Session::new(&remote).sql("SELECT 1", &uuid::Uuid::new_v4().to_string()) {
            Err(Failure::Unreachable(m)) => assert!(m.contains(&format!("127.0.0.1:{port} is unreachable")), "{m}"),
            other => panic!("{other:?}"),
        }
    }
}
