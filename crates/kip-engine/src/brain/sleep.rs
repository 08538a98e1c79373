//! The deterministic sleep cycle: the phases of SystemInstructions.md that need no
//! language model, each write an ordinary KIP statement run through the engine with
//! `$system` as author (one transaction per statement).
//!
//! 1. Assessment: the [`Health`] report (read-only).
//! 2. Phase 7, memory-strength decay: one bulk `UPDATE ... LIMIT 500` per predicate
//!    shard, repeated until fewer than 500 links change; idempotent through
//!    `strength_decay_applied_at` (see [`SleepOptions::decay_period`]).
//! 3. Phase 9, TTL reclamation: the [`verdict`](super::health::verdict)/[`link_verdict`](super::health::link_verdict) rules, at most
//!    [`SleepOptions::max_reclaim`] deleted elements (nodes and links) per cycle, the
//!    plan logged to `maintenance_log` before anything is deleted, pending Events and
//!    sole evidence extended, non-deletable expired nodes turned into review SleepTasks.
//! 4. Phase 10, finalization: `last_sleep_cycle` and one `maintenance_log` entry on
//!    `$system`, read-merge-write under `EXPECT VERSION` (retried on `KIP_3005`).
//!
//! With `dry_run` the reads run and every write is listed, not applied.

use super::health::{self, ConceptRef, Health, LinkVerdict, Verdict};
use super::reclaim::{Planned, Reclaimed};
use super::time;
use crate::envelope::Response;
use crate::nexus::Nexus;
use crate::outcome::Outcome;
use crate::schema::{self, PROPOSITION_TYPE};
use crate::store::{ElemRef, GraphRead};
use crate::Access;
use kip_lang::{ErrorCode, KipError};
use serde::Serialize;
use serde_json::{json, Value};
use std::time::{Duration, SystemTime};

/// Links changed per decay `UPDATE` (the statement's `LIMIT`).
pub const DECAY_BATCH: u64 = 500;
/// Decay `UPDATE`s per predicate shard and cycle at most (20,000 links): each re-run
/// scans past the links already decayed, so an unbounded sweep of a huge predicate
/// would cost quadratic time; the guard lets the next cycle go on where this one
/// stopped.
pub const MAX_DECAY_BATCHES: usize = 40;
/// Most entries kept in `$system.attributes.maintenance_log` (the oldest are dropped).
pub const MAINTENANCE_LOG_MAX: usize = 100;
/// Review SleepTasks created per cycle at most.
pub const REVIEW_TASKS_MAX: usize = 20;
/// Predicates whose links never decay: domain membership, provenance and
/// participation (decaying them would sever evidence chains).
pub const NO_DECAY: [&str; 10] = [
    "belongs_to_domain",
    "derived_from",
    "involves",
    "mentions",
    "consolidated_to",
    "assigned_to",
    "caused_by",
    "has_step",
    "compiled_to",
    "derived_insight",
];
/// Assertion predicates: a slow pass for reinforced memories (`evidence_count >= 3` on
/// the object) and a fast one for the others.
pub const ASSERTION_PREDICATES: [&str; 2] = ["prefers", "learned"];

/// How a cycle runs.
#[derive(Debug, Clone)]
pub struct SleepOptions {
    /// Why it runs: `scheduled`, `threshold`, `on_demand` (recorded in the log).
    pub trigger: String,
    /// List the writes instead of applying them.
    pub dry_run: bool,
    /// The cycle's clock (`None`: the system clock); tests pin it.
    pub now: Option<SystemTime>,
    /// Decay factor of ordinary predicates' links.
    pub decay_factor: f64,
    /// Decay factor of reinforced assertion links.
    pub decay_slow: f64,
    /// Decay factor of assertion links never reinforced.
    pub decay_fast: f64,
    /// A link decays at most once per period (its `strength_decay_applied_at` must be
    /// older than the cycle start minus this), so frequent cycles do not decay faster.
    pub decay_period: Duration,
    /// Links observed (`metadata.observed_at`) more recently than this are exempt.
    pub reinforcement_window: Duration,
    /// Most elements (concepts and links) deleted per cycle.
    pub max_reclaim: usize,
    /// How far `expires_at` is pushed for a pending Event or a sole evidence.
    pub ttl_extension: Duration,
    /// The report of the language-model phases run before this cycle (kip-brain's
    /// loop), recorded in the report and, with its KML statements, in the log entry.
    pub llm_phase: Option<Value>,
}

