//! Memory-like sentences from a seeded vocabulary of everyday English ("Alice booked
//! the wedding venue next week; needs a signature."), shared by the examples that
//! measure search on real embeddings (included with `#[path]`), and the helpers they
//! share: the median of timings and embedding many texts with progress.
#![allow(dead_code)]

use kip_embed::Embedder;
use std::time::{Duration, Instant};

pub const PEOPLE: &[&str] = &[
    "Alice",
    "Bob",
    "Carol",
    "Dan",
    "Erin",
    "Frank",
    "Grace",
    "Hugo",
    "Ines",
    "Jack",
    "Kira",
    "Liam",
    "Maya",
    "Noah",
    "Olga",
    "Pablo",
    "Quinn",
    "Rosa",
    "Sam",
    "Tara",
    "my sister",
    "my manager",
    "the landlord",
    "the dentist",
    "our neighbour",
    "the team",
    "the client",
    "my father",
    "the doctor",
    "the teacher",
];
pub const VERBS: &[&str] = &[
    "asked about",
    "recommended",
    "complained about",
    "forgot",
    "booked",
    "cancelled",
    "paid for",
    "fixed",
    "ordered",
    "returned",
    "reviewed",
    "postponed",
    "planned",
    "finished",
    "lost",
    "found",
    "bought",
    "sold",
    "borrowed",
    "painted",
    "cleaned",
    "moved",
    "rescheduled",
    "approved",
    "rejected",
    "discussed",
    "signed",
    "renewed",
    "sent",
    "printed",
];
pub const THINGS: &[&str] = &[
    "the quarterly budget",
    "a dinner reservation",
    "the car insurance",
    "the roof repair",
    "a flight to Lisbon",
    "the kitchen sink",
    "the marketing plan",
    "a birthday present",
    "the lease contract",
    "the server migration",
    "a yoga class",
    "the tax return",
    "the wedding venue",
    "a new laptop",
    "the garden fence",
    "the database backup",
    "the school trip",
    "a concert ticket",
    "the medical report",
    "the website redesign",
    "the hiking trip",
    "a piano lesson",
    "the electricity bill",
    "the job interview",
    "the book club",
    "the project deadline",
    "a bike repair",
    "the vaccination",
    "the conference talk",
    "the phone contract",
    "the moving boxes",
    "the holiday photos",
    "a loan application",
    "the team offsite",
    "the security audit",
    "the grocery list",
    "the passport renewal",
    "a gym membership",
    "the podcast episode",
    "the bakery order",
];
pub const WHEN: &[&str] = &[
    "last Monday",
    "yesterday",
    "this morning",
    "next week",
    "in March",
    "before the holidays",
    "after lunch",
    "on Friday evening",
    "two days ago",
    "at the end of the month",
    "during the call",
    "over the weekend",
];
pub const DETAILS: &[&str] = &[
    "it was expensive",
    "it took longer than expected",
    "needs a follow-up",
    "was urgent",
    "went well",
    "caused some stress",
    "is still pending",
    "was cheaper online",
    "needs a signature",
    "must be done before the deadline",
    "was a nice surprise",
    "is blocked by the bank",
    "depends on the weather",
    "requires two approvals",
    "was mentioned twice",
    "can wait",
];

/// A xorshift generator: the same seed gives the same sentences.
pub struct Rng(pub u64);
impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[(self.next() % xs.len() as u64) as usize]
    }
    /// One sentence: who, did what, to what, when; a detail.
    pub fn sentence(&mut self) -> String {
        format!(
            "{} {} {} {}; {}.",
            self.pick(PEOPLE),
            self.pick(VERBS),
            self.pick(THINGS),
            self.pick(WHEN),
            self.pick(DETAILS)
        )
    }
}

/// The median of timings.
pub fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// `texts` embedded in batches of 64, with progress on stderr.
pub fn embed_all(e: &kip_embed::LocalEmbedder, texts: &[String]) -> Vec<Vec<f32>> {
    let mut out = Vec::with_capacity(texts.len());
    let t = Instant::now();
    for (i, chunk) in texts.chunks(64).enumerate() {
        let refs: Vec<&str> = chunk.iter().map(String::as_str).collect();
        out.extend(e.embed(&refs).expect("embed"));
        if i % 100 == 0 {
            eprintln!(
                "embedded {} / {} ({:.0} texts/s)",
                out.len(),
                texts.len(),
                out.len() as f64 / t.elapsed().as_secs_f64().max(1e-9)
            );
        }
    }
    out
}
