//! What the explorer and the MCP App show, assembled from ordinary read-only KIP queries
//! (parameterized, so no stored string is ever spliced into a command): the overview,
//! a concept's page, search hits with their endpoints' names, and a filtered audit log.
//!
//! Every listing is bounded ([`MAX_ITEMS`] links per direction, [`MAX_TYPES`] types,
//! [`MAX_LOG_SCAN`] audit records per filtered page), so a page costs the same on a
//! 1M-concept store as on a small one. These reads are the server's own: they are not
//! recorded in the audit log (the explorer's KIP console is).

use crate::Backend;
use kip_engine::{Access, Budget};
use kip_lang::{ErrorCode, KipError};
use serde_json::{json, Map, Value};
use std::time::Duration;

/// Most propositions listed per direction on a concept page.
pub const MAX_ITEMS: usize = 200;
/// Default number of propositions per direction.
pub const DEFAULT_ITEMS: usize = 50;
/// Most concept / proposition types counted by the overview.
pub const MAX_TYPES: usize = 100;
/// Most audit records one filtered log page examines.
pub const MAX_LOG_SCAN: usize = 5_000;
/// Time budget of one view (all its queries together).
pub const VIEW_BUDGET: Duration = Duration::from_secs(15);

fn bad(message: impl Into<String>, hint: &str) -> KipError {
    KipError::new(ErrorCode::InvalidSyntax, message.into()).with_hint(hint.to_string())
}

/// Runs one read-only KIP query and returns its `result`.
fn query(
    backend: &Backend,
    budget: &Budget,
    command: &str,
    parameters: Value,
) -> Result<Value, KipError> {
    Ok(query_page(backend, budget, command, parameters)?.0)
}

/// [`query`] with the response's `next_cursor`.
fn query_page(
    backend: &Backend,
    budget: &Budget,
    command: &str,
    parameters: Value,
) -> Result<(Value, Option<String>), KipError> {
    let args = json!({"command": command, "parameters": parameters});
    let response = backend.execute_json(args, Access::ReadOnly, budget);
    if let Some(e) = response.get("error") {
        return Err(error_from_json(e));
    }
    let next = response
        .get("next_cursor")
        .and_then(Value::as_str)
        .map(str::to_string);
    Ok((response.get("result").cloned().unwrap_or(Value::Null), next))
}

/// The concepts of one type, a page at a time (`{type, limit, cursor}`), in the
/// store's order: no sort, so a page costs the same whatever the type's size.
pub fn list(backend: &Backend, args: &Value) -> Result<Value, KipError> {
    let ty = args
        .get("type")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| bad("say which type to list", "e.g. ?type=Person"))?;
    let limit = item_limit(args)?;
    let mut params = json!({"type": ty, "limit": limit});
    let mut command = "FIND(?c) WHERE { ?c {type: :type} } LIMIT :limit".to_string();
    if let Some(c) = args
        .get("cursor")
        .and_then(Value::as_str)
        .filter(|c| !c.is_empty())
    {
        command.push_str(" CURSOR :cursor");
        params["cursor"] = json!(c);
    }
    let budget = Budget::with_timeout(VIEW_BUDGET);
    let (items, next) = query_page(backend, &budget, &command, params)?;
    let total = count(
        backend,
        &budget,
        "FIND(COUNT(?c)) WHERE { ?c {type: :type} }",
        json!({"type": ty}),
    );
    Ok(json!({"type": ty, "items": items, "total": total, "next_cursor": next}))
}

/// A KIP error object (`{code, message, hint}`) back as a [`KipError`].
fn error_from_json(e: &Value) -> KipError {
    let code = e
        .get("code")
        .and_then(Value::as_str)
        .and_then(ErrorCode::from_code)
        .unwrap_or(ErrorCode::InternalError);
    let mut err = KipError::new(
        code,
        e.get("message")
            .and_then(Value::as_str)
            .unwrap_or("query failed")
            .to_string(),
    );
    if let Some(h) = e.get("hint").and_then(Value::as_str) {
        err = err.with_hint(h.to_string());
    }
    err
}

