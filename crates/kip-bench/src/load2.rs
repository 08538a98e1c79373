//! The generated graph written in KIP 2.0: the same seeded sequence as the 1.x load
//! (`generate::graph`), sent as 2.0 requests of one `MUTATE` each. Concepts are
//! `CREATE CONCEPT` keyed by their 1.x name (as a 1.x concept reads in 2.0: key = name,
//! Specification §7.3) with the 1.x attributes (plus the `summary` the Cognitive Memory
//! Profile requires of an `Event`: its `content_summary`); each distinct link is a
//! Proposition with one supporting Assertion by the bench's agent (`ASSERT ... { by,
//! mode: "stated" }`; the `about` links, whose ids the higher-order `stated` links cite,
//! in the long form `ENSURE PROPOSITION` + `CREATE ASSERTION`, to which the sugar
//! desugars). A proposition's ends are element ids, passed as request parameters: a
//! 2.0 write names an element by id, never by an inline `{type, name}` match.
//!
//! Three threads, as in the 1.x load: the generator; a preparer that turns batches into
//! request JSON (ids resolved from the answers to earlier batches, duplicate links
//! dropped); this one, which executes the requests and is the one timed.

use super::*;
use crate::generate::{graph, End, Sink};
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::mpsc::{Receiver, Sender};

/// The name of the concept that asserts every link of the 2.0 graph (a `Person`: an
/// assertion's `asserted_by` is a concept, and `$self` is not a 2.0 element).
pub(crate) const AGENT: &str = "kip-bench-agent";

/// A 2.0 request with one operation.
pub(crate) fn request(command: &str, parameters: Value) -> Value {
    json!({"kip": "2.0", "operations": [{"command": command, "parameters": parameters}]})
}

/// Runs a 2.0 command that must succeed; its result.
pub(crate) fn run2(nexus: &Nexus, command: &str, parameters: Value) -> Result<Value> {
    let r = nexus
        .execute_json(&request(command, parameters), Access::ReadWrite)
        .to_json();
    if r["status"] != "succeeded" {
        anyhow::bail!(
            "KIP 2.0 command failed: {}\n{}",
            failure(&r),
            command.chars().take(300).collect::<String>()
        );
    }
    Ok(r["results"][0]["result"].clone())
}

/// The error of a 2.0 response (the operation's, else the request's), as text.
pub(crate) fn failure(r: &Value) -> String {
    let e = match &r["results"][0]["error"] {
        Value::Null => &r["error"],
        e => e,
    };
    format!(
        "{}: {}",
        e["code"].as_str().unwrap_or("?"),
        e["message"].as_str().unwrap_or("")
    )
}

/// The id of the concept of `ty` keyed `name` in a memory, through a 2.0 read (a
/// concept 1.x wrote has its name as its key).
pub(crate) fn concept_id(nexus: &Nexus, ty: &str, name: &str) -> Result<String> {
    let r = run2(
        nexus,
        "FIND(?c.id) WHERE { ?c {type: :t, key: :n} } LIMIT 1",
        json!({"t": ty, "n": name}),
    )?;
    r[0].as_str()
        .map(str::to_string)
        .ok_or_else(|| anyhow::anyhow!("no {ty} named {name:?} in the memory"))
}

/// The bench's agent in a memory: found, or created through 2.0.
pub(crate) fn agent(nexus: &Nexus) -> Result<String> {
    if let Ok(id) = concept_id(nexus, "Person", AGENT) {
        return Ok(id);
    }
    let r = run2(
        nexus,
        "CREATE CONCEPT ?a { TYPE \"Person\" NAME :n SET FIELDS { key: :n } }",
        json!({"n": AGENT}),
    )?;
    r["handles"]["a"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| anyhow::anyhow!("CREATE CONCEPT answered no id: {r}"))
}

/// One concept to create.
pub(crate) struct NewConcept {
    ty: &'static str,
    i: u32,
    /// `key: value` text of its attributes.
    attrs: String,
}

