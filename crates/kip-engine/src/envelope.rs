//! The `execute_kip` request envelope (spec §6, DECISIONS.md items 22-25), shared by
//! every interface: parsing the arguments object, preparing each command (parse +
//! parameter binding on the AST), batch semantics and the response shapes.
//!
//! - Exactly one of `command` / `commands`; both or neither is `KIP_1001`.
//! - `commands` items are strings (shared `parameters`) or `{command, parameters}`
//!   objects whose parameters override the shared ones key by key.
//! - Batch: syntax, KQL and META errors are returned inline and execution continues;
//!   the first error of a KML command (including the read-only refusal) stops the batch.
//! - A single `command` holds exactly one KIP command; several are sent as `commands`.

pub use crate::outcome::{json_size, Outcome};
use kip_lang::{bind_owned, parse_command, Command, ErrorCode, KipError};
use serde_json::{json, Map, Value};

/// One command of a request, with the parameters that apply to it.
#[derive(Debug, Clone, PartialEq)]
pub struct CommandItem {
    /// The KIP command text.
    pub command: String,
    /// Parameters: the shared ones overlaid with the item's own.
    pub parameters: Map<String, Value>,
}

/// A parsed `execute_kip` / `execute_kip_readonly` arguments object.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecuteRequest {
    /// The commands, in order.
    pub items: Vec<CommandItem>,
    /// `true` when the request used `commands` (the response is then a batch).
    pub batch: bool,
    /// Validate only, write nothing.
    pub dry_run: bool,
    /// The request's id (`request_id`, optional): each write statement's outcome is
    /// recorded under it in the statement's transaction, and a request sent again with
    /// the same id (a forwarder re-sending after a failover, a client retrying) is
    /// answered from the record instead of being applied twice. Forwarded requests get
    /// one from the forwarding process when the client sent none.
    pub request_id: Option<String>,
}

/// The longest `request_id` accepted, in bytes.
pub const MAX_REQUEST_ID_BYTES: usize = 128;

fn envelope_error(msg: impl Into<String>) -> KipError {
    KipError::syntax(msg).with_hint(
        "send {\"command\": \"...\"} or {\"commands\": [\"...\", {\"command\": \"...\", \"parameters\": {...}}]}, optionally with \"parameters\": {...} and \"dry_run\": true",
    )
}

