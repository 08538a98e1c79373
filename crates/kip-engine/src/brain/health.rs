//! The health report of SystemInstructions.md ("Health Metrics & Targets"), computed
//! from one read snapshot, and the TTL eligibility rules of Phase 9 it shares with the
//! sleep cycle.

use crate::schema::{self, CONCEPT_TYPE, PROPOSITION_TYPE};
use crate::store::{ConceptRecord, ElemRef, GraphRead, PropRecord, StoreResult};
use crate::time::{self, expired};
use kip_lang::KipError;
use serde::Serialize;
use serde_json::Value;
use std::time::{Duration, SystemTime};

/// The domain-membership predicate.
pub const DOMAIN_PREDICATE: &str = "belongs_to_domain";
/// Days after its `start_time` from which an Event not consolidated is stale.
pub const STALE_EVENT_DAYS: u64 = 7;
/// Orphans above which a sleep cycle is due (SystemInstructions.md, triggers).
pub const ORPHAN_TRIGGER: u64 = 10;
/// Unsorted backlog above which a sleep cycle is due.
pub const UNSORTED_TRIGGER: u64 = 20;
/// Stale Events above which a sleep cycle is due.
pub const STALE_EVENT_TRIGGER: u64 = 30;
/// Pending SleepTasks from which the target is missed.
pub const PENDING_TASK_TARGET: u64 = 10;
/// The healthy domain size range.
pub const DOMAIN_SIZE: (u64, u64) = (5, 100);
/// Elements listed per metric in a report.
pub const SAMPLE: usize = 20;

/// A concept named in a report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConceptRef {
    /// Its id (`C:12`).
    pub id: String,
    /// Its type.
    #[serde(rename = "type")]
    pub concept_type: String,
    /// Its name.
    pub name: String,
}

impl ConceptRef {
    pub(crate) fn of(id: u64, c: &ConceptRecord) -> ConceptRef {
        ConceptRef {
            id: ElemRef::Concept(id).id_string(),
            concept_type: c.concept_type.clone(),
            name: c.name.clone(),
        }
    }
}

/// A counted metric with its target and the first elements counted.
#[derive(Debug, Clone, Serialize)]
pub struct Metric {
    /// How many.
    pub count: u64,
    /// The target: the count should stay below it.
    pub target: u64,
    /// Whether the count is at or above the target.
    pub exceeded: bool,
    /// Up to [`SAMPLE`] of them.
    pub sample: Vec<ConceptRef>,
}

impl Metric {
    fn new(target: u64) -> Metric {
        Metric {
            count: 0,
            target,
            exceeded: false,
            sample: Vec::new(),
        }
    }
    fn add(&mut self, id: u64, c: &ConceptRecord) {
        self.count += 1;
        if self.sample.len() < SAMPLE {
            self.sample.push(ConceptRef::of(id, c));
        }
    }
    fn close(&mut self) {
        self.exceeded = self.count >= self.target;
    }
}

/// An average over the elements that carry a numeric value.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Average {
    /// The mean (`None` when no element carries the value).
    pub average: Option<f64>,
    /// Elements that carry it.
    pub count: u64,
    #[serde(skip)]
    sum: f64,
}

impl Average {
    fn add(&mut self, v: Option<&Value>) {
        if let Some(x) = v.and_then(Value::as_f64) {
            self.sum += x;
            self.count += 1;
        }
    }
    fn close(&mut self) {
        self.average = (self.count > 0).then(|| (self.sum / self.count as f64 * 1e4).round() / 1e4);
    }
}

/// One domain's size.
#[derive(Debug, Clone, Serialize)]
pub struct DomainSize {
    /// The domain's name.
    pub name: String,
    /// Elements with a `belongs_to_domain` link to it.
    pub members: u64,
    /// `small` (below 5), `ok` (5 to 100) or `large` (above 100).
    pub status: &'static str,
}