/// Which concept a page is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConceptRef {
    /// By its id (`C:123`).
    Id(String),
    /// By `{type, name}`.
    Key {
        /// The concept type.
        ty: String,
        /// The name.
        name: String,
    },
}

impl ConceptRef {
    /// From `id`, or `type` and `name`, fields of a JSON object (query string or tool
    /// arguments).
    pub fn from_args(args: &Value) -> Result<ConceptRef, KipError> {
        let s = |k: &str| args.get(k).and_then(Value::as_str).map(str::to_string);
        if let Some(id) = s("id").filter(|i| !i.is_empty()) {
            return Ok(ConceptRef::Id(id));
        }
        match (s("type"), s("name")) {
            (Some(ty), Some(name)) if !ty.is_empty() => Ok(ConceptRef::Key { ty, name }),
            _ => Err(bad(
                "say which concept: an id, or a type and a name",
                "e.g. {\"type\": \"Person\", \"name\": \"Alice\"} or {\"id\": \"C:42\"}",
            )),
        }
    }
}

/// The number of items a request asks for (`limit`), within `1..=MAX_ITEMS`.
pub fn item_limit(args: &Value) -> Result<usize, KipError> {
    match args.get("limit") {
        None | Some(Value::Null) => Ok(DEFAULT_ITEMS),
        Some(v) => {
            let n = v
                .as_u64()
                .or_else(|| v.as_str().and_then(|s| s.trim().parse::<u64>().ok()));
            match n {
                Some(n) if (1..=MAX_ITEMS as u64).contains(&n) => Ok(n as usize),
                _ => Err(bad(
                    format!("limit must be an integer from 1 to {MAX_ITEMS}"),
                    "omit it for the default (50)",
                )),
            }
        }
    }
}

fn first(v: Value) -> Option<Value> {
    match v {
        Value::Array(mut a) if !a.is_empty() => Some(a.swap_remove(0)),
        _ => None,
    }
}

/// The rows of a two-column FIND (`[[a...], [b...]]`) as pairs.
fn pairs(v: Value) -> Vec<(Value, Value)> {
    match v {
        Value::Array(cols) if cols.len() == 2 => {
            let mut it = cols.into_iter();
            let a = it
                .next()
                .and_then(|c| c.as_array().cloned())
                .unwrap_or_default();
            let b = it
                .next()
                .and_then(|c| c.as_array().cloned())
                .unwrap_or_default();
            a.into_iter().zip(b).collect()
        }
        _ => Vec::new(),
    }
}

fn count(backend: &Backend, budget: &Budget, command: &str, parameters: Value) -> Option<u64> {
    query(backend, budget, command, parameters)
        .ok()
        .and_then(|v| v.as_u64())
}

