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

/// One end of a generated link.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum End {
    /// The `i`th concept of a type, named `<type in lower case>:<i>`.
    Concept(&'static str, u32),
    /// The domain `Work`.
    WorkDomain,
    /// The fact that document `d` is about topic `t` (a higher-order link's object).
    About(u32, u32),
}

/// Where the generator sends the graph, in order: every concept, `concepts_done`, every
/// link, `finish`. One sink writes KIP 1.x capsules (`Kip1Capsules`), another KIP 2.0
/// batches (`load2::Kip2Batches`): the same seeded sequence, so the same graph.
pub(crate) trait Sink {
    /// A concept: its type, its index within the type (its name is `<type>:<i>` in
    /// lower case) and its attributes as `key: <KIP literal text>` pairs.
    fn concept(&mut self, ty: &'static str, i: usize, attrs: &[(&str, String)]) -> Result<()>;
    /// Every concept has been sent; links follow.
    fn concepts_done(&mut self) -> Result<()>;
    /// A link `(s, p, o)`.
    fn link(&mut self, s: End, p: &'static str, o: End) -> Result<()>;
    /// Every link has been sent: the numbers of concept and link blocks.
    fn finish(&mut self) -> Result<(usize, usize)>;
}

/// The KIP 1.x sink: 1,000-block UPSERT capsules (concepts with the `source` metadata,
/// then links), the texts of every published 1.x figure.
pub(crate) struct Kip1Capsules<'a> {
    concepts: Loader<'a>,
    links: Loader<'a>,
}

impl Kip1Capsules<'_> {
    fn end(e: End) -> String {
        match e {
            End::Concept(t, i) => format!(
                "{{type: {}, name: {}}}",
                q(t),
                q(&format!("{}:{i}", t.to_lowercase()))
            ),
            End::WorkDomain => "{type: \"Domain\", name: \"Work\"}".to_string(),
            End::About(d, t) => format!(
                "({}, \"about\", {})",
                Self::end(End::Concept("Document", d)),
                Self::end(End::Concept("Topic", t))
            ),
        }
    }
}

impl Sink for Kip1Capsules<'_> {
    fn concept(&mut self, ty: &'static str, i: usize, attrs: &[(&str, String)]) -> Result<()> {
        let attrs: Vec<String> = attrs.iter().map(|(k, v)| format!("{k}: {v}")).collect();
        self.concepts.push(format!(
            "CONCEPT {{ {{type: {}, name: {}}} SET ATTRIBUTES {{ {} }} }}",
            q(ty),
            q(&format!("{}:{i}", ty.to_lowercase())),
            attrs.join(", ")
        ))
    }

    fn concepts_done(&mut self) -> Result<()> {
        self.concepts.flush()?;
        self.concepts
            .tx
            .send(Capsule::ConceptsDone(self.concepts.loaded))
            .map_err(|_| anyhow::anyhow!("the loading thread stopped"))
    }

    fn link(&mut self, s: End, p: &'static str, o: End) -> Result<()> {
        self.links.push(format!(
            "PROPOSITION {{ ({}, {}, {}) }}",
            Self::end(s),
            q(p),
            Self::end(o)
        ))
    }

    fn finish(&mut self) -> Result<(usize, usize)> {
        self.links.flush()?;
        Ok((self.concepts.loaded, self.links.loaded))
    }
}

/// Generates the capsules of the graph (concepts first, then links) into `tx`; returns
/// the numbers of concept and link blocks.
pub(crate) fn generate(
    tx: &SyncSender<Capsule>,
    n: usize,
    seed: u64,
    size: usize,
) -> Result<(usize, usize)> {
    let loader = |metadata| Loader {
        tx,
        blocks: Vec::with_capacity(size),
        loaded: 0,
        metadata,
        size,
    };
    let mut sink = Kip1Capsules {
        concepts: loader(" WITH METADATA { source: \"kip-bench\" }"),
        links: loader(""),
    };
    graph(&mut sink, n, seed)
}

