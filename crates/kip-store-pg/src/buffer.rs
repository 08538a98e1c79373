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
//!
//! New rows of elements this transaction created and has not flushed yet (numbers from
//! the transaction's `floor` on: no row of theirs can be in the tables) go through
//! `COPY ... FROM STDIN (FORMAT binary)` when a table has at least [`COPY_MIN`] of them:
//! no conflict to check, no per-row executor work, about twice the rate of an
//! `INSERT ... ON CONFLICT` (a bulk load is mostly such rows). Fewer go with the rest,
//! where the extra round trips of a `COPY` would cost more than they save.

use crate::conn::Conn;
use kip_storage::{ElemRef, StoreResult};
use postgres::types::ToSql;
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

/// New rows of a table from which on a flush writes them with `COPY`.
pub(crate) const COPY_MIN: usize = 256;

/// The first concept and proposition numbers of which no row can be in the tables
/// (the transaction's `floor`; `None`: every number may have rows).
#[derive(Clone, Copy, Default)]
pub(crate) struct Fresh {
    pub(crate) concepts: Option<u64>,
    pub(crate) props: Option<u64>,
}

impl Fresh {
    fn concept(&self, id: i64) -> bool {
        self.concepts
            .is_some_and(|f| u64::try_from(id).is_ok_and(|n| n >= f))
    }

    fn prop(&self, id: i64) -> bool {
        self.props
            .is_some_and(|f| u64::try_from(id).is_ok_and(|n| n >= f))
    }

    /// For an element key as stored ([`crate::tx::ek`]).
    fn elem(&self, e: i64) -> bool {
        match ElemRef::decode(crate::tx::uk(e)) {
            ElemRef::Concept(n) => self.concepts.is_some_and(|f| n >= f),
            ElemRef::Prop(n) => self.props.is_some_and(|f| n >= f),
        }
    }
}

/// A table's changes: `(key, final state)`.
type Changes<K, V> = Vec<(K, V)>;

/// Splits a table's changes into the new rows of fresh elements, for `COPY` (when
/// there are at least [`COPY_MIN`]; else they stay with the rest), and the rest.
/// Removals of a fresh element's rows are dropped: no such row was ever written.
fn split<K, V>(
    map: BTreeMap<K, V>,
    fresh: impl Fn(&K) -> bool,
    present: impl Fn(&V) -> bool,
) -> (Changes<K, V>, Changes<K, V>) {
    let (mut copy, mut rest) = (Vec::new(), Vec::new());
    for (k, v) in map {
        if !fresh(&k) {
            rest.push((k, v));
        } else if present(&v) {
            copy.push((k, v));
        }
    }
    if copy.len() < COPY_MIN {
        rest.append(&mut copy);
    }
    (copy, rest)
}

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
    /// History version chain entries: (space, key, part, valid_to) -> state, written
    /// by the transaction that replaced the state (which may re-write its own entry:
    /// `kip_storage::history::record`).
    pub(crate) versions: BTreeMap<(i32, i64, i16, i64), Vec<u8>>,
}

impl Buffer {
    pub(crate) fn is_empty(&self) -> bool {
        self.concepts.is_empty()
            && self.props.is_empty()
            && self.postings.is_empty()
            && self.attrs.is_empty()
            && self.marks.is_empty()
            && self.versions.is_empty()
    }

    pub(crate) fn len(&self) -> usize {
        self.concepts.len()
            + self.props.len()
            + self.postings.len()
            + self.attrs.len()
            + self.marks.len()
            + self.versions.len()
    }