impl ExecuteRequest {
    /// Parses the arguments object of `execute_kip`.
    pub fn from_json(args: &Value) -> Result<ExecuteRequest, KipError> {
        let Some(obj) = args.as_object() else {
            return Err(envelope_error("the request must be a JSON object"));
        };
        let shared = match obj.get("parameters") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(m)) => m.clone(),
            Some(_) => return Err(envelope_error("`parameters` must be a JSON object")),
        };
        let dry_run = match obj.get("dry_run") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(_) => return Err(envelope_error("`dry_run` must be true or false")),
        };
        let request_id = match obj.get("request_id") {
            None | Some(Value::Null) => None,
            Some(Value::String(id))
                if !id.is_empty()
                    && id.len() <= MAX_REQUEST_ID_BYTES
                    && !id.chars().any(char::is_control) =>
            {
                Some(id.clone())
            }
            Some(_) => {
                return Err(envelope_error(format!(
                    "`request_id` must be a string of 1 to {MAX_REQUEST_ID_BYTES} bytes without control characters"
                )))
            }
        };
        let command = obj.get("command").filter(|v| !v.is_null());
        let commands = obj.get("commands").filter(|v| !v.is_null());
        match (command, commands) {
            (Some(_), Some(_)) => Err(envelope_error(
                "`command` and `commands` are mutually exclusive: send exactly one of them",
            )),
            (None, None) => {
                // Name the keys it does have: a misspelt `command` is the usual cause.
                // (A null `command` or `commands` counts as absent: not named.)
                let other: Vec<String> = obj
                    .keys()
                    .filter(|k| {
                        !["parameters", "dry_run", "request_id", "command", "commands"]
                            .contains(&k.as_str())
                    })
                    .take(8)
                    .map(|k| format!("`{k}`"))
                    .collect();
                Err(envelope_error(if other.is_empty() {
                    "the request has neither `command` nor `commands`".to_string()
                } else {
                    format!(
                        "the request has neither `command` nor `commands` (it has {})",
                        other.join(", ")
                    )
                }))
            }
            (Some(c), None) => {
                let Some(text) = c.as_str() else {
                    return Err(envelope_error("`command` must be a string"));
                };
                Ok(ExecuteRequest {
                    items: vec![CommandItem {
                        command: text.to_string(),
                        parameters: shared,
                    }],
                    batch: false,
                    dry_run,
                    request_id,
                })
            }
            (None, Some(cs)) => {
                let Some(list) = cs.as_array() else {
                    return Err(envelope_error("`commands` must be an array"));
                };
                let mut items = Vec::with_capacity(list.len());
                for (i, item) in list.iter().enumerate() {
                    items.push(match item {
                        Value::String(s) => CommandItem {
                            command: s.clone(),
                            parameters: shared.clone(),
                        },
                        Value::Object(o) => {
                            let Some(text) = o.get("command").and_then(Value::as_str) else {
                                return Err(envelope_error(format!(
                                    "commands[{i}] must have a string `command`"
                                )));
                            };
                            let mut params = shared.clone();
                            match o.get("parameters") {
                                None | Some(Value::Null) => {}
                                Some(Value::Object(own)) => {
                                    for (k, v) in own {
                                        params.insert(k.clone(), v.clone());
                                    }
                                }
                                Some(_) => {
                                    return Err(envelope_error(format!(
                                        "commands[{i}].parameters must be a JSON object"
                                    )))
                                }
                            }
                            CommandItem {
                                command: text.to_string(),
                                parameters: params,
                            }
                        }
                        _ => {
                            return Err(envelope_error(format!(
                            "commands[{i}] must be a string or an object {{command, parameters}}"
                        )))
                        }
                    });
                }
                Ok(ExecuteRequest {
                    items,
                    batch: true,
                    dry_run,
                    request_id,
                })
            }
        }
    }
}

/// Parses a command text and binds its parameters.
pub fn prepare(item: &CommandItem) -> Result<Command, KipError> {
    bind_owned(parse_command(&item.command)?, &item.parameters)
}

/// The response to a request.
#[derive(Debug, Clone, PartialEq)]
pub enum Response {
    /// The response to a `command`.
    Single(Outcome),
    /// The response to `commands`: one outcome per executed command.
    Batch(Vec<Outcome>),
    /// The response envelope of a KIP 2.0 request (`kip-response.schema.json`).
    Kip2(Value),
}

impl Response {
    /// The response JSON: a single outcome object, or `{"result": [outcome, ...]}`.
    pub fn to_json(&self) -> Value {
        match self {
            Response::Single(o) => o.to_json(),
            Response::Batch(os) => {
                json!({ "result": os.iter().map(Outcome::to_json).collect::<Vec<_>>() })
            }
            Response::Kip2(v) => v.clone(),
        }
    }

    /// True when the response (or any command of a batch) is an error.
    pub fn has_error(&self) -> bool {
        match self {
            Response::Single(o) => o.is_err(),
            Response::Batch(os) => os.iter().any(Outcome::is_err),
            Response::Kip2(v) => v["status"] != "succeeded",
        }
    }
}

/// Which tool a request came through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// `execute_kip`: everything.
    ReadWrite,
    /// `execute_kip_readonly`: FIND, SEARCH, DESCRIBE and EXPORT only.
    ReadOnly,
}