impl Default for SleepOptions {
    fn default() -> Self {
        SleepOptions {
            trigger: "on_demand".into(),
            dry_run: false,
            now: None,
            decay_factor: 0.95,
            decay_slow: 0.98,
            decay_fast: 0.90,
            decay_period: Duration::from_secs(7 * 86_400),
            reinforcement_window: Duration::from_secs(14 * 86_400),
            max_reclaim: 500,
            ttl_extension: Duration::from_secs(7 * 86_400),
            llm_phase: None,
        }
    }
}

/// One statement of a cycle.
#[derive(Debug, Clone, Serialize)]
pub struct Statement {
    /// The phase it belongs to.
    pub phase: &'static str,
    /// The KIP command.
    pub command: String,
    /// Its parameters.
    pub parameters: Value,
    /// Whether it ran (false in a dry run).
    pub applied: bool,
    /// Its result, when it ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    /// Its error, when it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<Value>,
}

/// What a cycle did (or, in a dry run, would do).
#[derive(Debug, Clone, Serialize)]
pub struct SleepReport {
    /// When it started (the `:timestamp` of its writes).
    pub cycle_start: String,
    /// When it ended.
    pub finished_at: String,
    /// Why it ran.
    pub trigger: String,
    /// Whether writes were only listed.
    pub dry_run: bool,
    /// The assessment (Phase 1), before any change.
    pub health: Health,
    /// Links whose memory strength decayed (in a dry run: that would).
    pub decayed_links: u64,
    /// Concepts deleted by TTL reclamation.
    pub deleted_concepts: Vec<ConceptRef>,
    /// Propositions deleted by TTL reclamation (with those of deleted concepts).
    pub deleted_propositions: u64,
    /// Elements whose `expires_at` was extended (pending Events, sole evidence).
    pub extended: Vec<String>,
    /// Review SleepTasks created for expired nodes that are not TTL-deletable.
    pub review_tasks: Vec<String>,
    /// Whether the per-cycle deletion cap left eligible elements for the next cycle.
    pub cap_reached: bool,
    /// Planned deletions not made: the element stopped being eligible between the plan
    /// and its deletion (checked in the deleting transaction).
    pub skipped: Vec<Skipped>,
    /// Problems met (failed statements, unreadable timestamps).
    pub issues: Vec<String>,
    /// Every write, in order.
    pub statements: Vec<Statement>,
    /// The language-model phases run before the deterministic ones, when there were.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub llm_phase: Option<Value>,
}

/// A planned deletion the cycle did not make, and why.
#[derive(Debug, Clone, Serialize)]
pub struct Skipped {
    /// The element (`C:n` or `P:n`).
    pub id: String,
    /// Why it was kept.
    pub reason: String,
}

struct Cycle<'a> {
    nexus: &'a Nexus,
    opts: &'a SleepOptions,
    report: SleepReport,
    now: SystemTime,
}

fn err_json(e: &KipError) -> Value {
    serde_json::to_value(e).unwrap_or_else(|_| json!({"message": e.message}))
}