/// A concept's page: the concept (attributes, metadata), its outgoing and incoming
/// propositions with the element at the other end (at most `limit` each, with the
/// totals), the higher-order statements about those propositions, and its domains.
pub fn concept_view(
    backend: &Backend,
    which: &ConceptRef,
    limit: usize,
) -> Result<Value, KipError> {
    let budget = Budget::with_timeout(VIEW_BUDGET);
    let found = match which {
        ConceptRef::Id(id) => query(
            backend,
            &budget,
            "FIND(?c) WHERE { ?c {id: :id} }",
            json!({"id": id}),
        ),
        ConceptRef::Key { ty, name } => query(
            backend,
            &budget,
            "FIND(?c) WHERE { ?c {type: :type, name: :name} }",
            json!({"type": ty, "name": name}),
        ),
    };
    let concept = match found {
        Ok(v) => first(v),
        // An unknown type is "no such concept" to a reader.
        Err(e) if e.code == ErrorCode::TypeMismatch => None,
        Err(e) => return Err(e),
    };
    let Some(concept) = concept else {
        let what = match which {
            ConceptRef::Id(id) => format!("no concept has the id {id}"),
            ConceptRef::Key { ty, name } => format!("no concept {{type: {ty:?}, name: {name:?}}}"),
        };
        return Err(KipError::new(ErrorCode::NotFound, what)
            .with_hint("search for it first: names and types are case-sensitive".to_string()));
    };
    let id = concept
        .get("id")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let p = json!({"id": id, "limit": limit});
    let outgoing = pairs(query(
        backend,
        &budget,
        "FIND(?l, ?o) WHERE { ?l ({id: :id}, ?p, ?o) } LIMIT :limit",
        p.clone(),
    )?);
    let incoming = pairs(query(
        backend,
        &budget,
        "FIND(?l, ?s) WHERE { ?l (?s, ?p, {id: :id}) } LIMIT :limit",
        p.clone(),
    )?);
    let out_total = count(
        backend,
        &budget,
        "FIND(COUNT(?l)) WHERE { ?l ({id: :id}, ?p, ?o) }",
        p.clone(),
    );
    let in_total = count(
        backend,
        &budget,
        "FIND(COUNT(?l)) WHERE { ?l (?s, ?p, {id: :id}) }",
        p.clone(),
    );
    // Statements about the concept's propositions (higher-order), either end.
    let mut about: Vec<Value> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for command in [
        "FIND(?h, ?x) WHERE { ?l ({id: :id}, ?p1, ?y) ?h (?l, ?p, ?x) } LIMIT :limit",
        "FIND(?h, ?x) WHERE { ?l ({id: :id}, ?p1, ?y) ?h (?x, ?p, ?l) } LIMIT :limit",
        "FIND(?h, ?x) WHERE { ?l (?y, ?p1, {id: :id}) ?h (?l, ?p, ?x) } LIMIT :limit",
        "FIND(?h, ?x) WHERE { ?l (?y, ?p1, {id: :id}) ?h (?x, ?p, ?l) } LIMIT :limit",
    ] {
        for (h, x) in pairs(query(backend, &budget, command, p.clone())?) {
            let hid = h.get("id").and_then(Value::as_str).unwrap_or_default();
            if about.len() < limit && seen.insert(hid.to_string()) {
                about.push(json!({"statement": h, "other": x}));
            }
        }
    }
    let domains = query(
        backend,
        &budget,
        "FIND(?d.name) WHERE { ({id: :id}, \"belongs_to_domain\", ?d) } LIMIT 100",
        json!({"id": id}),
    )
    .unwrap_or(json!([]));
    let claims = claims(backend, &budget, &id, limit);
    let item = |(link, other): (Value, Value)| json!({"link": link, "other": other});
    Ok(json!({
        "concept": concept,
        "outgoing": {"total": out_total, "items": outgoing.into_iter().map(item).collect::<Vec<_>>()},
        "incoming": {"total": in_total, "items": incoming.into_iter().map(item).collect::<Vec<_>>()},
        "about": about,
        "claims": claims,
        "domains": domains,
        "limit": limit,
    }))
}

