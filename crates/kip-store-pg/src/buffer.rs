//! A write transaction's pending row changes, written in a few set-based statements
//! instead of one round trip per row.
//!
//! Every map holds the final state of a row in this transaction (`Some`/`true`: present
//! with this value, `None`/`false`: removed), as the embedded store's staged maps do, so
//! the order of a flush's statements does not matter within a table (removals first,
//! then upserts), and the deferred unique constraints see only the end state. Point
//! reads of a write transaction look here first ([`crate::tx::PgTx`]); every other read
//! flushes first, so it sees the transaction's writes in the tables. (The keys a write
//! files or removes are recorded in the transaction's key maps, which outlive a flush.)

use crate::conn::Conn;
use kip_store::StoreResult;
use std::collections::BTreeMap;

/// A concept row.
pub(crate) struct ConceptRow {
    pub(crate) ty: String,
    pub(crate) name: String,
    pub(crate) rec: Vec<u8>,
}

/// A proposition row (`s`, `o` as stored: see [`crate::tx::ek`]).
pub(crate) struct PropRow {
    pub(crate) s: i64,
    pub(crate) p: String,
    pub(crate) o: i64,
    pub(crate) rec: Vec<u8>,
}

/// Rows a flush writes once it has this many changes (bounded memory for a huge
/// transaction, e.g. `kip import` of one big capsule).
pub(crate) const FLUSH_AT: usize = 50_000;

#[derive(Default)]
pub(crate) struct Buffer {
    pub(crate) concepts: BTreeMap<i64, Option<ConceptRow>>,
    pub(crate) props: BTreeMap<i64, Option<PropRow>>,
    /// `(term, element)` -> `(tf, document length)`.
    pub(crate) postings: BTreeMap<(String, i64), Option<(i64, i64)>>,
    /// `(type, attribute, value key, concept)`.
    pub(crate) attrs: BTreeMap<(String, String, String, i64), bool>,
    /// Embedding marks.
    pub(crate) marks: BTreeMap<i64, bool>,
}

impl Buffer {
    pub(crate) fn is_empty(&self) -> bool {
        self.concepts.is_empty()
            && self.props.is_empty()
            && self.postings.is_empty()
            && self.attrs.is_empty()
            && self.marks.is_empty()
    }

    pub(crate) fn len(&self) -> usize {
        self.concepts.len()
            + self.props.len()
            + self.postings.len()
            + self.attrs.len()
            + self.marks.len()
    }