impl Cycle<'_> {
    /// Runs a read-only command; its result.
    fn read(&self, command: &str, parameters: Value) -> Result<Value, KipError> {
        let args = json!({"command": command, "parameters": parameters});
        let start = std::time::Instant::now();
        let r = self.nexus.execute_json(&args, Access::ReadWrite);
        // Every statement of the cycle is in the audit log, as `$system`'s work.
        self.nexus.admin().audit().record(crate::audit::kip_entry(
            "sleep",
            "execute_kip",
            &args,
            &r.to_json(),
            start.elapsed(),
        ));
        match r {
            Response::Single(Outcome::Ok { result, .. }) => Ok(result),
            Response::Single(Outcome::Err(e)) => Err(e),
            Response::Batch(_) | Response::Kip2(_) => {
                Err(KipError::internal("one 1.x command answered as a batch"))
            }
        }
    }

    /// Runs (or, in a dry run, lists) a write; its result, `None` when it failed or did
    /// not run.
    fn write(&mut self, phase: &'static str, command: String, parameters: Value) -> Option<Value> {
        let mut st = Statement {
            phase,
            command,
            parameters,
            applied: false,
            result: None,
            error: None,
        };
        let out = if self.opts.dry_run {
            None
        } else {
            st.applied = true;
            match self.read(&st.command, st.parameters.clone()) {
                Ok(v) => {
                    st.result = Some(v.clone());
                    Some(v)
                }
                Err(e) => {
                    self.report.issues.push(format!(
                        "{phase}: {} ({})",
                        e.message,
                        e.code.as_str()
                    ));
                    st.error = Some(err_json(&e));
                    None
                }
            }
        };
        self.report.statements.push(st);
        out
    }

    fn ts(&self, t: SystemTime) -> String {
        time::format(t)
    }

    fn before(&self, d: Duration) -> String {
        self.ts(self.now.checked_sub(d).unwrap_or(SystemTime::UNIX_EPOCH))
    }

    /// Phase 7.
    fn decay(&mut self) -> Result<(), KipError> {
        let mut predicates = self
            .nexus
            .read(|r| Ok(schema::registered_names(r, PROPOSITION_TYPE)?))?;
        predicates.sort();
        let timestamp = self.report.cycle_start.clone();
        let decay_cutoff = self.before(self.opts.decay_period);
        let stale_cutoff = self.before(self.opts.reinforcement_window);
        for p in predicates {
            if NO_DECAY.contains(&p.as_str()) {
                continue;
            }
            let passes: Vec<(f64, &str)> = if ASSERTION_PREDICATES.contains(&p.as_str()) {
                vec![
                    (self.opts.decay_slow, "\n  FILTER(?o.attributes.evidence_count >= 3)"),
                    (
                        self.opts.decay_fast,
                        "\n  FILTER(IS_NULL(?o.attributes.evidence_count) || ?o.attributes.evidence_count < 3)",
                    ),
                ]
            } else {
                vec![(self.opts.decay_factor, "")]
            };
            // Predicate positions take no parameters: the name goes in as a literal
            // (a registered predicate name is an identifier; quoted as JSON anyway).
            let lit = serde_json::to_string(&p).map_err(|e| KipError::internal(e.to_string()))?;
            for (factor, extra) in passes {
                let where_ = format!(
                    "WHERE {{\n  ?link (?s, {lit}, ?o)\n  FILTER(IS_NULL(?link.metadata.superseded) || ?link.metadata.superseded != true)\n  FILTER(IS_NULL(?link.metadata.memory_strength) || ?link.metadata.memory_strength > 0.05)\n  FILTER(IS_NULL(?link.metadata.strength_decay_applied_at) || ?link.metadata.strength_decay_applied_at < :decay_cutoff)\n  FILTER(IS_NULL(?link.metadata.observed_at) || ?link.metadata.observed_at < :stale_cutoff){extra}\n}}"
                );
                let params = json!({
                    "decay_factor": factor,
                    "timestamp": timestamp,
                    "decay_cutoff": decay_cutoff,
                    "stale_cutoff": stale_cutoff,
                });
                if self.opts.dry_run {
                    let n = self.read(&format!("FIND(COUNT(?link)) {where_}"), params.clone())?;
                    // One aggregate column answers a bare number.
                    let n = n.as_u64().or_else(|| n.get(0).and_then(Value::as_u64));
                    self.report.decayed_links += n.unwrap_or(0);
                }
                let command = format!(
                    "UPDATE ?link\nSET METADATA {{\n  memory_strength: CLAMP(MUL(COALESCE(?link.metadata.memory_strength, 0.7), :decay_factor), 0.0, 1.0),\n  strength_decay_applied_at: :timestamp\n}}\n{where_}\nLIMIT {DECAY_BATCH}"
                );
                // Re-run until a run changes fewer than LIMIT links (the guard makes
                // every re-run pick links not yet decayed), at most MAX_DECAY_BATCHES.
                let mut done = false;
                for _ in 0..MAX_DECAY_BATCHES {
                    let Some(r) = self.write("decay", command.clone(), params.clone()) else {
                        done = true;
                        break;
                    };
                    let updated = r.get("updated").and_then(Value::as_u64).unwrap_or(0);
                    self.report.decayed_links += updated;
                    if updated < DECAY_BATCH || self.opts.dry_run {
                        done = true;
                        break;
                    }
                }
                if !done {
                    self.report.issues.push(format!(
                        "decay of {p} links stopped after {} links this cycle; the next cycle goes on",
                        MAX_DECAY_BATCHES as u64 * DECAY_BATCH
                    ));
                }
            }
        }
        Ok(())
    }

    /// Phase 9.
    fn reclaim(&mut self) -> Result<(), KipError> {
        let now = self.now;
        let (concepts, links, open_reviews) = self.nexus.read(|r| audit(r, now))?;
        let until = self.ts(now.checked_add(self.opts.ttl_extension).unwrap_or(now));
        let mut budget = self.opts.max_reclaim;
        let mut doomed: Vec<(ConceptRef, Planned)> = Vec::new();
        let mut doomed_links: Vec<Planned> = Vec::new();
        let mut extend: Vec<ConceptRef> = Vec::new();
        let mut extend_links: Vec<String> = Vec::new();
        let mut review: Vec<ConceptRef> = Vec::new();
        for (c, v, plan) in concepts {
            match (v, plan) {
                (Verdict::Delete, Some(plan)) => {
                    if plan.size() <= budget {
                        budget -= plan.size();
                        doomed.push((c, plan));
                    } else {
                        self.report.cap_reached = true;
                    }
                }
                (v, _) => match v {
                    Verdict::ExtendPending | Verdict::ExtendSoleEvidence => extend.push(c),
                    Verdict::Review => {
                        if !open_reviews.contains(&(c.concept_type.clone(), c.name.clone()))
                            && review.len() < REVIEW_TASKS_MAX
                        {
                            review.push(c);
                        }
                    }
                    Verdict::Unreadable => self.report.issues.push(format!(
                        "{} {:?}: metadata.expires_at is not a timestamp",
                        c.concept_type, c.name
                    )),
                    Verdict::Keep | Verdict::Protected | Verdict::Delete => {}
                },
            }
        }
        for (id, v, plan) in links {
            match (v, plan) {
                (LinkVerdict::Delete, Some(plan)) => {
                    if plan.size() <= budget {
                        budget -= plan.size();
                        doomed_links.push(plan);
                    } else {
                        self.report.cap_reached = true;
                    }
                }
                (LinkVerdict::ExtendPending, _) => extend_links.push(id),
                (LinkVerdict::Keep | LinkVerdict::Protected | LinkVerdict::Delete, _) => {}
            }
        }
        for c in &extend {
            self.write(
                "ttl_reclamation",
                "UPDATE ?n SET METADATA { expires_at: :until } WHERE { ?n {type: :type, name: :name} }".into(),
                json!({"until": until, "type": c.concept_type, "name": c.name}),
            );
            self.report.extended.push(c.id.clone());
        }
        for id in &extend_links {
            self.write(
                "ttl_reclamation",
                "UPDATE ?link SET METADATA { expires_at: :until } WHERE { ?link (id: :id) }".into(),
                json!({"until": until, "id": id}),
            );
            self.report.extended.push(id.clone());
        }
        let day = self.report.cycle_start.get(..10).unwrap_or("").to_string();
        for c in &review {
            let name = format!(
                "SleepTask:{day}:review:{}",
                slug(&format!("{}-{}", c.concept_type, c.name))
            );
            let reason = format!(
                "{} {:?} has expired (metadata.expires_at) but its type is not TTL-deletable: likely metadata pollution from a statement-level default. Review it; it is never deleted automatically.",
                c.concept_type, c.name
            );
            self.write(
                "ttl_reclamation",
                "UPSERT {\n  CONCEPT ?task {\n    {type: \"SleepTask\", name: :name}\n    SET ATTRIBUTES { target_type: :target_type, target_name: :target_name, requested_action: \"review\", reason: :reason, status: \"pending\", priority: 2 }\n    SET PROPOSITIONS {\n      (\"assigned_to\", {type: \"Person\", name: \"$system\"})\n      (\"belongs_to_domain\", {type: \"Domain\", name: \"System\"})\n    }\n  }\n}\nWITH METADATA { source: \"SleepCycle\", author: \"$system\", created_at: :timestamp }".into(),
                json!({"name": name, "target_type": c.concept_type, "target_name": c.name, "reason": reason, "timestamp": self.report.cycle_start}),
            );
            self.report.review_tasks.push(name);
        }
        if doomed.is_empty() && doomed_links.is_empty() {
            return Ok(());
        }
        // Log before deleting (Safety Rules): every element and every link its
        // deletion takes along; nothing outside this plan is deleted.
        let plan = json!({
            "timestamp": self.report.cycle_start,
            "trigger": self.report.trigger,
            "phase": "ttl_reclamation",
            "about_to_delete": {
                "concepts": doomed.iter().map(|(c, p)| json!({"id": c.id, "type": c.concept_type, "name": c.name, "with_links": p.with_links})).collect::<Vec<_>>(),
                "propositions": doomed_links.iter().map(|p| json!({"id": p.id, "with_links": p.with_links})).collect::<Vec<_>>(),
            },
        });
        self.append_log(plan, false)?;
        for (c, p) in doomed {
            if self.delete_planned(&p) {
                self.report.deleted_concepts.push(c);
            }
        }
        for p in doomed_links {
            self.delete_planned(&p);
        }
        Ok(())
    }

    /// Runs (or, in a dry run, lists) one planned deletion, re-checked in its own
    /// transaction ([`super::reclaim::delete_if_still_eligible`]); whether the element was
    /// deleted (in a dry run: would be).
    fn delete_planned(&mut self, p: &Planned) -> bool {
        let command = if p.key.is_some() {
            "DELETE CONCEPT ?n DETACH WHERE { ?n {id: :id} }"
        } else {
            "DELETE PROPOSITIONS ?link WHERE { ?link (id: :id) }"
        };
        let mut st = Statement {
            phase: "ttl_reclamation",
            command: command.into(),
            parameters: json!({"id": p.id, "with_links": p.with_links}),
            applied: false,
            result: None,
            error: None,
        };
        let deleted = if self.opts.dry_run {
            self.report.deleted_propositions +=
                p.with_links.len() as u64 + u64::from(p.key.is_none());
            true
        } else {
            st.applied = true;
            match self.nexus.brain().reclaim(p, self.now) {
                Ok(Reclaimed::Deleted {
                    concepts,
                    propositions,
                }) => {
                    self.report.deleted_propositions += propositions;
                    st.result = Some(
                        json!({"deleted_concepts": concepts, "deleted_propositions": propositions}),
                    );
                    concepts > 0 || propositions > 0
                }
                Ok(Reclaimed::Skipped(reason)) => {
                    st.result = Some(json!({"skipped": reason}));
                    self.report.skipped.push(Skipped {
                        id: p.id.clone(),
                        reason,
                    });
                    false
                }
                Err(e) => {
                    self.report.issues.push(format!(
                        "ttl_reclamation: {} ({})",
                        e.message,
                        e.code.as_str()
                    ));
                    st.error = Some(err_json(&e));
                    false
                }
            }
        };
        self.report.statements.push(st);
        deleted
    }

    /// Appends `entry` to `$system.attributes.maintenance_log` (read-merge-write under
    /// `EXPECT VERSION`, retried on a version conflict), and sets `last_sleep_cycle`
    /// when `finish`.
    fn append_log(&mut self, entry: Value, finish: bool) -> Result<(), KipError> {
        let set_last = if finish {
            "last_sleep_cycle: :timestamp, "
        } else {
            ""
        };
        let command = format!(
            "UPSERT {{\n  CONCEPT ?system {{\n    {{type: \"Person\", name: \"$system\"}}\n    EXPECT VERSION :v\n    SET ATTRIBUTES {{ {set_last}maintenance_log: :log }}\n  }}\n}}\nWITH METADATA {{ source: \"SleepCycle\", author: \"$system\" }}"
        );
        for attempt in 0..3 {
            let r = self.read(
                "FIND(?system.attributes.maintenance_log, ?system.metadata._version) WHERE { ?system {type: \"Person\", name: \"$system\"} }",
                json!({}),
            )?;
            let mut log = match r.get(0).and_then(|c| c.get(0)) {
                Some(Value::Array(a)) => a.clone(),
                _ => Vec::new(),
            };
            let v = r.get(1).and_then(|c| c.get(0)).cloned().unwrap_or(json!(0));
            log.push(entry.clone());
            if log.len() > MAINTENANCE_LOG_MAX {
                log.drain(..log.len() - MAINTENANCE_LOG_MAX);
            }
            let params = json!({"v": v, "log": log, "timestamp": self.report.cycle_start});
            if self.opts.dry_run {
                self.write("finalization", command, params);
                return Ok(());
            }
            match self.read(&command, params.clone()) {
                Ok(result) => {
                    self.report.statements.push(Statement {
                        phase: "finalization",
                        command,
                        parameters: params,
                        applied: true,
                        result: Some(result),
                        error: None,
                    });
                    return Ok(());
                }
                Err(e) if e.code == ErrorCode::VersionConflict && attempt < 2 => continue,
                Err(e) => {
                    self.report.issues.push(format!(
                        "maintenance_log: {} ({})",
                        e.message,
                        e.code.as_str()
                    ));
                    return Err(e);
                }
            }
        }
        Ok(())
    }
}