/// Expired elements (`metadata.expires_at` before now), by what Phase 9 may do with them.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Expired {
    /// Expired concepts.
    pub concepts: u64,
    /// Expired propositions (superseded ones excluded: they are history).
    pub propositions: u64,
    /// Concepts the next sleep cycle may delete (every eligibility rule holds).
    pub reclaimable_concepts: u64,
    /// Propositions the next sleep cycle may delete.
    pub reclaimable_propositions: u64,
    /// Expired concepts whose type is not TTL-deletable (left for review).
    pub not_deletable: Vec<ConceptRef>,
    /// Elements whose `expires_at` is not a timestamp.
    pub unreadable_expires_at: u64,
}

/// The health report.
#[derive(Debug, Clone, Serialize)]
pub struct Health {
    /// When it was computed.
    pub generated_at: String,
    /// Concepts in the nexus.
    pub concepts: u64,
    /// Propositions in the nexus.
    pub propositions: u64,
    /// Concepts with no `belongs_to_domain` link (any type; protected entities aside).
    pub orphans: Metric,
    /// Elements in the `Unsorted` domain.
    pub unsorted_backlog: Metric,
    /// Events whose `start_time` is more than 7 days old with no `consolidated_to` link.
    pub stale_events: Metric,
    /// SleepTasks with `status: "pending"`.
    pub pending_sleep_tasks: Metric,
    /// `metadata.confidence` over concepts and propositions that carry it.
    pub confidence: Average,
    /// `metadata.memory_strength` over propositions that carry it.
    pub memory_strength: Average,
    /// Every Domain with its size, smallest first.
    pub domains: Vec<DomainSize>,
    /// Propositions with `metadata.superseded: true`.
    pub superseded_propositions: u64,
    /// Expired elements.
    pub expired: Expired,
    /// The threshold triggers that fire (`orphans`, `unsorted_backlog`, `stale_events`).
    pub triggers: Vec<&'static str>,
}

/// What Phase 9 does with an expired concept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Not expired (or no `expires_at`).
    Keep,
    /// `expires_at` is not a timestamp: left alone, reported.
    Unreadable,
    /// A protected entity, a type definition or a Domain: never touched.
    Protected,
    /// Expired, but its type is not TTL-deletable: a review SleepTask, never a delete.
    Review,
    /// An Event whose consolidation is still pending: `expires_at` is extended.
    ExtendPending,
    /// The only evidence (`derived_from`) of an active concept: `expires_at` is extended.
    ExtendSoleEvidence,
    /// Every rule holds: it may be deleted.
    Delete,
}

fn attr_str<'a>(c: &'a ConceptRecord, k: &str) -> Option<&'a str> {
    c.attributes.get(k).and_then(Value::as_str)
}

fn meta_str<'a>(m: &'a serde_json::Map<String, Value>, k: &str) -> Option<&'a str> {
    m.get(k).and_then(Value::as_str)
}

/// Whether a concept is still in use: not archived and not expired.
fn active(c: &ConceptRecord, now: SystemTime) -> bool {
    attr_str(c, "status") != Some("archived") && expired(&c.metadata, now) != Some(true)
}