/// Sends the graph of scale `n` to `sink` (concepts first, then links); returns the
/// numbers of concept and link blocks.
///
/// Long (about 170 lines): the graph's shape (types, attributes, degrees, self-loops)
/// is one seeded random sequence; splitting it would change the draws and the graph.
pub(crate) fn graph(sink: &mut dyn Sink, n: usize, seed: u64) -> Result<(usize, usize)> {
    let s = Sizes::new(n);
    let words = vocabulary();
    let mut rng = Rng(seed | 1);
    for (ty, count, length) in [
        ("Person", s.person, 6),
        ("Project", s.project, 8),
        ("Topic", s.topic, 5),
        ("Document", s.document, 10),
    ] {
        for i in 0..count {
            let d = describe(&mut rng, &words, length);
            let rank = rng.below(100);
            sink.concept(ty, i, &[("description", q(&d)), ("rank", rank.to_string())])?;
        }
    }
    for i in 0..s.event {
        let day = 1 + rng.below(28);
        let hour = rng.below(24);
        let month = 1 + rng.below(12);
        let summary = describe(&mut rng, &words, 6);
        sink.concept(
            "Event",
            i,
            &[
                ("event_class", q("Conversation")),
                (
                    "start_time",
                    format!("\"2026-{month:02}-{day:02}T{hour:02}:00:00Z\""),
                ),
                ("content_summary", q(&summary)),
            ],
        )?;
    }
    for i in 0..s.category {
        let d = describe(&mut rng, &words, 3);
        sink.concept("Category", i, &[("description", q(&d))])?;
    }
    sink.concepts_done()?;
    let c = |t: &'static str, i: usize| End::Concept(t, i as u32);
    let mut about: Vec<(u32, u32)> = Vec::new();
    for i in 0..s.person {
        for _ in 0..4 {
            sink.link(c("Person", i), "knows", c("Person", rng.skewed(s.person)))?;
        }
        for _ in 0..rng.below(4) {
            sink.link(
                c("Person", i),
                "works_on",
                c("Project", rng.skewed(s.project)),
            )?;
        }
    }
    for i in 0..s.project.min(1000) {
        sink.link(c("Project", i), "belongs_to_domain", End::WorkDomain)?;
    }
    for i in 0..s.document {
        for _ in 0..3 {
            let t = rng.skewed(s.topic);
            about.push((i as u32, t as u32));
            sink.link(c("Document", i), "about", c("Topic", t))?;
        }
        sink.link(
            c("Document", i),
            "cites",
            c("Document", rng.below(s.document)),
        )?;
    }
    for i in 0..s.topic {
        sink.link(
            c("Topic", i),
            "in_category",
            c("Category", rng.skewed(s.category)),
        )?;
        sink.link(c("Topic", i), "related_to", c("Topic", rng.below(s.topic)))?;
    }
    for i in 0..s.event {
        for _ in 0..3 {
            sink.link(c("Event", i), "involves", c("Person", rng.skewed(s.person)))?;
        }
        for _ in 0..3 {
            sink.link(c("Event", i), "mentions", c("Topic", rng.skewed(s.topic)))?;
        }
    }
    for i in 1..s.category {
        sink.link(
            c("Category", i),
            "is_subclass_of",
            c("Category", (i - 1) / 4),
        )?;
    }
    // Higher-order: a person stated that a document is about a topic.
    for i in 0..(s.person / 10) {
        let (d, t) = about[rng.below(about.len())];
        sink.link(c("Person", i), "stated", End::About(d, t))?;
    }
    sink.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// FNV-1a over every capsule text the generator sends at scale `n`, with the block
    /// counts: a fingerprint of the generated 1.x graph.
    fn digest(n: usize) -> (u64, usize, usize) {
        let (tx, rx) = std::sync::mpsc::sync_channel(4);
        let generator = std::thread::spawn(move || generate(&tx, n, 42, 1000));
        let mut hash = 0xcbf2_9ce4_8422_2325u64;
        let mut eat = |bytes: &[u8]| {
            for b in bytes {
                hash ^= u64::from(*b);
                hash = hash.wrapping_mul(0x0100_0000_01b3);
            }
        };
        for capsule in rx {
            match capsule {
                Capsule::Text(t) => eat(t.as_bytes()),
                Capsule::ConceptsDone(k) => eat(&(k as u64).to_le_bytes()),
            }
        }
        let (concepts, links) = generator.join().unwrap().unwrap();
        (hash, concepts, links)
    }

    /// The generator feeds the 1.x and the 2.0 loads through one sequence (`graph`);
    /// the 1.x capsules must stay those every published 1.x figure loaded (the digest
    /// was taken from the generator before it was split, and checked equal to it at
    /// 100, 2,000 and 10,000 concepts).
    #[test]
    fn the_1x_capsules_are_those_of_the_published_figures() {
        assert_eq!(digest(2000), (18_319_210_542_682_155_933, 2000, 7555));
    }
}
