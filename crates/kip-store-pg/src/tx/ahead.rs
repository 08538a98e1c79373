//! Read-ahead for read-only transactions, so that the engine's nested loops (a scan,
//! then per row a link probe and a projection) cost a few round trips per page of rows
//! instead of a few per row, without the engine knowing.
//!
//! The ids a scan returns together (a page of a type, name, attribute or whole-table
//! scan; the far ends of a batch of links read ahead, and those links) form a *group*.
//! From the second one-by-one read of a group member's record on, the records of the
//! [`PART`] (1,024) members around each member asked for are read in one query; the
//! same for the links at one end (one direction, one predicate or all), at most
//! [`LINKS_PER_ELEM`] per member (a member with more, a hub, is read on its own, paged,
//! as before). The first miss of a group is served alone, so a query that reads one
//! element of a page does not read the page, and one miss never reads more than a
//! part. Write transactions do not read ahead: their reads must see their own
//! buffered writes.

use super::*;
use std::collections::{HashSet, VecDeque};
use std::rc::Rc;

/// Groups remembered at once (the newest first).
const GROUPS: usize = 8;

/// Links per element a batch keeps: an element with more is read on its own.
const LINKS_PER_ELEM: usize = 32;

/// Elements per query of a batch of links.
const LINK_BATCH: usize = 1_024;

/// Adjacency lists kept per transaction at most (all dropped when passed).
const ADJ_MAX: usize = 200_000;

/// Links at one end as read ahead: `(predicate, other end key, link number)`, in the
/// order of a scan (predicate, then other end).
pub(crate) type Links = Rc<Vec<(String, u64, u64)>>;

/// A text index entry: `(frequency, length)`.
type Posting = (u32, u32);

/// `(forward, predicate filter, element key)`: which links at which end.
type LinksKey = (bool, Option<String>, u64);

/// What a transaction has read ahead and what it may read ahead.
#[derive(Default)]
pub(crate) struct Ahead {
    /// Read ahead at all (read-only transactions).
    pub(crate) on: bool,
    groups: RefCell<VecDeque<Rc<Group>>>,
    /// Text index entries read ahead ([`GraphRead::prefetch_postings`]):
    /// `(term, element key)` -> `(frequency, length)`, `None`: no entry.
    postings: RefCell<HashMap<(String, u64), Option<Posting>>>,
    adj: RefCell<HashMap<LinksKey, Links>>,
}

/// Members of a group read ahead at once: the part around the element asked for, so
/// one miss costs one bounded query however big the group (a batch's far ends can be
/// 32 times the page that led to them).
const PART: usize = 1_024;

/// One-by-one reads of a group's members so far, and the parts read ahead.
type Reads = (u32, HashSet<usize>);

/// Elements returned together.
struct Group {
    /// In key order.
    keys: Vec<u64>,
    members: HashSet<u64>,
    /// Records read one by one so far (at 2 the group is read ahead), and the parts
    /// read ahead.
    records: RefCell<Reads>,
    /// The same per (forward, predicate filter), for the links at one end.
    links: RefCell<HashMap<(bool, Option<String>), Reads>>,
}

impl Group {
    /// The part of the group `key` is in.
    fn part_of(&self, key: u64) -> usize {
        self.keys.binary_search(&key).unwrap_or(0) / PART
    }

    fn part(&self, i: usize) -> &[u64] {
        let lo = (i * PART).min(self.keys.len());
        &self.keys[lo..(lo + PART).min(self.keys.len())]
    }
}

/// Counts a one-by-one read of a member of part `part`; true when that part is to be
/// read ahead now: from the second read of the group on, once per part.
fn due(state: &mut Reads, part: usize) -> bool {
    if state.0 < 2 {
        state.0 += 1;
        if state.0 < 2 {
            return false;
        }
    }
    state.1.insert(part)
}