/// Phase 9's eligibility rules for a concept (SystemInstructions.md): expired; of a
/// TTL-deletable kind (an `Event`; a `SleepTask` that is `completed` or `failed`; a
/// `Commitment` that is `fulfilled`, `cancelled` or `expired`; or any node whose own
/// `metadata.memory_tier` is `"short-term"`); not protected; for an Event, consolidation
/// `completed` or `archived`; and not the only `derived_from` evidence of an active
/// concept.
pub fn verdict(
    r: &dyn GraphRead,
    id: u64,
    c: &ConceptRecord,
    now: SystemTime,
) -> StoreResult<Verdict> {
    match expired(&c.metadata, now) {
        Some(false) => return Ok(Verdict::Keep),
        None => return Ok(Verdict::Unreadable),
        Some(true) => {}
    }
    if schema::is_protected(c)
        || c.concept_type == CONCEPT_TYPE
        || c.concept_type == PROPOSITION_TYPE
        || c.concept_type == "Domain"
        || c.name.starts_with('$')
    {
        return Ok(Verdict::Protected);
    }
    let status = attr_str(c, "status");
    let deletable = match c.concept_type.as_str() {
        "Event" => true,
        "SleepTask" => matches!(status, Some("completed" | "failed")),
        "Commitment" => matches!(status, Some("fulfilled" | "cancelled" | "expired")),
        _ => false,
    } || meta_str(&c.metadata, "memory_tier") == Some("short-term");
    if !deletable {
        return Ok(Verdict::Review);
    }
    if c.concept_type == "Event"
        && !matches!(
            attr_str(c, "consolidation_status"),
            Some("completed" | "archived")
        )
    {
        return Ok(Verdict::ExtendPending);
    }
    // Sole evidence: an active concept whose only `derived_from` link points here.
    let mut dependents = Vec::new();
    r.scan_in(
        ElemRef::Concept(id),
        Some("derived_from"),
        &mut |_, s, _| {
            dependents.push(s);
            Ok(true)
        },
    )?;
    for d in dependents {
        let ElemRef::Concept(dn) = d else { continue };
        let Some(dc) = r.concept(dn)? else { continue };
        if !active(&dc, now) {
            continue;
        }
        let mut sources = 0;
        r.scan_out(d, Some("derived_from"), &mut |_, _, _| {
            sources += 1;
            Ok(sources < 2)
        })?;
        if sources < 2 {
            return Ok(Verdict::ExtendSoleEvidence);
        }
    }
    Ok(Verdict::Delete)
}

/// What Phase 9 does with an expired proposition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkVerdict {
    /// Not expired, superseded (history), or `expires_at` unreadable.
    Keep,
    /// Touches a protected entity: never touched.
    Protected,
    /// Its subject is an Event whose consolidation is pending: `expires_at` is extended.
    ExtendPending,
    /// It may be deleted.
    Delete,
}

/// Phase 9's rules for a proposition: expired, not `superseded: true`, not touching a
/// protected entity; a link whose subject is an Event with pending consolidation is
/// extended instead.
pub fn link_verdict(
    r: &dyn GraphRead,
    p: &PropRecord,
    now: SystemTime,
) -> StoreResult<LinkVerdict> {
    if expired(&p.metadata, now) != Some(true)
        || p.metadata.get("superseded") == Some(&Value::Bool(true))
    {
        return Ok(LinkVerdict::Keep);
    }
    for end in [p.subject, p.object] {
        if let ElemRef::Concept(n) = end {
            if let Some(c) = r.concept(n)? {
                if schema::is_protected(&c) {
                    return Ok(LinkVerdict::Protected);
                }
            }
        }
    }
    if let ElemRef::Concept(n) = p.subject {
        if let Some(c) = r.concept(n)? {
            if c.concept_type == "Event"
                && !matches!(
                    attr_str(&c, "consolidation_status"),
                    Some("completed" | "archived")
                )
            {
                return Ok(LinkVerdict::ExtendPending);
            }
        }
    }
    Ok(LinkVerdict::Delete)
}