/// The KIP 2.0 claims about the concept's propositions, either end (DECISIONS.md item
/// 40: a 1.x fact shows its founding assertion): who asserted what, with which stance,
/// mode, confidence and evidence, and what the memory believes of it. Empty when the
/// 2.0 query does not answer in time.
fn claims(backend: &Backend, budget: &Budget, id: &str, limit: usize) -> Value {
    let mut out = Vec::new();
    for (end, command) in [
        (
            "subject",
            r#"FIND(?p.id, ?p.predicate, ?p.object, ?a.id, ?a.stance, ?a.mode, ?a.confidence, ?a.asserted_by, ?a.lifecycle.status, ?a.evidence, ?b.status) WHERE { ?s CONCEPT {id: :id} ?p PROPOSITION (?s, ?r, ?o) ?a ASSERTION {proposition: ?p} ?b BELIEF (?p) } LIMIT :limit"#,
        ),
        (
            "object",
            r#"FIND(?p.id, ?p.predicate, ?p.subject, ?a.id, ?a.stance, ?a.mode, ?a.confidence, ?a.asserted_by, ?a.lifecycle.status, ?a.evidence, ?b.status) WHERE { ?o CONCEPT {id: :id} ?p PROPOSITION (?s, ?r, ?o) ?a ASSERTION {proposition: ?p} ?b BELIEF (?p) } LIMIT :limit"#,
        ),
    ] {
        let args = json!({"kip": "2.0", "operations": [{"command": command, "parameters": {"id": id, "limit": limit}}]});
        let r = backend.execute_json(args, Access::ReadOnly, budget);
        for row in r["results"][0]["result"].as_array().into_iter().flatten() {
            let f = |i: usize| row.get(i).cloned().unwrap_or(Value::Null);
            out.push(json!({
                "end": end, "proposition": f(0), "predicate": f(1), "other": f(2),
                "assertion": f(3), "stance": f(4), "mode": f(5), "confidence": f(6),
                "asserted_by": f(7), "status": f(8), "evidence": f(9), "belief": f(10),
            }));
        }
    }
    Value::Array(out)
}

/// The overview: the PRIMER, and the concept and proposition types with their counts
/// (the first [`MAX_TYPES`] of each; a count that did not fit in the time budget is
/// `null`).
pub fn overview(backend: &Backend) -> Result<Value, KipError> {
    let budget = Budget::with_timeout(VIEW_BUDGET);
    let primer = query(backend, &budget, "DESCRIBE PRIMER", json!({}))?;
    let mut types = Map::new();
    for (key, describe, counting) in [
        (
            "concept_types",
            "DESCRIBE CONCEPT TYPES LIMIT :limit",
            "FIND(COUNT(?c)) WHERE { ?c {type: :name} }",
        ),
        (
            "proposition_types",
            "DESCRIBE PROPOSITION TYPES LIMIT :limit",
            "FIND(COUNT(?l)) WHERE { ?l (?s, :name, ?o) }",
        ),
    ] {
        let listed = query(backend, &budget, describe, json!({"limit": MAX_TYPES}))?;
        let names: Vec<String> = match &listed {
            Value::Array(a) => a
                .iter()
                .filter_map(|n| n.as_str().map(String::from))
                .collect(),
            Value::Object(o) => o
                .get("result")
                .or_else(|| o.get("items"))
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|n| n.as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default(),
            _ => Vec::new(),
        };
        let rows: Vec<Value> = names
            .into_iter()
            .map(|name| {
                let n = count(backend, &budget, counting, json!({"name": name}));
                json!({"name": name, "count": n})
            })
            .collect();
        types.insert(key.to_string(), Value::Array(rows));
    }
    let (concepts, propositions) = backend.totals()?;
    let mut out = Map::new();
    out.insert("primer".into(), primer);
    out.extend(types);
    out.insert(
        "totals".into(),
        json!({"concepts": concepts, "propositions": propositions}),
    );
    Ok(Value::Object(out))
}