/// The error `execute_kip_readonly` answers a KML statement (UPSERT, UPDATE, MERGE,
/// DELETE) with: word for word what DECISIONS.md item 24 fixes (item 36 extends it to
/// UPDATE and MERGE without changing the text).
pub fn readonly_refusal() -> KipError {
    KipError::new(
        ErrorCode::ImmutableTarget,
        "read-only interface: UPSERT/DELETE are not allowed",
    )
    .with_hint("use execute_kip")
}

/// What one request may ask for and how long it may run, as the envelope enforces it
/// between commands.
#[derive(Debug, Clone)]
pub struct BatchLimits {
    /// Maximum commands in a `commands` batch (`KIP_4002` beyond, nothing run).
    pub max_commands: usize,
    /// Maximum size of the response JSON in bytes: a read whose result would pass it
    /// is replaced by `KIP_4002` and the batch stops there.
    pub max_response_bytes: usize,
    /// The request's deadline: a command not started by then is not run.
    pub deadline: Option<std::time::Instant>,
    /// The request's cancellation flag: once set, no further command starts.
    pub interrupt: Option<crate::cancel::Interrupt>,
}

impl Default for BatchLimits {
    fn default() -> Self {
        BatchLimits {
            max_commands: 256,
            max_response_bytes: 16 << 20,
            deadline: None,
            interrupt: None,
        }
    }
}

impl BatchLimits {
    fn stopped(&self, index: usize) -> Option<KipError> {
        let why = if self.interrupt.as_ref().is_some_and(|i| i.is_set()) {
            "the request was cancelled (its time budget ran out or the client went away)"
        } else if self.deadline.is_some_and(|d| std::time::Instant::now() > d) {
            "the request's time budget ran out"
        } else {
            return None;
        };
        Some(
            KipError::new(
                ErrorCode::ExecutionTimeout,
                format!("command {index} was not run: {why}; nothing of it was applied"),
            )
            .with_hint("send the remaining commands again in a new request; earlier results in this response stand (writes reported without an error were committed)"),
        )
    }
}

/// Runs a request with the batch semantics of the spec. `exec` runs one prepared
/// command (honouring `dry_run`); everything else (envelope, parsing, binding,
/// read-only refusal, stop-on-KML-error) is decided here.
pub fn run<F>(req: &ExecuteRequest, access: Access, mut exec: F) -> Response
where
    F: FnMut(&Command, bool) -> Outcome,
{
    run_with(req, access, &BatchLimits::default(), |_, cmd, dry_run| {
        exec(cmd, dry_run)
    })
}