/// Phase 9's audit on one snapshot: expired concepts with their verdict and number of
/// incident links, oldest `expires_at` first; expired links with theirs; and the
/// `(type, name)` targets of open review SleepTasks.
#[allow(clippy::type_complexity)]
fn audit(
    r: &dyn GraphRead,
    now: SystemTime,
) -> Result<
    (
        Vec<(ConceptRef, Verdict, Option<Planned>)>,
        Vec<(String, LinkVerdict, Option<Planned>)>,
        std::collections::HashSet<(String, String)>,
    ),
    KipError,
> {
    let mut ids = Vec::new();
    r.scan_concepts(&mut |id| {
        ids.push(id);
        Ok(true)
    })?;
    let mut concepts = Vec::new();
    let mut open_reviews = std::collections::HashSet::new();
    for id in ids {
        let Some(c) = r.concept(id)? else { continue };
        if c.concept_type == "SleepTask"
            && c.attributes.get("requested_action").and_then(Value::as_str) == Some("review")
            && matches!(
                c.attributes.get("status").and_then(Value::as_str),
                Some("pending" | "in_progress")
            )
        {
            if let (Some(t), Some(n)) = (
                c.attributes.get("target_type").and_then(Value::as_str),
                c.attributes.get("target_name").and_then(Value::as_str),
            ) {
                open_reviews.insert((t.to_string(), n.to_string()));
            }
        }
        if !c.metadata.contains_key("expires_at") {
            continue;
        }
        let v = health::verdict(r, id, &c, now)?;
        if v == Verdict::Keep {
            continue;
        }
        let plan = if v == Verdict::Delete {
            Some(Planned::concept(
                r,
                id,
                (c.concept_type.clone(), c.name.clone()),
            )?)
        } else {
            None
        };
        let expires = c
            .metadata
            .get("expires_at")
            .and_then(Value::as_str)
            .and_then(time::parse);
        concepts.push((expires, ConceptRef::of(id, &c), v, plan));
    }
    concepts.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.id.cmp(&b.1.id)));
    let mut pids = Vec::new();
    r.scan_props(&mut |id| {
        pids.push(id);
        Ok(true)
    })?;
    let mut links = Vec::new();
    for id in pids {
        let Some(p) = r.prop(id)? else { continue };
        if !p.metadata.contains_key("expires_at") {
            continue;
        }
        let v = health::link_verdict(r, &p, now)?;
        if v != LinkVerdict::Keep {
            let expires = p
                .metadata
                .get("expires_at")
                .and_then(Value::as_str)
                .and_then(time::parse);
            let plan = if v == LinkVerdict::Delete {
                Some(Planned::link(r, id)?)
            } else {
                None
            };
            links.push((expires, ElemRef::Prop(id).id_string(), v, plan));
        }
    }
    links.sort_by_key(|l| l.0);
    Ok((
        concepts.into_iter().map(|(_, c, v, n)| (c, v, n)).collect(),
        links.into_iter().map(|(_, id, v, p)| (id, v, p)).collect(),
        open_reviews,
    ))
}