/// Computes the health report as of `now`.
///
/// Long (about 150 lines): one pass over the graph feeds every metric of the report.
pub fn health(r: &dyn GraphRead, now: SystemTime) -> Result<Health, KipError> {
    let cutoff = now
        .checked_sub(Duration::from_secs(STALE_EVENT_DAYS * 86_400))
        .unwrap_or(SystemTime::UNIX_EPOCH);
    let mut h = Health {
        generated_at: time::format(now),
        concepts: 0,
        propositions: 0,
        orphans: Metric::new(ORPHAN_TRIGGER),
        unsorted_backlog: Metric::new(UNSORTED_TRIGGER),
        stale_events: Metric::new(STALE_EVENT_TRIGGER),
        pending_sleep_tasks: Metric::new(PENDING_TASK_TARGET),
        confidence: Average::default(),
        memory_strength: Average::default(),
        domains: Vec::new(),
        superseded_propositions: 0,
        expired: Expired::default(),
        triggers: Vec::new(),
    };
    let mut ids = Vec::new();
    r.scan_concepts(&mut |id| {
        ids.push(id);
        Ok(true)
    })?;
    let unsorted = r.concept_by_key("Domain", "Unsorted")?;
    for id in ids {
        let Some(c) = r.concept(id)? else { continue };
        h.concepts += 1;
        let at = ElemRef::Concept(id);
        let mut classified = false;
        r.scan_out(at, Some(DOMAIN_PREDICATE), &mut |_, _, _| {
            classified = true;
            Ok(false)
        })?;
        // Protected entities (CoreSchema, `$self`, `$system`, ...) are fixtures, not
        // knowledge waiting for a domain.
        if !classified && !schema::is_protected(&c) {
            h.orphans.add(id, &c);
        }
        h.confidence.add(c.metadata.get("confidence"));
        match c.concept_type.as_str() {
            "Event" => {
                let old = attr_str(&c, "start_time")
                    .and_then(time::parse)
                    .is_some_and(|t| t < cutoff);
                if old {
                    let mut consolidated = false;
                    r.scan_out(at, Some("consolidated_to"), &mut |_, _, _| {
                        consolidated = true;
                        Ok(false)
                    })?;
                    if !consolidated {
                        h.stale_events.add(id, &c);
                    }
                }
            }
            "SleepTask" if attr_str(&c, "status") == Some("pending") => {
                h.pending_sleep_tasks.add(id, &c);
            }
            "Domain" => {
                let mut members = 0u64;
                r.scan_in(at, Some(DOMAIN_PREDICATE), &mut |_, s, _| {
                    members += 1;
                    if Some(id) == unsorted {
                        if let ElemRef::Concept(sn) = s {
                            if let Some(sc) = r.concept(sn)? {
                                h.unsorted_backlog.add(sn, &sc);
                                return Ok(true);
                            }
                        }
                        h.unsorted_backlog.count += 1;
                    }
                    Ok(true)
                })?;
                let status = if members < DOMAIN_SIZE.0 {
                    "small"
                } else if members > DOMAIN_SIZE.1 {
                    "large"
                } else {
                    "ok"
                };
                h.domains.push(DomainSize {
                    name: c.name.clone(),
                    members,
                    status,
                });
            }
            _ => {}
        }
        match verdict(r, id, &c, now)? {
            Verdict::Keep => {}
            Verdict::Unreadable => h.expired.unreadable_expires_at += 1,
            v => {
                h.expired.concepts += 1;
                match v {
                    Verdict::Delete => h.expired.reclaimable_concepts += 1,
                    Verdict::Review if h.expired.not_deletable.len() < SAMPLE => {
                        h.expired.not_deletable.push(ConceptRef::of(id, &c));
                    }
                    _ => {}
                }
            }
        }
    }
    let mut props = Vec::new();
    r.scan_props(&mut |id| {
        props.push(id);
        Ok(true)
    })?;
    for id in props {
        let Some(p) = r.prop(id)? else { continue };
        h.propositions += 1;
        h.confidence.add(p.metadata.get("confidence"));
        h.memory_strength.add(p.metadata.get("memory_strength"));
        if p.metadata.get("superseded") == Some(&Value::Bool(true)) {
            h.superseded_propositions += 1;
        }
        if expired(&p.metadata, now).is_none() {
            h.expired.unreadable_expires_at += 1;
        }
        match link_verdict(r, &p, now)? {
            LinkVerdict::Keep => {}
            v => {
                h.expired.propositions += 1;
                if v == LinkVerdict::Delete {
                    h.expired.reclaimable_propositions += 1;
                }
            }
        }
    }
    h.domains
        .sort_by(|a, b| a.members.cmp(&b.members).then(a.name.cmp(&b.name)));
    for m in [
        &mut h.orphans,
        &mut h.unsorted_backlog,
        &mut h.stale_events,
        &mut h.pending_sleep_tasks,
    ] {
        m.close();
    }
    h.confidence.close();
    h.memory_strength.close();
    // Triggers fire above the thresholds (SystemInstructions.md, "Sleep Cycle Triggers").
    if h.unsorted_backlog.count > UNSORTED_TRIGGER {
        h.triggers.push("unsorted_backlog");
    }
    if h.orphans.count > ORPHAN_TRIGGER {
        h.triggers.push("orphans");
    }
    if h.stale_events.count > STALE_EVENT_TRIGGER {
        h.triggers.push("stale_events");
    }
    Ok(h)
}