/// [`run`] within `limits`: a batch over `max_commands` runs nothing (`KIP_4002`); a
/// command is not started once the request is cancelled or past its deadline
/// (`KIP_4001`, and the batch stops: a write is either run and reported, or not run);
/// a read whose result would take the response past `max_response_bytes` is
/// replaced by `KIP_4002` and the batch stops.
pub fn run_with<F>(
    req: &ExecuteRequest,
    access: Access,
    limits: &BatchLimits,
    mut exec: F,
) -> Response
where
    F: FnMut(usize, &Command, bool) -> Outcome,
{
    if req.items.len() > limits.max_commands {
        return Response::Single(Outcome::Err(
            KipError::new(
                ErrorCode::ResourceExhausted,
                format!(
                    "the batch has {} commands, more than the limit of {}; nothing was run",
                    req.items.len(),
                    limits.max_commands
                ),
            )
            .with_hint(format!(
                "send at most {} commands per request, or load a large set of UPSERTs as one capsule",
                limits.max_commands
            )),
        ));
    }
    let mut outcomes = Vec::with_capacity(req.items.len());
    let mut size = 0usize;
    for (index, item) in req.items.iter().enumerate() {
        if let Some(e) = limits.stopped(index) {
            outcomes.push(Outcome::Err(e));
            break;
        }
        let (mut outcome, mut stop, writes) = match parse_command(&item.command) {
            // Syntax errors are returned inline and never stop a batch.
            Err(e) => (Outcome::Err(e), false, false),
            Ok(cmd) => {
                let is_kml = cmd.is_write();
                let outcome = if is_kml && access == Access::ReadOnly {
                    Outcome::Err(readonly_refusal())
                } else {
                    match bind_owned(cmd, &item.parameters) {
                        Err(e) => Outcome::Err(e),
                        Ok(bound) => exec(index, &bound, req.dry_run),
                    }
                };
                let stop = is_kml && outcome.is_err();
                (outcome, stop, is_kml)
            }
        };
        let this = match &outcome {
            Outcome::Ok { result, .. } => json_size(result),
            Outcome::Err(_) => 256,
        };
        size = size.saturating_add(this);
        if size > limits.max_response_bytes && !writes {
            outcome = Outcome::Err(
                KipError::new(
                    ErrorCode::ResourceExhausted,
                    format!(
                        "the response would be larger than the limit of {} bytes (this command's result is {this} bytes); the batch stops here",
                        limits.max_response_bytes
                    ),
                )
                .with_hint("lower LIMIT and page with CURSOR, project fields (?x.name) instead of whole nodes, or send fewer commands per request"),
            );
            stop = true;
        }
        outcomes.push(outcome);
        if stop {
            break;
        }
    }
    // A batch that stopped early says which commands were not run.
    let ran = outcomes.len();
    if req.batch && ran < req.items.len() {
        if let Some(Outcome::Err(e)) = outcomes.last_mut() {
            let rest = if ran + 1 == req.items.len() {
                format!("command {ran} was not run")
            } else {
                format!("commands {ran} to {} were not run", req.items.len() - 1)
            };
            let note = format!(
                "The batch stopped at command {} (0-based): {rest}; send them again once this is fixed",
                ran - 1
            );
            e.hint = Some(match e.hint.take() {
                Some(h) => format!("{h}. {note}"),
                None => note,
            });
        }
    }
    if req.batch {
        Response::Batch(outcomes)
    } else {
        Response::Single(
            outcomes
                .pop()
                .unwrap_or_else(|| Outcome::Err(KipError::internal("no command was run"))),
        )
    }
}

