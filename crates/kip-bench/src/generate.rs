//! The synthetic memory graph: a deterministic generator of UPSERT capsules (people,
//! projects, topics, documents, and links between them, with skewed made-up words) and
//! the loader that runs them through execute_kip while the next ones are generated.

use super::*;

/// xorshift64*: small, fast, deterministic.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % (n.max(1) as u64)) as usize
    }
    pub(crate) fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Skewed towards small indices (a few hubs get most links).
    pub(crate) fn skewed(&mut self, n: usize) -> usize {
        let u = self.unit();
        ((u * u * u) * n as f64) as usize % n.max(1)
    }
}

pub(crate) const SYLLABLES: [&str; 24] = [
    "ka", "lo", "mi", "ra", "ten", "vo", "shi", "del", "par", "quin", "zu", "bel", "tor", "nex",
    "sa", "fi", "gor", "hal", "jun", "ly", "mor", "pe", "ri", "ux",
];

/// 13,824 made-up words (three syllables each); descriptions draw them with a skew, so
/// a few words are common and most are rare, as in real text.
pub(crate) fn vocabulary() -> Vec<String> {
    let mut words = Vec::new();
    for a in SYLLABLES {
        for b in SYLLABLES {
            for c in SYLLABLES {
                words.push(format!("{a}{b}{c}"));
            }
        }
    }
    words
}

pub(crate) struct Sizes {
    pub(crate) person: usize,
    pub(crate) project: usize,
    pub(crate) topic: usize,
    pub(crate) document: usize,
    pub(crate) event: usize,
    pub(crate) category: usize,
}

impl Sizes {
    pub(crate) fn new(n: usize) -> Sizes {
        let category = (n / 100).clamp(10, 1000);
        let rest = n.saturating_sub(category);
        Sizes {
            person: rest * 20 / 100,
            project: rest * 10 / 100,
            topic: rest * 30 / 100,
            document: rest * 20 / 100,
            event: rest - rest * 80 / 100,
            category,
        }
    }
}

pub(crate) fn q(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

pub(crate) const SCHEMA: &str = r#"UPSERT {
  CONCEPT ?a { {type: "$ConceptType", name: "Project"} SET ATTRIBUTES { description: "A project people work on" } }
  CONCEPT ?b { {type: "$ConceptType", name: "Topic"} SET ATTRIBUTES { description: "A subject of knowledge" } }
  CONCEPT ?c { {type: "$ConceptType", name: "Document"} SET ATTRIBUTES { description: "A written document" } }
  CONCEPT ?d { {type: "$ConceptType", name: "Category"} SET ATTRIBUTES { description: "A category in a hierarchy" } }
  CONCEPT ?e { {type: "$PropositionType", name: "knows"} SET ATTRIBUTES { description: "knows", subject_types: ["Person"], object_types: ["Person"] } }
  CONCEPT ?f { {type: "$PropositionType", name: "works_on"} SET ATTRIBUTES { description: "works on", subject_types: ["Person"], object_types: ["Project"] } }
  CONCEPT ?g { {type: "$PropositionType", name: "about"} SET ATTRIBUTES { description: "is about", subject_types: ["Document"], object_types: ["Topic"] } }
  CONCEPT ?h { {type: "$PropositionType", name: "in_category"} SET ATTRIBUTES { description: "in category", subject_types: ["Topic"], object_types: ["Category"] } }
  CONCEPT ?i { {type: "$PropositionType", name: "is_subclass_of"} SET ATTRIBUTES { description: "subclass", subject_types: ["Category"], object_types: ["Category"] } }
  CONCEPT ?j { {type: "$PropositionType", name: "related_to"} SET ATTRIBUTES { description: "related", subject_types: ["*"], object_types: ["*"] } }
  CONCEPT ?k { {type: "$PropositionType", name: "cites"} SET ATTRIBUTES { description: "cites", subject_types: ["Document"], object_types: ["Document"] } }
  CONCEPT ?l { {type: "$PropositionType", name: "stated"} SET ATTRIBUTES { description: "stated a fact", subject_types: ["Person"], object_types: ["*"] } }
  CONCEPT ?m { {type: "Domain", name: "Work"} SET ATTRIBUTES { description: "Projects and their categories" } }
}"#;

pub(crate) fn describe(rng: &mut Rng, words: &[String], n: usize) -> String {
    (0..n)
        .map(|_| words[rng.skewed(words.len())].as_str())
        .collect::<Vec<_>>()
        .join(" ")
}

/// What the generator thread hands to the loading thread.
pub(crate) enum Capsule {
    /// One UPSERT capsule to execute.
    Text(String),
    /// All concept capsules (this many blocks) have been sent; the links follow.
    ConceptsDone(usize),
}

/// Collects blocks into 1,000-block UPSERT capsules and hands each one, as it fills, to
/// the loading thread (a bounded channel: the generator never holds the whole graph in
/// memory nor runs far ahead).
pub(crate) struct Loader<'a> {
    pub(crate) tx: &'a SyncSender<Capsule>,
    pub(crate) blocks: Vec<String>,
    pub(crate) loaded: usize,
    pub(crate) metadata: &'static str,
    pub(crate) size: usize,
}