impl Health {
    /// The report as a plain-text table (see [`table`]).
    pub fn table(&self) -> String {
        table(&serde_json::to_value(self).unwrap_or(Value::Null))
    }
}

/// A health report (as JSON, e.g. forwarded from the process that owns the nexus) as a
/// plain-text table, for `kip health`.
pub fn table(h: &Value) -> String {
    let num = |v: &Value| v.as_u64().unwrap_or(0);
    let mut out = format!(
        "health of the nexus at {} ({} concepts, {} propositions)\n\n{:<26} {:>20}  {:<8}\n",
        h["generated_at"].as_str().unwrap_or("?"),
        num(&h["concepts"]),
        num(&h["propositions"]),
        "metric",
        "value",
        "target"
    );
    let mut row = |metric: &str, value: String, target: String, flag: bool| {
        out.push_str(&format!(
            "{metric:<26} {value:>20}  {target:<8} {}\n",
            if flag { "exceeded" } else { "" }
        ));
    };
    for (key, label) in [
        ("orphans", "orphans"),
        ("unsorted_backlog", "unsorted backlog"),
        ("stale_events", "stale events (> 7 days)"),
        ("pending_sleep_tasks", "pending sleep tasks"),
    ] {
        let m = &h[key];
        row(
            label,
            num(&m["count"]).to_string(),
            format!("< {}", num(&m["target"])),
            m["exceeded"].as_bool().unwrap_or(false),
        );
    }
    let avg = |a: &Value| {
        a["average"].as_f64().map_or("-".to_string(), |x| {
            format!("{x:.3} ({})", num(&a["count"]))
        })
    };
    row(
        "average confidence",
        avg(&h["confidence"]),
        "observe".into(),
        false,
    );
    row(
        "average memory strength",
        avg(&h["memory_strength"]),
        "observe".into(),
        false,
    );
    row(
        "superseded propositions",
        num(&h["superseded_propositions"]).to_string(),
        "audit".into(),
        false,
    );
    let e = &h["expired"];
    row(
        "expired concepts",
        format!(
            "{} ({} reclaimable)",
            num(&e["concepts"]),
            num(&e["reclaimable_concepts"])
        ),
        String::new(),
        false,
    );
    row(
        "expired propositions",
        format!(
            "{} ({} reclaimable)",
            num(&e["propositions"]),
            num(&e["reclaimable_propositions"])
        ),
        String::new(),
        false,
    );
    out.push_str("\ndomains (members; healthy 5-100):\n");
    for d in h["domains"].as_array().into_iter().flatten() {
        let status = d["status"].as_str().unwrap_or("");
        out.push_str(&format!(
            "  {:<30} {:>8}  {}\n",
            d["name"].as_str().unwrap_or("?"),
            num(&d["members"]),
            if status == "ok" { "" } else { status }
        ));
    }
    let triggers: Vec<&str> = h["triggers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    if !triggers.is_empty() {
        out.push_str(&format!(
            "\na sleep cycle is due: {}\n",
            triggers.join(", ")
        ));
    }
    out
}