/// What the generator hands to the preparer.
enum Batch {
    Concepts(Vec<NewConcept>),
    ConceptsDone(usize),
    Links(Vec<(End, &'static str, End)>),
}

/// The 2.0 sink: batches of `size` blocks.
struct Kip2Batches<'a> {
    tx: &'a SyncSender<Batch>,
    size: usize,
    concepts: Vec<NewConcept>,
    links: Vec<(End, &'static str, End)>,
    sent: (usize, usize),
}

impl Kip2Batches<'_> {
    fn send(&self, b: Batch) -> Result<()> {
        self.tx
            .send(b)
            .map_err(|_| anyhow::anyhow!("the preparing thread stopped"))
    }
    fn flush_concepts(&mut self) -> Result<()> {
        if !self.concepts.is_empty() {
            self.sent.0 += self.concepts.len();
            let b = std::mem::replace(&mut self.concepts, Vec::with_capacity(self.size));
            self.send(Batch::Concepts(b))?;
        }
        Ok(())
    }
    fn flush_links(&mut self) -> Result<()> {
        if !self.links.is_empty() {
            self.sent.1 += self.links.len();
            let b = std::mem::replace(&mut self.links, Vec::with_capacity(self.size));
            self.send(Batch::Links(b))?;
        }
        Ok(())
    }
}

impl Sink for Kip2Batches<'_> {
    fn concept(&mut self, ty: &'static str, i: usize, attrs: &[(&str, String)]) -> Result<()> {
        let mut text: Vec<String> = attrs.iter().map(|(k, v)| format!("{k}: {v}")).collect();
        if ty == "Event" {
            // The profile's Event requires `summary`.
            if let Some((_, v)) = attrs.iter().find(|(k, _)| *k == "content_summary") {
                text.push(format!("summary: {v}"));
            }
        }
        self.concepts.push(NewConcept {
            ty,
            i: i as u32,
            attrs: text.join(", "),
        });
        if self.concepts.len() >= self.size {
            self.flush_concepts()?;
        }
        Ok(())
    }

    fn concepts_done(&mut self) -> Result<()> {
        self.flush_concepts()?;
        self.send(Batch::ConceptsDone(self.sent.0))
    }