    /// Writes every pending change and empties the buffer.
    pub(crate) fn flush(&mut self, conn: &mut Conn) -> StoreResult<()> {
        if self.is_empty() {
            return Ok(());
        }

        let concepts = std::mem::take(&mut self.concepts);
        let removed: Vec<i64> = gone(&concepts);
        if !removed.is_empty() {
            conn.execute(
                "DELETE FROM kip_concepts WHERE id = ANY($1::bigint[])",
                &[&removed],
            )?;
        }
        let rows: Vec<(&i64, &ConceptRow)> = present(&concepts);
        if !rows.is_empty() {
            let ids: Vec<i64> = rows.iter().map(|r| *r.0).collect();
            let types: Vec<&[u8]> = rows.iter().map(|r| r.1.ty.as_bytes()).collect();
            let names: Vec<&[u8]> = rows.iter().map(|r| r.1.name.as_bytes()).collect();
            let recs: Vec<&[u8]> = rows.iter().map(|r| r.1.rec.as_slice()).collect();
            conn.execute(
                "INSERT INTO kip_concepts (id, type, name, rec) \
                 SELECT * FROM unnest($1::bigint[], $2::bytea[], $3::bytea[], $4::bytea[]) \
                 ON CONFLICT (id) DO UPDATE SET type = excluded.type, name = excluded.name, rec = excluded.rec",
                &[&ids, &types, &names, &recs],
            )?;
        }

        let props = std::mem::take(&mut self.props);
        let removed: Vec<i64> = gone(&props);
        if !removed.is_empty() {
            conn.execute(
                "DELETE FROM kip_props WHERE id = ANY($1::bigint[])",
                &[&removed],
            )?;
        }
        let rows: Vec<(&i64, &PropRow)> = present(&props);
        if !rows.is_empty() {
            let ids: Vec<i64> = rows.iter().map(|r| *r.0).collect();
            let s: Vec<i64> = rows.iter().map(|r| r.1.s).collect();
            let p: Vec<&[u8]> = rows.iter().map(|r| r.1.p.as_bytes()).collect();
            let o: Vec<i64> = rows.iter().map(|r| r.1.o).collect();
            let recs: Vec<&[u8]> = rows.iter().map(|r| r.1.rec.as_slice()).collect();
            conn.execute(
                "INSERT INTO kip_props (id, s, p, o, rec) \
                 SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::bytea[], $4::bigint[], $5::bytea[]) \
                 ON CONFLICT (id) DO UPDATE SET s = excluded.s, p = excluded.p, o = excluded.o, rec = excluded.rec",
                &[&ids, &s, &p, &o, &recs],
            )?;
        }

        let postings = std::mem::take(&mut self.postings);
        let (gone_t, gone_e): (Vec<&[u8]>, Vec<i64>) = postings
            .iter()
            .filter(|(_, v)| v.is_none())
            .map(|((t, e), _)| (t.as_bytes(), *e))
            .unzip();
        if !gone_t.is_empty() {
            conn.execute(
                "DELETE FROM kip_postings WHERE (term, elem) IN \
                 (SELECT * FROM unnest($1::bytea[], $2::bigint[]))",
                &[&gone_t, &gone_e],
            )?;
        }
        let mut terms: Vec<&[u8]> = Vec::new();
        let (mut elems, mut tfs, mut lens) = (Vec::new(), Vec::new(), Vec::new());
        for ((t, e), v) in &postings {
            if let Some((tf, len)) = v {
                terms.push(t.as_bytes());
                elems.push(*e);
                tfs.push(*tf);
                lens.push(*len);
            }
        }
        if !terms.is_empty() {
            conn.execute(
                "INSERT INTO kip_postings (term, elem, tf, len) \
                 SELECT * FROM unnest($1::bytea[], $2::bigint[], $3::bigint[], $4::bigint[]) \
                 ON CONFLICT (term, elem) DO UPDATE SET tf = excluded.tf, len = excluded.len",
                &[&terms, &elems, &tfs, &lens],
            )?;
        }

        let attrs = std::mem::take(&mut self.attrs);
        for keep in [false, true] {
            let mut types: Vec<&[u8]> = Vec::new();
            let mut names: Vec<&[u8]> = Vec::new();
            let mut vkeys: Vec<&[u8]> = Vec::new();
            let mut ids: Vec<i64> = Vec::new();
            for ((t, a, v, id), present) in &attrs {
                if *present == keep {
                    types.push(t.as_bytes());
                    names.push(a.as_bytes());
                    vkeys.push(v.as_bytes());
                    ids.push(*id);
                }
            }
            if ids.is_empty() {
                continue;
            }
            let sql = if keep {
                "INSERT INTO kip_attrs (type, attr, vkey, id) \
                 SELECT * FROM unnest($1::bytea[], $2::bytea[], $3::bytea[], $4::bigint[]) \
                 ON CONFLICT DO NOTHING"
            } else {
                "DELETE FROM kip_attrs WHERE (type, attr, vkey, id) IN \
                 (SELECT * FROM unnest($1::bytea[], $2::bytea[], $3::bytea[], $4::bigint[]))"
            };
            conn.execute(sql, &[&types, &names, &vkeys, &ids])?;
        }

        let marks = std::mem::take(&mut self.marks);
        for keep in [false, true] {
            let keys: Vec<i64> = marks
                .iter()
                .filter(|(_, v)| **v == keep)
                .map(|(k, _)| *k)
                .collect();
            if keys.is_empty() {
                continue;
            }
            let sql = if keep {
                "INSERT INTO kip_embed_marks (elem) SELECT * FROM unnest($1::bigint[]) ON CONFLICT DO NOTHING"
            } else {
                "DELETE FROM kip_embed_marks WHERE elem = ANY($1::bigint[])"
            };
            conn.execute(sql, &[&keys])?;
        }
        Ok(())
    }
}

fn gone<T>(m: &BTreeMap<i64, Option<T>>) -> Vec<i64> {
    m.iter()
        .filter(|(_, v)| v.is_none())
        .map(|(k, _)| *k)
        .collect()
}

fn present<T>(m: &BTreeMap<i64, Option<T>>) -> Vec<(&i64, &T)> {
    m.iter()
        .filter_map(|(k, v)| v.as_ref().map(|v| (k, v)))
        .collect()
}