impl PgTx<'_> {
    /// [`GraphRead::prefetch_elements`]: reads the records of `elems` that are not
    /// cached, buffered or unwritten in one query per kind, into the record cache
    /// (emptied first when it would pass [`RECORDS_MAX`]); the `{type, name}` of the
    /// concepts read are remembered too.
    pub(super) fn read_records(&self, elems: &[ElemRef]) -> StoreResult<()> {
        let (mut concepts, mut props) = (Vec::new(), Vec::new());
        if elems.len() > RECORDS_MAX {
            return Ok(());
        }
        {
            let mut records = self.records.borrow_mut();
            if records.len() + elems.len() > RECORDS_MAX {
                records.clear();
            }
            let buf = self.buf.borrow();
            for e in elems {
                if records.contains_key(&e.encode()) || self.unwritten(*e) {
                    continue;
                }
                match *e {
                    ElemRef::Concept(n) if !buf.concepts.contains_key(&num(n)?) => {
                        concepts.push(num(n)?)
                    }
                    ElemRef::Prop(n) if !buf.props.contains_key(&num(n)?) => props.push(num(n)?),
                    _ => {}
                }
            }
        }
        for (ids, sql, kind) in [
            (
                concepts,
                "SELECT id, rec, type, name FROM kip_concepts WHERE id = ANY($1::bigint[])",
                0,
            ),
            (
                props,
                "SELECT id, rec FROM kip_props WHERE id = ANY($1::bigint[])",
                1,
            ),
        ] {
            if ids.is_empty() {
                continue;
            }
            let rows = self.query(sql, &[&ids])?;
            let key = |n: u64| {
                if kind == 0 {
                    ElemRef::Concept(n).encode()
                } else {
                    ElemRef::Prop(n).encode()
                }
            };
            let mut records = self.records.borrow_mut();
            for id in &ids {
                records.insert(key(unum(*id)?), None);
            }
            for r in &rows {
                let n = unum(get(r, 0)?)?;
                records.insert(key(n), Some(get::<Vec<u8>>(r, 1)?));
                if kind == 0 {
                    // The (type, name) lookups of what was read need no query either.
                    self.remember_key(&utf8(get(r, 2)?)?, &utf8(get(r, 3)?)?, Some(n));
                }
            }
        }
        Ok(())
    }

    /// [`GraphRead::prefetch_postings`] (read-only transactions): one query per
    /// [`PREFETCH_CHUNK`] entries, an index probe each.
    pub(super) fn read_postings(&self, wanted: &[(&str, u64)]) -> StoreResult<()> {
        if !self.ahead.on {
            return Ok(());
        }
        if self.ahead.postings.borrow().len() + wanted.len() > ADJ_MAX {
            self.ahead.postings.borrow_mut().clear();
        }
        for chunk in wanted.chunks(PREFETCH_CHUNK) {
            let terms: Vec<&[u8]> = chunk.iter().map(|p| p.0.as_bytes()).collect();
            let elems: Vec<i64> = chunk.iter().map(|p| ek(p.1)).collect();
            let rows = self.query(
                "SELECT k.t, k.e, x.tf, x.len FROM unnest($1::bytea[], $2::bigint[]) AS k(t, e) \
                 CROSS JOIN LATERAL (SELECT tf, len FROM kip_postings \
                     WHERE term = k.t AND elem = k.e LIMIT 1) AS x",
                &[&terms, &elems],
            )?;
            let mut cache = self.ahead.postings.borrow_mut();
            for (t, e) in chunk {
                cache.insert(((*t).to_owned(), *e), None);
            }
            for r in &rows {
                let tf = u32::try_from(get::<i64>(r, 2)?).unwrap_or(u32::MAX);
                let len = u32::try_from(get::<i64>(r, 3)?).unwrap_or(u32::MAX);
                cache.insert((utf8(get(r, 0)?)?, uk(get(r, 1)?)), Some((tf, len)));
            }
        }
        Ok(())
    }

    /// A text index entry read ahead, if it was.
    pub(super) fn posting_ahead(&self, term: &str, key: u64) -> Option<Option<(u32, u32)>> {
        let cache = self.ahead.postings.borrow();
        if cache.is_empty() {
            return None;
        }
        cache.get(&(term.to_owned(), key)).copied()
    }

    /// Remembers elements (keys) returned together.
    pub(super) fn group(&self, mut keys: Vec<u64>) {
        if !self.ahead.on || keys.len() < 2 {
            return;
        }
        keys.sort_unstable();
        keys.dedup();
        let members = keys.iter().copied().collect();
        let mut groups = self.ahead.groups.borrow_mut();
        if groups.len() == GROUPS {
            groups.pop_back();
        }
        groups.push_front(Rc::new(Group {
            keys,
            members,
            records: RefCell::new((0, HashSet::new())),
            links: RefCell::new(HashMap::new()),
        }));
    }

    fn group_of(&self, key: u64) -> Option<Rc<Group>> {
        if !self.ahead.on {
            return None;
        }
        self.ahead
            .groups
            .borrow()
            .iter()
            .find(|g| g.members.contains(&key))
            .cloned()
    }

    /// Before a record is read on its own: from the second such read in its group on,
    /// reads the records of the part of the group around it (into the transaction's
    /// record cache), once per part.
    pub(super) fn records_ahead(&self, key: u64) -> StoreResult<()> {
        let Some(g) = self.group_of(key) else {
            return Ok(());
        };
        let part = g.part_of(key);
        if due(&mut g.records.borrow_mut(), part) {
            let elems: Vec<ElemRef> = g.part(part).iter().map(|k| ElemRef::decode(*k)).collect();
            self.read_records(&elems)?;
        }
        Ok(())
    }

    /// The links at one end of `at` (an element key) if read ahead; from the second
    /// scan one by one in its group on (same direction and predicate filter), reads
    /// those of the part of the group around it first, once per part.
    pub(super) fn links_ahead(
        &self,
        forward: bool,
        at: u64,
        p: Option<&str>,
    ) -> StoreResult<Option<Links>> {
        if !self.ahead.on {
            return Ok(None);
        }
        let key = (forward, p.map(str::to_owned), at);
        if let Some(l) = self.ahead.adj.borrow().get(&key) {
            return Ok(Some(l.clone()));
        }
        let Some(g) = self.group_of(at) else {
            return Ok(None);
        };
        let part = g.part_of(at);
        let now = {
            let mut links = g.links.borrow_mut();
            let state = links
                .entry((forward, key.1.clone()))
                .or_insert_with(|| (0, HashSet::new()));
            due(state, part)
        };
        if !now {
            return Ok(None);
        }
        self.read_links(g.part(part), forward, p)?;
        Ok(self.ahead.adj.borrow().get(&key).cloned())
    }

    /// Reads the links at one end of every element of `keys` (those with at most
    /// [`LINKS_PER_ELEM`]), and makes their far ends a group, and the links a group.
    fn read_links(&self, keys: &[u64], forward: bool, p: Option<&str>) -> StoreResult<()> {
        let (end, other) = if forward { ("s", "o") } else { ("o", "s") };
        let filter = if p.is_some() { " AND p = $2" } else { "" };
        // One more than kept per element: a list that long is incomplete.
        let sql = format!(
            "SELECT f.e, l.p, l.{other}, l.id FROM unnest($1::bigint[]) AS f(e) \
             CROSS JOIN LATERAL (SELECT p, {other}, id FROM kip_props \
                 WHERE {end} = f.e{filter} ORDER BY p, {other} LIMIT {}) AS l \
             ORDER BY f.e, l.p, l.{other}",
            LINKS_PER_ELEM + 1
        );
        let (mut ends, mut links) = (Vec::new(), Vec::new());
        for chunk in keys.chunks(LINK_BATCH) {
            let ids: Vec<i64> = chunk.iter().map(|k| ek(*k)).collect();
            let rows = match p {
                Some(p) => self.query(&sql, &[&ids, &p.as_bytes()])?,
                None => self.query(&sql, &[&ids])?,
            };
            let mut lists: HashMap<i64, Vec<(String, u64, u64)>> =
                ids.iter().map(|i| (*i, Vec::new())).collect();
            for r in &rows {
                let e = get::<i64>(r, 0)?;
                let pred = utf8(get(r, 1)?)?;
                if let Some(l) = lists.get_mut(&e) {
                    l.push((pred, uk(get(r, 2)?), unum(get(r, 3)?)?));
                }
            }
            let mut adj = self.ahead.adj.borrow_mut();
            if adj.len() + lists.len() > ADJ_MAX {
                adj.clear();
            }
            for (e, l) in lists {
                if l.len() > LINKS_PER_ELEM {
                    continue;
                }
                ends.extend(l.iter().map(|x| x.1));
                links.extend(l.iter().map(|x| ElemRef::Prop(x.2).encode()));
                adj.insert((forward, p.map(str::to_owned), uk(e)), Rc::new(l));
            }
        }
        self.group(ends);
        self.group(links);
        Ok(())
    }
}