/// SEARCH for the explorer's search box: `{q, kind: "concept"|"proposition", mode,
/// type, limit}`; proposition hits come with their subject and object elements.
pub fn search(backend: &Backend, args: &Value) -> Result<Value, KipError> {
    let q = args
        .get("q")
        .and_then(Value::as_str)
        .map(str::trim)
        .unwrap_or_default();
    if q.is_empty() {
        return Err(bad("nothing to search for", "type a word or a phrase"));
    }
    let kind = match args
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or("concept")
    {
        "concept" | "" => "CONCEPT",
        "proposition" => "PROPOSITION",
        other => {
            return Err(bad(
                format!("unknown kind {other:?}"),
                "kind is \"concept\" or \"proposition\"",
            ))
        }
    };
    let limit = item_limit(args)?;
    let mut command = format!("SEARCH {kind} :q");
    let mut params = json!({"q": q, "limit": limit});
    if let Some(t) = args
        .get("type")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
    {
        command.push_str(" WITH TYPE :type");
        params["type"] = json!(t);
    }
    if let Some(m) = args
        .get("mode")
        .and_then(Value::as_str)
        .filter(|m| !m.is_empty())
    {
        command.push_str(" MODE :mode");
        params["mode"] = json!(m);
    }
    command.push_str(" LIMIT :limit");
    let budget = Budget::with_timeout(VIEW_BUDGET);
    let hits = query(backend, &budget, &command, params)?;
    let mut hits = match hits {
        Value::Array(a) => a,
        _ => Vec::new(),
    };
    if kind == "PROPOSITION" {
        for h in &mut hits {
            for end in ["subject", "object"] {
                let Some(id) = h.get(end).and_then(Value::as_str).map(str::to_string) else {
                    continue;
                };
                if let Some(e) = element(backend, &budget, &id) {
                    h[format!("{end}_element")] = e;
                }
            }
        }
    }
    Ok(json!({"command": command, "hits": hits}))
}

/// A concept or proposition by id.
fn element(backend: &Backend, budget: &Budget, id: &str) -> Option<Value> {
    let command = if id.starts_with("P:") {
        "FIND(?l) WHERE { ?l (id: :id) }"
    } else {
        "FIND(?c) WHERE { ?c {id: :id} }"
    };
    query(backend, budget, command, json!({"id": id}))
        .ok()
        .and_then(first)
}

/// Whether an audit record is a write that was applied: a KML statement (UPSERT,
/// UPDATE, MERGE, DELETE) or a memory-server tool that writes, not a dry run, not an
/// error.
pub fn is_applied_write(record: &Value) -> bool {
    if record.get("outcome").and_then(Value::as_str) != Some("ok")
        || record.get("dry_run").and_then(Value::as_bool) == Some(true)
    {
        return false;
    }
    let method = record.get("method").and_then(Value::as_str).unwrap_or("");
    if method == "execute_kip_readonly" {
        return false;
    }
    if let Some(tool) = kip_engine::memory::MemoryTool::from_name(method) {
        return !tool.read_only();
    }
    let mut texts: Vec<&str> = Vec::new();
    if let Some(c) = record.get("command").and_then(Value::as_str) {
        texts.push(c);
    }
    if let Some(cs) = record.get("commands").and_then(Value::as_array) {
        texts.extend(cs.iter().filter_map(Value::as_str));
    }
    texts.iter().any(|t| {
        t.split_whitespace()
            .filter(|w| !w.starts_with("//"))
            .any(|w| {
                let w = w.trim_start_matches('{').to_ascii_uppercase();
                matches!(w.as_str(), "UPSERT" | "UPDATE" | "MERGE" | "DELETE")
            })
    })
}

/// The text of a record the log's text filter looks in (lowercased): the method, the
/// command(s), parameters or tool arguments, and the error.
fn searchable(r: &Value) -> String {
    let mut out = String::new();
    for key in [
        "method",
        "command",
        "commands",
        "parameters",
        "arguments",
        "error_code",
        "error",
    ] {
        if let Some(v) = r.get(key) {
            match v {
                Value::String(s) => out.push_str(s),
                other => out.push_str(&other.to_string()),
            }
            out.push('\n');
        }
    }
    out.to_lowercase()
}

/// A `since`/`until` bound of the audit log view, in the shape of the records'
/// timestamps (`2026-01-02T03:04:05.000Z`).
fn log_bound(name: &str, value: &str) -> Result<String, KipError> {
    match kip_engine::brain::time::parse(value) {
        Some(t) => Ok(kip_engine::brain::time::format(t)),
        None => Err(bad(
            format!("{name} is not a date or a timestamp: {value:?}"),
            "give a UTC date (2026-01-02) or an RFC 3339 timestamp (2026-01-02T03:04:05Z), or leave it out",
        )),
    }
}