/// Answers a request that could not even be parsed (a bad envelope).
pub fn envelope_failure(e: KipError) -> Response {
    Response::Single(Outcome::Err(e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(v: Value) -> Result<ExecuteRequest, KipError> {
        ExecuteRequest::from_json(&v)
    }

    #[test]
    fn exactly_one_of_command_and_commands() {
        let both = req(json!({"command": "DESCRIBE PRIMER", "commands": []})).expect_err("both");
        assert_eq!(both.code, ErrorCode::InvalidSyntax);
        assert!(both.message.contains("mutually exclusive"));
        let neither = req(json!({"parameters": {}})).expect_err("neither");
        assert_eq!(neither.code, ErrorCode::InvalidSyntax);
        assert!(!neither.message.contains("it has"), "{}", neither.message);
        // A misspelt key is named, so the caller sees the slip.
        let misspelt =
            req(json!({"comand": "DESCRIBE PRIMER", "dry_run": false})).expect_err("misspelt");
        assert!(
            misspelt.message.ends_with("(it has `comand`)"),
            "{}",
            misspelt.message
        );
        assert!(req(json!({"command": "DESCRIBE PRIMER"})).is_ok());
        assert!(req(json!({"commands": ["DESCRIBE PRIMER"]})).is_ok());
    }

    #[test]
    fn a_null_command_is_not_named_as_a_key_the_request_has() {
        let e = req(json!({"command": null, "commands": null})).expect_err("neither");
        assert!(!e.message.contains("it has"), "{}", e.message);
        let e = req(json!({"command": null, "cmd": "FIND"})).expect_err("neither");
        assert!(e.message.ends_with("(it has `cmd`)"), "{}", e.message);
    }

    #[test]
    fn item_parameters_override_shared_ones() {
        let r = req(json!({
            "commands": ["FIND(?x) WHERE { ?x {name: :a} }", {"command": "X", "parameters": {"a": 2, "b": 3}}],
            "parameters": {"a": 1, "c": 4}
        }))
        .expect("valid");
        assert_eq!(
            r.items[0].parameters,
            json!({"a": 1, "c": 4}).as_object().cloned().expect("obj")
        );
        assert_eq!(
            r.items[1].parameters,
            json!({"a": 2, "b": 3, "c": 4})
                .as_object()
                .cloned()
                .expect("obj")
        );
        assert!(r.batch);
    }

    #[test]
    fn malformed_envelopes_are_syntax_errors() {
        for bad in [
            json!("FIND"),
            json!({"command": 5}),
            json!({"commands": "x"}),
            json!({"commands": [5]}),
            json!({"commands": [{"parameters": {}}]}),
            json!({"command": "x", "parameters": []}),
            json!({"command": "x", "dry_run": "yes"}),
        ] {
            assert_eq!(
                req(bad.clone()).expect_err("bad").code,
                ErrorCode::InvalidSyntax,
                "{bad}"
            );
        }
    }

    fn echo(cmd: &Command, dry: bool) -> Outcome {
        if matches!(cmd, Command::Upsert(u) if u.blocks.is_empty()) {
            return Outcome::Err(KipError::new(ErrorCode::NotFound, "nothing"));
        }
        Outcome::ok(json!({"dry": dry, "write": cmd.is_write()}))
    }

    #[test]
    fn batch_continues_after_syntax_and_query_errors_but_stops_at_kml_errors() {
        let r = req(json!({"commands": [
            "FIND(",                       // syntax error: inline, continue
            "DESCRIBE PRIMER",             // ok
            "FIND(?x) WHERE { ?x {name: :missing} }", // KQL bind error: inline, continue
            "UPSERT { }",                  // KML error: stop
            "DESCRIBE DOMAINS"             // not run
        ]}))
        .expect("valid");
        let Response::Batch(out) = run(&r, Access::ReadWrite, echo) else {
            panic!("batch")
        };
        assert_eq!(out.len(), 4);
        // The stopping error says which commands were not run.
        let Outcome::Err(e) = &out[3] else { panic!() };
        assert!(
            e.hint
                .as_deref()
                .unwrap_or("")
                .contains("command 4 was not run"),
            "{e:?}"
        );
        assert!(out[0].is_err() && !out[1].is_err() && out[2].is_err() && out[3].is_err());
    }

    #[test]
    fn readonly_refuses_kml_and_stops_the_batch() {
        let r = req(json!({"commands": ["DESCRIBE PRIMER", "DELETE CONCEPT ?x DETACH WHERE { ?x {id: \"C:1\"} }", "DESCRIBE DOMAINS"]}))
            .expect("valid");
        let resp = run(&r, Access::ReadOnly, echo);
        assert_eq!(
            resp.to_json()["result"][1],
            json!({"error": {"code": "KIP_3004", "message": "read-only interface: UPSERT/DELETE are not allowed", "hint": "use execute_kip. The batch stopped at command 1 (0-based): command 2 was not run; send them again once this is fixed"}})
        );
        let Response::Batch(out) = resp else { panic!() };
        assert_eq!(out.len(), 2);
    }

    #[test]
    fn single_response_shapes() {
        let r = req(json!({"command": "DESCRIBE PRIMER", "dry_run": true})).expect("valid");
        let resp = run(&r, Access::ReadWrite, echo);
        assert_eq!(
            resp.to_json(),
            json!({"result": {"dry": true, "write": false}})
        );
        let cursor = Outcome::Ok {
            result: json!([1]),
            next_cursor: Some("c1".into()),
        };
        assert_eq!(
            cursor.to_json(),
            json!({"result": [1], "next_cursor": "c1"})
        );
    }
}