    /// Moves every pending change into `batch` (one part per table and kind of
    /// change) and empties the buffer.
    ///
    /// Long (about 270 lines): one block per table and kind of change, in the order
    /// the batch must run them (rows before the index rows that reference them).
    pub(crate) fn drain_into(&mut self, batch: &mut Batch, fresh: Fresh) {
        let (copy, concepts) = split(
            std::mem::take(&mut self.concepts),
            |id| fresh.concept(*id),
            Option::is_some,
        );
        if !copy.is_empty() {
            let (mut ids, mut types, mut names, mut recs) =
                (Vec::new(), Vec::new(), Vec::new(), Vec::new());
            for (id, r) in copy.into_iter().filter_map(|(id, r)| Some((id, r?))) {
                ids.push(id);
                types.push(r.ty.into_bytes());
                names.push(r.name.into_bytes());
                recs.push(r.rec);
            }
            batch.copy(
                "COPY kip_concepts (id, type, name, rec) FROM STDIN (FORMAT binary)",
                vec![
                    Col::I64(ids),
                    Col::Bytes(types),
                    Col::Bytes(names),
                    Col::Bytes(recs),
                ],
            );
        }
        let (mut gone, mut ids, mut types, mut names, mut recs) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for (id, row) in concepts {
            match row {
                None => gone.push(id),
                Some(r) => {
                    ids.push(id);
                    types.push(r.ty.into_bytes());
                    names.push(r.name.into_bytes());
                    recs.push(r.rec);
                }
            }
        }
        if !gone.is_empty() {
            batch.add(
                "DELETE FROM kip_concepts WHERE id = ANY(?1::bigint[])",
                vec![Box::new(gone)],
            );
        }
        if !ids.is_empty() {
            batch.add(
                "INSERT INTO kip_concepts (id, type, name, rec) \
                 SELECT * FROM unnest(?1::bigint[], ?2::bytea[], ?3::bytea[], ?4::bytea[]) \
                 ON CONFLICT (id) DO UPDATE SET type = excluded.type, name = excluded.name, rec = excluded.rec",
                vec![Box::new(ids), Box::new(types), Box::new(names), Box::new(recs)],
            );
        }

        let (copy, props) = split(
            std::mem::take(&mut self.props),
            |id| fresh.prop(*id),
            Option::is_some,
        );
        if !copy.is_empty() {
            let (mut ids, mut ss, mut ps, mut os, mut recs) =
                (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
            for (id, r) in copy.into_iter().filter_map(|(id, r)| Some((id, r?))) {
                ids.push(id);
                ss.push(r.s);
                ps.push(r.p.into_bytes());
                os.push(r.o);
                recs.push(r.rec);
            }
            batch.copy(
                "COPY kip_props (id, s, p, o, rec) FROM STDIN (FORMAT binary)",
                vec![
                    Col::I64(ids),
                    Col::I64(ss),
                    Col::Bytes(ps),
                    Col::I64(os),
                    Col::Bytes(recs),
                ],
            );
        }
        let (mut gone, mut ids, mut ss, mut ps, mut os, mut recs) = (
            Vec::new(),
            Vec::new(),
            Vec::new(),
            Vec::new(),
            Vec::new(),
            Vec::new(),
        );
        for (id, row) in props {
            match row {
                None => gone.push(id),
                Some(r) => {
                    ids.push(id);
                    ss.push(r.s);
                    ps.push(r.p.into_bytes());
                    os.push(r.o);
                    recs.push(r.rec);
                }
            }
        }
        if !gone.is_empty() {
            batch.add(
                "DELETE FROM kip_props WHERE id = ANY(?1::bigint[])",
                vec![Box::new(gone)],
            );
        }
        if !ids.is_empty() {
            batch.add(
                "INSERT INTO kip_props (id, s, p, o, rec) \
                 SELECT * FROM unnest(?1::bigint[], ?2::bigint[], ?3::bytea[], ?4::bigint[], ?5::bytea[]) \
                 ON CONFLICT (id) DO UPDATE SET s = excluded.s, p = excluded.p, o = excluded.o, rec = excluded.rec",
                vec![Box::new(ids), Box::new(ss), Box::new(ps), Box::new(os), Box::new(recs)],
            );
        }

        let (copy, postings) = split(
            std::mem::take(&mut self.postings),
            |(_, e)| fresh.elem(*e),
            Option::is_some,
        );
        if !copy.is_empty() {
            let (mut terms, mut elems, mut tfs, mut lens) =
                (Vec::new(), Vec::new(), Vec::new(), Vec::new());
            for ((t, e), v) in copy {
                if let Some((tf, len)) = v {
                    terms.push(t.into_bytes());
                    elems.push(e);
                    tfs.push(tf);
                    lens.push(len);
                }
            }
            batch.copy(
                "COPY kip_postings (term, elem, tf, len) FROM STDIN (FORMAT binary)",
                vec![
                    Col::Bytes(terms),
                    Col::I64(elems),
                    Col::I64(tfs),
                    Col::I64(lens),
                ],
            );
        }
        let (mut gone_t, mut gone_e) = (Vec::new(), Vec::new());
        let (mut terms, mut elems, mut tfs, mut lens) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for ((t, e), v) in postings {
            match v {
                None => {
                    gone_t.push(t.into_bytes());
                    gone_e.push(e);
                }
                Some((tf, len)) => {
                    terms.push(t.into_bytes());
                    elems.push(e);
                    tfs.push(tf);
                    lens.push(len);
                }
            }
        }
        if !gone_t.is_empty() {
            batch.add(
                "DELETE FROM kip_postings WHERE (term, elem) IN \
                 (SELECT * FROM unnest(?1::bytea[], ?2::bigint[]))",
                vec![Box::new(gone_t), Box::new(gone_e)],
            );
        }
        if !terms.is_empty() {
            batch.add(
                "INSERT INTO kip_postings (term, elem, tf, len) \
                 SELECT * FROM unnest(?1::bytea[], ?2::bigint[], ?3::bigint[], ?4::bigint[]) \
                 ON CONFLICT (term, elem) DO UPDATE SET tf = excluded.tf, len = excluded.len",
                vec![
                    Box::new(terms),
                    Box::new(elems),
                    Box::new(tfs),
                    Box::new(lens),
                ],
            );
        }

        let (copy, attrs) = split(
            std::mem::take(&mut self.attrs),
            |k| fresh.concept(k.3),
            |present| *present,
        );
        if !copy.is_empty() {
            let mut c = AttrColumns::default();
            for ((t, a, v, id), _) in copy {
                c.0.push(t.into_bytes());
                c.1.push(a.into_bytes());
                c.2.push(v.into_bytes());
                c.3.push(id);
            }
            batch.copy(
                "COPY kip_attrs (type, attr, vkey, id) FROM STDIN (FORMAT binary)",
                vec![
                    Col::Bytes(c.0),
                    Col::Bytes(c.1),
                    Col::Bytes(c.2),
                    Col::I64(c.3),
                ],
            );
        }
        let mut cols: [AttrColumns; 2] = Default::default();
        for ((t, a, v, id), present) in attrs {
            let c = &mut cols[usize::from(present)];
            c.0.push(t.into_bytes());
            c.1.push(a.into_bytes());
            c.2.push(v.into_bytes());
            c.3.push(id);
        }
        let [gone, added] = cols;
        if !gone.3.is_empty() {
            batch.add(
                "DELETE FROM kip_attrs WHERE (type, attr, vkey, id) IN \
                 (SELECT * FROM unnest(?1::bytea[], ?2::bytea[], ?3::bytea[], ?4::bigint[]))",
                vec![
                    Box::new(gone.0),
                    Box::new(gone.1),
                    Box::new(gone.2),
                    Box::new(gone.3),
                ],
            );
        }
        if !added.3.is_empty() {
            batch.add(
                "INSERT INTO kip_attrs (type, attr, vkey, id) \
                 SELECT * FROM unnest(?1::bytea[], ?2::bytea[], ?3::bytea[], ?4::bigint[]) \
                 ON CONFLICT DO NOTHING",
                vec![
                    Box::new(added.0),
                    Box::new(added.1),
                    Box::new(added.2),
                    Box::new(added.3),
                ],
            );
        }

        let (copy, marks) = split(
            std::mem::take(&mut self.marks),
            |e| fresh.elem(*e),
            |present| *present,
        );
        if !copy.is_empty() {
            batch.copy(
                "COPY kip_embed_marks (elem) FROM STDIN (FORMAT binary)",
                vec![Col::I64(copy.into_iter().map(|(e, _)| e).collect())],
            );
        }
        let (mut gone, mut added) = (Vec::new(), Vec::new());
        for (k, present) in marks {
            if present {
                added.push(k);
            } else {
                gone.push(k);
            }
        }
        if !gone.is_empty() {
            batch.add(
                "DELETE FROM kip_embed_marks WHERE elem = ANY(?1::bigint[])",
                vec![Box::new(gone)],
            );
        }
        if !added.is_empty() {
            batch.add(
                "INSERT INTO kip_embed_marks (elem) SELECT * FROM unnest(?1::bigint[]) \
                 ON CONFLICT DO NOTHING",
                vec![Box::new(added)],
            );
        }

        let versions = std::mem::take(&mut self.versions);
        if !versions.is_empty() {
            let (mut sp, mut keys, mut parts, mut tos, mut states) =
                (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
            for ((s, k, p, t), state) in versions {
                sp.push(s);
                keys.push(k);
                parts.push(p);
                tos.push(t);
                states.push(state);
            }
            batch.add(
                "INSERT INTO kip_hist_versions (space, key, part, valid_to, state) \
                 SELECT * FROM unnest(?1::integer[], ?2::bigint[], ?3::smallint[], ?4::bigint[], ?5::bytea[]) \
                 ON CONFLICT (space, key, part, valid_to) DO UPDATE SET state = excluded.state",
                vec![
                    Box::new(sp),
                    Box::new(keys),
                    Box::new(parts),
                    Box::new(tos),
                    Box::new(states),
                ],
            );
        }
    }
}

/// Columns of attribute index entries: types, attributes, value keys, concepts.
type AttrColumns = (Vec<Vec<u8>>, Vec<Vec<u8>>, Vec<Vec<u8>>, Vec<i64>);

/// Statements run as one: each part a data-modifying `WITH` query of one statement
/// (so a commit's changes to every table are one round trip). The parts never touch
/// the same row (each map holds one final state per key), which is what a statement
/// of several data-modifying parts requires: they all see the same snapshot.
#[derive(Default)]
pub(crate) struct Batch {
    parts: Vec<String>,
    params: Vec<Box<dyn ToSql + Sync>>,
    /// `COPY` statements with their columns, run before the parts (they only add rows
    /// no part touches).
    copies: Vec<(&'static str, Vec<Col>)>,
}

/// A column of rows for `COPY`.
pub(crate) enum Col {
    I64(Vec<i64>),
    Bytes(Vec<Vec<u8>>),
}

impl Col {
    pub(crate) fn len(&self) -> usize {
        match self {
            Col::I64(v) => v.len(),
            Col::Bytes(v) => v.len(),
        }
    }

    /// The value of row `i` (which must exist).
    pub(crate) fn at(&self, i: usize) -> &(dyn ToSql + Sync) {
        match self {
            Col::I64(v) => &v[i],
            Col::Bytes(v) => &v[i],
        }
    }

    pub(crate) fn pg_type(&self) -> postgres::types::Type {
        match self {
            Col::I64(_) => postgres::types::Type::INT8,
            Col::Bytes(_) => postgres::types::Type::BYTEA,
        }
    }
}

impl Batch {
    /// Adds a statement whose parameters are written `?1`, `?2`, ... .
    pub(crate) fn add(&mut self, sql: &str, params: Vec<Box<dyn ToSql + Sync>>) {
        let base = self.params.len();
        let mut sql = sql.to_owned();
        // From the highest number down, so that ?1 does not match the start of ?10.
        for i in (1..=params.len()).rev() {
            sql = sql.replace(&format!("?{i}"), &format!("${}", base + i));
        }
        self.parts.push(sql);
        self.params.extend(params);
    }

    /// Adds rows to write with a `COPY ... FROM STDIN (FORMAT binary)` statement whose
    /// columns are `cols`, in order (all of one length).
    pub(crate) fn copy(&mut self, sql: &'static str, cols: Vec<Col>) {
        self.copies.push((sql, cols));
    }

    /// Runs the `COPY`s, then every part in one statement (nothing when empty).
    pub(crate) fn run(self, conn: &mut Conn) -> StoreResult<()> {
        for (sql, cols) in &self.copies {
            conn.copy_rows(sql, cols)?;
        }
        let params: Vec<&(dyn ToSql + Sync)> = self.params.iter().map(|b| b.as_ref()).collect();
        match self.parts.as_slice() {
            [] => Ok(()),
            [one] => conn.execute(one, &params).map(|_| ()),
            parts => {
                let mut sql = String::from("WITH ");
                for (i, p) in parts.iter().enumerate() {
                    if i > 0 {
                        sql.push_str(", ");
                    }
                    sql.push_str(&format!("p{i} AS ({p})"));
                }
                sql.push_str(" SELECT 1");
                conn.query(&sql, &params).map(|_| ())
            }
        }
    }
}