/// The interface of the sleep cycle's records (its statements, run as `$system`, and
/// the language-model phases).
pub const SLEEP_INTERFACE: &str = "sleep";

/// A page of the audit log keeping the records that match `{interface, outcome,
/// text, writes, since, until, hide_sleep}` (text: case-insensitive, in the call's
/// text and error; since/until: dates or timestamps, UTC, since inclusive, until
/// exclusive; hide_sleep: leave out the sleep cycle's records, whose statements by
/// `$system` would otherwise fill the log), newest first. At
/// most [`MAX_LOG_SCAN`] records are examined per page; `next_cursor` continues from
/// the last one examined.
pub fn logs(backend: &Backend, args: &Value) -> Result<Value, KipError> {
    let s = |k: &str| {
        args.get(k)
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map(str::to_string)
    };
    let limit = match args.get("limit") {
        None | Some(Value::Null) => 50,
        Some(v) => match v
            .as_u64()
            .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
        {
            Some(n) if (1..=100).contains(&n) => n as usize,
            _ => return Err(bad("limit must be from 1 to 100", "omit it for 50")),
        },
    };
    let interface = s("interface");
    let outcome = s("outcome");
    let text = s("text").map(|t| t.to_lowercase());
    let flag = |k: &str| {
        matches!(args.get(k), Some(Value::Bool(true)))
            || s(k).is_some_and(|w| w == "1" || w == "true")
    };
    let writes = flag("writes");
    let hide_sleep = flag("hide_sleep");
    // The records' timestamps are RFC 3339 UTC with milliseconds, one fixed shape: a
    // bound read as a time and written in that shape compares as text (`since`
    // inclusive, `until` exclusive). A bound that is not a date or a timestamp is an
    // error, never ignored.
    let since = s("since").map(|v| log_bound("since", &v)).transpose()?;
    let until = s("until").map(|v| log_bound("until", &v)).transpose()?;
    let mut cursor = s("cursor");
    let mut out = Vec::new();
    let mut scanned = 0usize;
    let mut before_since = false;
    loop {
        let page = backend.list_logs(cursor.clone(), kip_engine::audit::MAX_PAGE)?;
        let records = page
            .get("result")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let next = page
            .get("next_cursor")
            .and_then(Value::as_str)
            .map(str::to_string);
        let mut last_id = None;
        for r in records {
            scanned += 1;
            last_id = r.get("id").and_then(Value::as_str).map(str::to_string);
            let ts = r.get("timestamp").and_then(Value::as_str).unwrap_or("");
            if since.as_deref().is_some_and(|s| ts < s) {
                // Newest first: everything further is older still.
                before_since = true;
                break;
            }
            let keep = until.as_deref().is_none_or(|u| ts < u)
                && interface
                    .as_deref()
                    .is_none_or(|i| r.get("interface").and_then(Value::as_str) == Some(i))
                && outcome
                    .as_deref()
                    .is_none_or(|o| r.get("outcome").and_then(Value::as_str) == Some(o))
                && (!writes || is_applied_write(&r))
                && !(hide_sleep
                    && r.get("interface").and_then(Value::as_str) == Some(SLEEP_INTERFACE))
                && text.as_deref().is_none_or(|t| searchable(&r).contains(t));
            if keep {
                out.push(r);
                if out.len() == limit {
                    break;
                }
            }
        }
        if before_since {
            cursor = None;
            break;
        }
        if out.len() == limit {
            // Continue after the last record returned.
            cursor = last_id;
            break;
        }
        cursor = next;
        if cursor.is_none() || scanned >= MAX_LOG_SCAN {
            break;
        }
    }
    Ok(json!({"result": out, "next_cursor": cursor, "scanned": scanned}))
}