    fn link(&mut self, s: End, p: &'static str, o: End) -> Result<()> {
        self.links.push((s, p, o));
        if self.links.len() >= self.size {
            self.flush_links()?;
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<(usize, usize)> {
        self.flush_links()?;
        Ok(self.sent)
    }
}

/// A request ready to run, or the concepts-done mark.
enum Prepared {
    Request(Box<Value>),
    ConceptsDone(usize),
}

/// What an answered batch binds: the handles whose ids later batches need.
enum Pending {
    /// Handle `c<k>` is the `k`th of these concepts.
    Concepts(Vec<(&'static str, u32)>),
    /// Handle `p<k>` is the `about` proposition of (document, topic).
    Abouts(Vec<(usize, (u32, u32))>),
}

/// The preparer's memory of ids.
struct Ids {
    agent: String,
    concepts: HashMap<(&'static str, u32), String>,
    abouts: HashMap<(u32, u32), String>,
    /// Requests sent whose answers are not absorbed yet, oldest first.
    pending: VecDeque<Pending>,
    answers: Receiver<(Box<Value>, Value)>,
    seen: HashSet<(End, &'static str, End)>,
    duplicates: usize,
}

impl Ids {
    /// Takes the next answer's handles into the maps.
    fn absorb(&mut self) -> Result<()> {
        let (req, answer) = self
            .answers
            .recv()
            .map_err(|_| anyhow::anyhow!("the loading thread stopped"))?;
        drop(req);
        let handles = &answer["results"][0]["result"]["handles"];
        let handle = |h: String| -> Result<String> {
            handles[&h]
                .as_str()
                .map(str::to_string)
                .ok_or_else(|| anyhow::anyhow!("the answer binds no {h}"))
        };
        match self.pending.pop_front() {
            Some(Pending::Concepts(cs)) => {
                for (k, c) in cs.into_iter().enumerate() {
                    self.concepts.insert(c, handle(format!("c{k}"))?);
                }
            }
            Some(Pending::Abouts(abouts)) => {
                for (k, fact) in abouts {
                    self.abouts.insert(fact, handle(format!("p{k}"))?);
                }
            }
            None => {}
        }
        Ok(())
    }

    /// The id of a link end, waiting for the answers that bind it.
    fn end(&mut self, e: End) -> Result<String> {
        loop {
            let known = match e {
                End::Concept(t, i) => self.concepts.get(&(t, i)),
                End::WorkDomain => self.concepts.get(&("Domain", 0)),
                End::About(d, t) => self.abouts.get(&(d, t)),
            };
            if let Some(id) = known {
                return Ok(id.clone());
            }
            if self.pending.is_empty() {
                anyhow::bail!("no id for {e:?}: it was never written");
            }
            self.absorb()?;
        }
    }

    fn concepts(&mut self, batch: Vec<NewConcept>) -> Value {
        let mut text = String::from("MUTATE {\n");
        let mut order = Vec::with_capacity(batch.len());
        for (k, c) in batch.into_iter().enumerate() {
            let name = format!("{}:{}", c.ty.to_lowercase(), c.i);
            let _ = writeln!(
                text,
                "CREATE CONCEPT ?c{k} {{ TYPE {} NAME {name} SET FIELDS {{ key: {name} }} SET ATTRIBUTES {{ {} }} }}",
                q(c.ty),
                c.attrs,
                name = q(&name),
            );
            order.push((c.ty, c.i));
        }
        text.push('}');
        self.pending.push_back(Pending::Concepts(order));
        request(&text, json!({}))
    }

    fn links(&mut self, batch: Vec<(End, &'static str, End)>) -> Result<Value> {
        let mut text = String::from("MUTATE {\n");
        let mut params = Map::new();
        params.insert("agent".into(), json!(self.agent));
        let mut abouts = Vec::new();
        for (k, (s, p, o)) in batch.into_iter().enumerate() {
            if !self.seen.insert((s, p, o)) {
                self.duplicates += 1;
                continue;
            }
            params.insert(format!("s{k}"), json!(self.end(s)?));
            params.insert(format!("o{k}"), json!(self.end(o)?));
            if let (End::Concept(_, d), "about", End::Concept(_, t)) = (s, p, o) {
                let _ = writeln!(
                    text,
                    "ENSURE PROPOSITION ?p{k} (:s{k}, \"about\", :o{k})\nCREATE ASSERTION ?a{k} {{ SET FIELDS {{ proposition: ?p{k}, asserted_by: :agent, stance: \"support\", mode: \"stated\" }} }}"
                );
                abouts.push((k, (d, t)));
            } else {
                let _ = writeln!(
                    text,
                    "ASSERT (:s{k}, {}, :o{k}) {{ by: :agent, mode: \"stated\" }}",
                    q(p)
                );
            }
        }
        text.push('}');
        self.pending.push_back(Pending::Abouts(abouts));
        Ok(request(&text, Value::Object(params)))
    }
}

/// What the 2.0 load measured.
pub(crate) struct Load2 {
    pub(crate) time: Duration,
    pub(crate) concepts: usize,
    /// Link blocks generated (the 1.x load's count, duplicates included).
    pub(crate) links: usize,
    /// Generated links that repeat an earlier tuple, not written again.
    pub(crate) duplicates: usize,
}

/// Writes the graph of scale `n` into `nexus` through KIP 2.0 (after the bench's 1.x
/// schema and the agent, untimed, as the 1.x load's schema capsule is).
pub(crate) fn load_kip2(nexus: &Nexus, n: usize, seed: u64, size: usize) -> Result<Load2> {
    run_ok(nexus, SCHEMA)?;
    let agent = agent(nexus)?;
    let work = concept_id(nexus, "Domain", "Work")?;
    let start = Instant::now();
    let (tx, rx) = std::sync::mpsc::sync_channel::<Batch>(2);
    let (ready_tx, ready_rx) = std::sync::mpsc::sync_channel::<Prepared>(1);
    let (answer_tx, answer_rx): (Sender<(Box<Value>, Value)>, _) = std::sync::mpsc::channel();
    let (concepts, links, duplicates) = std::thread::scope(|scope| -> Result<_> {
        let generator = scope.spawn(move || {
            let mut sink = Kip2Batches {
                tx: &tx,
                size,
                concepts: Vec::with_capacity(size),
                links: Vec::with_capacity(size),
                sent: (0, 0),
            };
            graph(&mut sink, n, seed)
        });
        let preparer = scope.spawn(move || -> Result<usize> {
            let mut ids = Ids {
                agent,
                concepts: HashMap::from([(("Domain", 0), work)]),
                abouts: HashMap::new(),
                pending: VecDeque::new(),
                answers: answer_rx,
                seen: HashSet::new(),
                duplicates: 0,
            };
            for batch in rx {
                let ready = match batch {
                    Batch::Concepts(b) => Prepared::Request(Box::new(ids.concepts(b))),
                    Batch::Links(b) => Prepared::Request(Box::new(ids.links(b)?)),
                    Batch::ConceptsDone(k) => Prepared::ConceptsDone(k),
                };
                if ready_tx.send(ready).is_err() {
                    break;
                }
            }
            drop(ready_tx);
            // The last answers, dropped here.
            while !ids.pending.is_empty() && ids.absorb().is_ok() {}
            Ok(ids.duplicates)
        });
        let loaded = (|| -> Result<()> {
            for ready in ready_rx {
                match ready {
                    Prepared::Request(req) => {
                        let r = nexus.execute_json(&req, Access::ReadWrite).to_json();
                        if r["status"] != "succeeded" {
                            let text = req["operations"][0]["command"].as_str().unwrap_or("");
                            anyhow::bail!(
                                "KIP 2.0 batch failed: {}\n{}",
                                failure(&r),
                                text.chars().take(400).collect::<String>()
                            );
                        }
                        let _ = answer_tx.send((req, r));
                    }
                    Prepared::ConceptsDone(k) => eprintln!(
                        "[{n}] 2.0: {k} concepts written in {:.1}s",
                        start.elapsed().as_secs_f64()
                    ),
                }
            }
            Ok(())
        })();
        drop(answer_tx);
        let duplicates = preparer
            .join()
            .map_err(|_| anyhow::anyhow!("the batch preparer panicked"))?;
        let generated = generator
            .join()
            .map_err(|_| anyhow::anyhow!("the batch generator panicked"))?;
        loaded?;
        let duplicates = duplicates?;
        let (c, l) = generated?;
        Ok((c, l, duplicates))
    })?;
    Ok(Load2 {
        time: start.elapsed(),
        concepts,
        links,
        duplicates,
    })
}