impl Loader<'_> {
    pub(crate) fn push(&mut self, block: String) -> Result<()> {
        self.blocks.push(block);
        if self.blocks.len() >= self.size {
            self.flush()?;
        }
        Ok(())
    }

    pub(crate) fn flush(&mut self) -> Result<()> {
        if self.blocks.is_empty() {
            return Ok(());
        }
        let text = format!("UPSERT {{\n{}\n}}{}", self.blocks.join("\n"), self.metadata);
        self.tx
            .send(Capsule::Text(text))
            .map_err(|_| anyhow::anyhow!("the loading thread stopped"))?;
        self.loaded += self.blocks.len();
        self.blocks.clear();
        Ok(())
    }
}

/// Generates the graph (concepts first, then links) and loads it through execute_kip.
/// Returns the load time and the numbers of concept and link blocks.
///
/// The capsule texts are generated on a second thread while this one executes them, as
/// a client with its capsules ready (read from files, or produced by another process)
/// would send them: the time measured is the engine's, not the generator's (about 7% of
/// a 1M load when both ran on one thread). Each capsule is parsed and bound on a third
/// thread while the one before it executes, as `kip serve` parses a request on the
/// request's own thread while the writer runs the previous one (a client with two
/// capsules in flight); the parsed command goes back to that thread to be dropped (a
/// syntax tree freed on another thread than the one that built it costs more).
pub(crate) fn load(
    nexus: &Nexus,
    n: usize,
    seed: u64,
    size: usize,
) -> Result<(Duration, usize, usize)> {
    use kip_engine::Outcome;
    run_ok(nexus, SCHEMA)?;
    let start = Instant::now();
    let (tx, rx) = std::sync::mpsc::sync_channel(2);
    let (parsed_tx, parsed_rx) = std::sync::mpsc::sync_channel::<Parsed>(1);
    let (done_tx, done_rx) = std::sync::mpsc::channel::<Box<kip_lang::Command>>();
    let (concepts, links) = std::thread::scope(|scope| -> Result<(usize, usize)> {
        let generator = scope.spawn(move || generate(&tx, n, seed, size));
        let parser = scope.spawn(move || -> Result<()> {
            for capsule in rx {
                let parsed = match capsule {
                    Capsule::Text(text) => {
                        let cmd = kip_lang::parse_command(&text)
                            .and_then(|c| kip_lang::bind_owned(c, &Map::new()))
                            .map_err(|e| {
                                anyhow::anyhow!(
                                    "benchmark capsule does not parse: {e}\n{}",
                                    text.chars().take(300).collect::<String>()
                                )
                            })?;
                        Parsed::Command(Box::new(cmd))
                    }
                    Capsule::ConceptsDone(blocks) => Parsed::ConceptsDone(blocks),
                };
                if parsed_tx.send(parsed).is_err() {
                    break;
                }
                // The commands executed since, dropped here.
                while done_rx.try_recv().is_ok() {}
            }
            drop(parsed_tx);
            while done_rx.recv().is_ok() {}
            Ok(())
        });
        let loaded = (|| -> Result<()> {
            for parsed in parsed_rx {
                match parsed {
                    Parsed::Command(cmd) => {
                        if let Outcome::Err(e) = nexus.execute_command(&cmd, false) {
                            anyhow::bail!("benchmark capsule failed: {e}");
                        }
                        let _ = done_tx.send(cmd);
                    }
                    Parsed::ConceptsDone(blocks) => eprintln!(
                        "[{n}] {blocks} concepts loaded in {:.1}s",
                        start.elapsed().as_secs_f64()
                    ),
                }
            }
            Ok(())
        })();
        drop(done_tx);
        // On a failed load the receivers are gone, so the next sends fail and the
        // threads stop; their own errors are then only echoes of this one.
        let parsed = parser
            .join()
            .map_err(|_| anyhow::anyhow!("the capsule parser panicked"))?;
        let generated = generator
            .join()
            .map_err(|_| anyhow::anyhow!("the capsule generator panicked"))?;
        loaded?;
        parsed?;
        generated
    })?;
    Ok((start.elapsed(), concepts, links))
}

/// What the parsing thread hands to the loading thread.
enum Parsed {
    /// One UPSERT capsule, parsed and bound.
    Command(Box<kip_lang::Command>),
    /// All concept capsules (this many blocks) have been sent; the links follow.
    ConceptsDone(usize),
}

