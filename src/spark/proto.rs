//! The few Spark Connect messages the executor sends and reads, written out with prost's derive
//! macros instead of generated from Spark's `.proto` files (no `protoc` at build time, no
//! vendored protocol sources). Field numbers are Spark Connect's (`spark/connect/base.proto`,
//! `commands.proto`, `relations.proto`; unchanged from Spark 3.4 to 4.0). A `oneof` member is an
//! optional field on the wire, so each one we use is an optional field here; members we never
//! send are left out, and those the server sends that we do not read are skipped by prost.

/// `spark.connect.ExecutePlanRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ExecutePlanRequest {
    /// The client's session (a UUID string; the server keeps one Spark session per id).
    #[prost(string, tag = "1")]
    pub session_id: String,
    /// Who runs it.
    #[prost(message, optional, tag = "2")]
    pub user_context: Option<UserContext>,
    /// What to run.
    #[prost(message, optional, tag = "3")]
    pub plan: Option<Plan>,
    /// Shown in Spark's UI and logs.
    #[prost(string, optional, tag = "4")]
    pub client_type: Option<String>,
    /// A UUID the server names the operation by (also in its errors and logs).
    #[prost(string, optional, tag = "6")]
    pub operation_id: Option<String>,
    /// Operation tags (Spark's `interruptTag`).
    #[prost(string, repeated, tag = "7")]
    pub tags: Vec<String>,
}

/// `spark.connect.UserContext`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct UserContext {
    /// The user id the server attributes the session to.
    #[prost(string, tag = "1")]
    pub user_id: String,
    /// Display name.
    #[prost(string, tag = "2")]
    pub user_name: String,
}

/// `spark.connect.Plan`: a relation to evaluate (`root`) or a command to run.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Plan {
    /// `oneof op_type` member `root`.
    #[prost(message, optional, tag = "1")]
    pub root: Option<Relation>,
    /// `oneof op_type` member `command`.
    #[prost(message, optional, tag = "2")]
    pub command: Option<Command>,
}

/// `spark.connect.Command`, with the one member we send.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Command {
    /// `oneof command_type` member `sql_command`.
    #[prost(message, optional, tag = "5")]
    pub sql_command: Option<SqlCommand>,
}

/// `spark.connect.SqlCommand`: a SQL statement, run eagerly when it is a command. Field 1 (`sql`)
/// is what Spark 3.4 and 3.5 servers read; 4.0 still reads it.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SqlCommand {
    /// The statement.
    #[prost(string, tag = "1")]
    pub sql: String,
}

/// `spark.connect.Relation`, with the members a SQL command's result comes back as.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Relation {
    /// `oneof rel_type` member `sql`: a query the server did not run yet.
    #[prost(message, optional, tag = "10")]
    pub sql: Option<Sql>,
    /// `oneof rel_type` member `local_relation`: a command's result rows (Arrow IPC).
    #[prost(message, optional, tag = "11")]
    pub local_relation: Option<LocalRelation>,
}

/// `spark.connect.SQL`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Sql {
    /// The query text.
    #[prost(string, tag = "1")]
    pub query: String,
}

/// `spark.connect.LocalRelation`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct LocalRelation {
    /// Rows as an Arrow IPC stream.
    #[prost(bytes = "vec", optional, tag = "1")]
    pub data: Option<Vec<u8>>,
}

/// `spark.connect.ExecutePlanResponse`, with the members we read.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ExecutePlanResponse {
    /// The session it belongs to.
    #[prost(string, tag = "1")]
    pub session_id: String,
    /// `oneof response_type` member `arrow_batch`: result rows.
    #[prost(message, optional, tag = "2")]
    pub arrow_batch: Option<ArrowBatch>,
    /// `oneof response_type` member `sql_command_result`.
    #[prost(message, optional, tag = "5")]
    pub sql_command_result: Option<SqlCommandResult>,
    /// The operation id.
    #[prost(string, tag = "12")]
    pub operation_id: String,
    /// `oneof response_type` member `result_complete`: the last message of a finished operation.
    #[prost(message, optional, tag = "14")]
    pub result_complete: Option<ResultComplete>,
}

/// `spark.connect.ExecutePlanResponse.ArrowBatch`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ArrowBatch {
    /// Rows in `data`.
    #[prost(int64, tag = "1")]
    pub row_count: i64,
    /// Arrow IPC stream.
    #[prost(bytes = "vec", tag = "2")]
    pub data: Vec<u8>,
}

/// `spark.connect.ExecutePlanResponse.SqlCommandResult`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SqlCommandResult {
    /// The result: rows of a command that ran, or the query to run.
    #[prost(message, optional, tag = "1")]
    pub relation: Option<Relation>,
}

/// `spark.connect.ExecutePlanResponse.ResultComplete` (no fields).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ResultComplete {}