/// A name-safe slug: letters, digits, `-` and `_` kept, the rest `_`, at most 80 chars.
fn slug(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(80)
        .collect()
}

/// Runs one deterministic sleep cycle on `nexus` (see the module docs).
pub fn run(nexus: &Nexus, opts: &SleepOptions) -> Result<SleepReport, KipError> {
    let now = opts.now.unwrap_or_else(crate::time::now);
    let health = nexus.read(|r| health::health(r, now))?;
    let mut cycle = Cycle {
        nexus,
        opts,
        now,
        report: SleepReport {
            cycle_start: time::format(now),
            finished_at: String::new(),
            trigger: opts.trigger.clone(),
            dry_run: opts.dry_run,
            health,
            decayed_links: 0,
            deleted_concepts: Vec::new(),
            deleted_propositions: 0,
            extended: Vec::new(),
            review_tasks: Vec::new(),
            cap_reached: false,
            skipped: Vec::new(),
            issues: Vec::new(),
            statements: Vec::new(),
            llm_phase: opts.llm_phase.clone(),
        },
    };
    cycle.decay()?;
    cycle.reclaim()?;
    let r = &cycle.report;
    let mut actions = Vec::new();
    if r.decayed_links > 0 {
        actions.push(format!(
            "decayed the memory strength of {} links",
            r.decayed_links
        ));
    }
    if !r.deleted_concepts.is_empty() || r.deleted_propositions > 0 {
        actions.push(format!(
            "deleted {} expired concepts and {} propositions",
            r.deleted_concepts.len(),
            r.deleted_propositions
        ));
    }
    if !r.extended.is_empty() {
        actions.push(format!(
            "extended expires_at of {} elements",
            r.extended.len()
        ));
    }
    if !r.review_tasks.is_empty() {
        actions.push(format!(
            "created {} review SleepTasks",
            r.review_tasks.len()
        ));
    }
    let mut issues: Vec<Value> = r.issues.iter().map(|s| json!(s)).collect();
    for t in &r.health.triggers {
        issues.push(json!(format!("threshold exceeded: {t}")));
    }
    if r.cap_reached {
        issues.push(json!(
            "deletion cap reached: more expired elements wait for the next cycle"
        ));
    }
    let mut llm_items = 0u64;
    let llm_entry = r.llm_phase.as_ref().map(|l| {
        // Its KML statements (reads are left out of the log), and how it ended.
        let kml: Vec<Value> = l["statements"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|s| s["write"] == json!(true))
            .cloned()
            .collect();
        llm_items = kml.iter().filter(|s| s["applied"] == json!(true)).count() as u64;
        json!({
            "model": l["model"],
            "turns": l["turns"],
            "stop": l["stop"],
            "summary": l["summary"],
            "kml": kml,
        })
    });
    if let Some(l) = &llm_entry {
        actions.push(format!(
            "language-model phases: {} KML statements applied ({})",
            llm_items,
            l["stop"].as_str().unwrap_or("?")
        ));
    }
    let mut entry = json!({
        "timestamp": r.cycle_start,
        "trigger": r.trigger,
        "actions_taken": actions,
        "items_processed": r.decayed_links + r.deleted_concepts.len() as u64 + r.deleted_propositions + r.extended.len() as u64 + r.review_tasks.len() as u64 + llm_items,
        "issues_found": issues,
    });
    if let Some(l) = llm_entry {
        entry["llm_phase"] = l;
    }
    cycle.append_log(entry, true)?;
    cycle.report.finished_at = time::now_text();
    Ok(cycle.report)
}