/// Generates the capsules of the graph (concepts first, then links) into `tx`; returns
/// the numbers of concept and link blocks.
///
/// Long (about 180 lines): the graph's shape (types, attributes, degrees, self-loops)
/// is one seeded random sequence; splitting it would change the draws and the graph.
pub(crate) fn generate(
    tx: &SyncSender<Capsule>,
    n: usize,
    seed: u64,
    size: usize,
) -> Result<(usize, usize)> {
    let s = Sizes::new(n);
    let words = vocabulary();
    let mut rng = Rng(seed | 1);
    let mut concepts = Loader {
        tx,
        blocks: Vec::with_capacity(size),
        loaded: 0,
        metadata: " WITH METADATA { source: \"kip-bench\" }",
        size,
    };
    let concept = |t: &str, name: String, attrs: String| {
        format!(
            "CONCEPT {{ {{type: {}, name: {}}} SET ATTRIBUTES {{ {attrs} }} }}",
            q(t),
            q(&name)
        )
    };
    for i in 0..s.person {
        let d = describe(&mut rng, &words, 6);
        concepts.push(concept(
            "Person",
            format!("person:{i}"),
            format!("description: {}, rank: {}", q(&d), rng.below(100)),
        ))?;
    }
    for i in 0..s.project {
        let d = describe(&mut rng, &words, 8);
        concepts.push(concept(
            "Project",
            format!("project:{i}"),
            format!("description: {}, rank: {}", q(&d), rng.below(100)),
        ))?;
    }
    for i in 0..s.topic {
        let d = describe(&mut rng, &words, 5);
        concepts.push(concept(
            "Topic",
            format!("topic:{i}"),
            format!("description: {}, rank: {}", q(&d), rng.below(100)),
        ))?;
    }
    for i in 0..s.document {
        let d = describe(&mut rng, &words, 10);
        concepts.push(concept(
            "Document",
            format!("document:{i}"),
            format!("description: {}, rank: {}", q(&d), rng.below(100)),
        ))?;
    }
    for i in 0..s.event {
        let day = 1 + rng.below(28);
        let hour = rng.below(24);
        let month = 1 + rng.below(12);
        let summary = describe(&mut rng, &words, 6);
        concepts.push(concept(
            "Event",
            format!("event:{i}"),
            format!("event_class: \"Conversation\", start_time: \"2026-{month:02}-{day:02}T{hour:02}:00:00Z\", content_summary: {}", q(&summary)),
        ))?;
    }
    for i in 0..s.category {
        let d = describe(&mut rng, &words, 3);
        concepts.push(concept(
            "Category",
            format!("category:{i}"),
            format!("description: {}", q(&d)),
        ))?;
    }
    concepts.flush()?;
    tx.send(Capsule::ConceptsDone(concepts.loaded))
        .map_err(|_| anyhow::anyhow!("the loading thread stopped"))?;
    let mut links = Loader {
        tx,
        blocks: Vec::with_capacity(size),
        loaded: 0,
        metadata: "",
        size,
    };
    let c = |t: &str, i: usize| {
        format!(
            "{{type: {}, name: {}}}",
            q(t),
            q(&format!("{}:{i}", t.to_lowercase()))
        )
    };
    let link = |a: String, p: &str, b: String| format!("PROPOSITION {{ ({a}, {}, {b}) }}", q(p));
    let mut about: Vec<(u32, u32)> = Vec::new();
    for i in 0..s.person {
        for _ in 0..4 {
            links.push(link(
                c("Person", i),
                "knows",
                c("Person", rng.skewed(s.person)),
            ))?;
        }
        for _ in 0..rng.below(4) {
            links.push(link(
                c("Person", i),
                "works_on",
                c("Project", rng.skewed(s.project)),
            ))?;
        }
    }
    for i in 0..s.project.min(1000) {
        links.push(link(
            c("Project", i),
            "belongs_to_domain",
            "{type: \"Domain\", name: \"Work\"}".to_string(),
        ))?;
    }
    for i in 0..s.document {
        for _ in 0..3 {
            let t = rng.skewed(s.topic);
            about.push((i as u32, t as u32));
            links.push(link(c("Document", i), "about", c("Topic", t)))?;
        }
        links.push(link(
            c("Document", i),
            "cites",
            c("Document", rng.below(s.document)),
        ))?;
    }
    for i in 0..s.topic {
        links.push(link(
            c("Topic", i),
            "in_category",
            c("Category", rng.skewed(s.category)),
        ))?;
        links.push(link(
            c("Topic", i),
            "related_to",
            c("Topic", rng.below(s.topic)),
        ))?;
    }
    for i in 0..s.event {
        for _ in 0..3 {
            links.push(link(
                c("Event", i),
                "involves",
                c("Person", rng.skewed(s.person)),
            ))?;
        }
        for _ in 0..3 {
            links.push(link(
                c("Event", i),
                "mentions",
                c("Topic", rng.skewed(s.topic)),
            ))?;
        }
    }
    for i in 1..s.category {
        links.push(link(
            c("Category", i),
            "is_subclass_of",
            c("Category", (i - 1) / 4),
        ))?;
    }
    // Higher-order: a person stated that a document is about a topic.
    for i in 0..(s.person / 10) {
        let (d, t) = about[rng.below(about.len())];
        let fact = format!(
            "({}, \"about\", {})",
            c("Document", d as usize),
            c("Topic", t as usize)
        );
        links.push(link(c("Person", i), "stated", fact))?;
    }
    links.flush()?;
    Ok((concepts.loaded, links.loaded))
}
