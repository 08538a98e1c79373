//! Scans of [`PgTx`]: keyset-paged queries, and the links at one end of an element.

use super::*;

/// Elements whose links one `scan_many` query reads at most.
const SCAN_MANY_CHUNK: usize = 1_000;

/// Links per (element, predicate) one `scan_many` query reads at most (more: that
/// element's are scanned on their own, paged).
const SCAN_MANY_PER_PAIR: usize = 256;

/// The element key of a scanned row.
pub(super) type ElemOf<'a> = dyn Fn(&Row) -> StoreResult<u64> + 'a;

impl PgTx<'_> {
    /// Runs `first` (parameters `fixed`, then the page size), then `next` (parameters
    /// `fixed`, the cursor `after` made from the last row of the previous page, then the
    /// page size) until a page comes back short or `f` returns false.
    pub(super) fn paged(
        &self,
        first: &str,
        next: &str,
        fixed: &Params<'_>,
        after: &dyn Fn(&Row) -> StoreResult<Cursor>,
        f: &mut dyn FnMut(&Row) -> StoreResult<Continue>,
    ) -> StoreResult<()> {
        self.paged_grouped(first, next, fixed, after, None, f)
    }

    /// [`PgTx::paged`], making the elements of each page (`elem` of a row: its key) a
    /// read-ahead group before visiting it (see `ahead.rs`).
    pub(super) fn paged_grouped(
        &self,
        first: &str,
        next: &str,
        fixed: &Params<'_>,
        after: &dyn Fn(&Row) -> StoreResult<Cursor>,
        elem: Option<&ElemOf<'_>>,
        f: &mut dyn FnMut(&Row) -> StoreResult<Continue>,
    ) -> StoreResult<()> {
        let mut limit = FIRST_PAGE;
        let mut cursor: Option<Cursor> = None;
        loop {
            let rows = {
                let mut params: Vec<&(dyn ToSql + Sync)> = fixed.to_vec();
                let sql = match &cursor {
                    None => first,
                    Some(c) => {
                        params.extend(c.iter().map(|b| b.as_ref()));
                        next
                    }
                };
                params.push(&limit);
                self.query(sql, &params)?
            };
            if let Some(elem) = elem.filter(|_| self.ahead.on) {
                self.group(rows.iter().map(elem).collect::<StoreResult<_>>()?);
            }
            for r in &rows {
                if !f(r)? {
                    return Ok(());
                }
            }
            match rows.last() {
                Some(last) if rows.len() as i64 >= limit => cursor = Some(after(last)?),
                _ => return Ok(()),
            }
            limit = (limit * 4).min(MAX_PAGE);
        }
    }

    /// Ids in ascending order from an id-ordered query (`first`: `$1..` = `fixed`,
    /// then the limit; `next` adds `id > $n` before the limit) of concepts, or of
    /// propositions when `props`.
    pub(super) fn scan_ids(
        &self,
        first: &str,
        next: &str,
        fixed: &Params<'_>,
        props: bool,
        f: &mut dyn FnMut(u64) -> StoreResult<Continue>,
    ) -> StoreResult<()> {
        let elem = |r: &Row| -> StoreResult<u64> {
            let n = unum(get(r, 0)?)?;
            Ok(if props {
                ElemRef::Prop(n).encode()
            } else {
                ElemRef::Concept(n).encode()
            })
        };
        self.paged_grouped(
            first,
            next,
            fixed,
            &|r| Ok(vec![Box::new(get::<i64>(r, 0)?)]),
            Some(&elem),
            &mut |r| f(unum(get(r, 0)?)?),
        )
    }

    /// Links at one end (`at` = `end` column), optionally of one predicate, in
    /// (predicate, other end) order: `f(predicate, other end, id)`.
    pub(super) fn scan_links(
        &self,
        end: &str,
        other: &str,
        at: i64,
        p: Option<&str>,
        f: &mut dyn FnMut(&str, ElemRef, u64) -> StoreResult<Continue>,
    ) -> StoreResult<()> {
        self.sync()?;
        if let Some(links) = self.links_ahead(end == "s", uk(at), p)? {
            for (p, other, id) in links.iter() {
                if !f(p, ElemRef::decode(*other), *id)? {
                    break;
                }
            }
            return Ok(());
        }
        // The far ends of a page of links read one by one form a read-ahead group:
        // their records and links are what a caller visits next.
        let far_end = |r: &Row| -> StoreResult<u64> { Ok(uk(get(r, 1)?)) };
        let mut visit = |r: &Row| -> StoreResult<Continue> {
            let p = std::str::from_utf8(get::<&[u8]>(r, 0)?)
                .map_err(|_| StoreError::Corruption("a stored predicate is not UTF-8".into()))?;
            f(p, ElemRef::decode(uk(get(r, 1)?)), unum(get(r, 2)?)?)
        };
        match p {
            Some(p) => {
                let first = format!(
                    "SELECT p, {other}, id FROM kip_props WHERE {end} = $1 AND p = $2 ORDER BY {other} LIMIT $3"
                );
                let next = format!(
                    "SELECT p, {other}, id FROM kip_props WHERE {end} = $1 AND p = $2 AND {other} > $3 ORDER BY {other} LIMIT $4"
                );
                self.paged_grouped(
                    &first,
                    &next,
                    &[&at, &p.as_bytes()],
                    &|r| Ok(vec![Box::new(get::<i64>(r, 1)?)]),
                    Some(&far_end),
                    &mut visit,
                )
            }
            None => {
                let first = format!(
                    "SELECT p, {other}, id FROM kip_props WHERE {end} = $1 ORDER BY p, {other} LIMIT $2"
                );
                let next = format!(
                    "SELECT p, {other}, id FROM kip_props WHERE {end} = $1 AND (p, {other}) > ($2, $3) ORDER BY p, {other} LIMIT $4"
                );
                self.paged_grouped(
                    &first,
                    &next,
                    &[&at],
                    &|r| {
                        Ok(vec![
                            Box::new(get::<Vec<u8>>(r, 0)?),
                            Box::new(get::<i64>(r, 1)?),
                        ])
                    },
                    Some(&far_end),
                    &mut visit,
                )
            }
        }
    }

    /// [`GraphRead::scan_many`]: the links of many elements, a chunk of them per query.
    pub(super) fn links_of_many(
        &self,
        nodes: &[ElemRef],
        names: &[String],
        forward: bool,
        f: &mut dyn FnMut(ElemRef, &str, ElemRef, u64) -> StoreResult<Continue>,
    ) -> StoreResult<()> {
        self.sync()?;
        let (end, other) = if forward { ("s", "o") } else { ("o", "s") };
        // At most SCAN_MANY_PER_PAIR links per (node, predicate) come with the batch
        // (one more tells that there are more): a hub's links are then scanned on
        // their own, paged, so one query's rows stay bounded.
        let sql = format!(
            "SELECT f.i, n.j, l.p, l.{other}, l.id \
             FROM unnest($1::bigint[]) WITH ORDINALITY AS f(e, i) \
             CROSS JOIN unnest($2::bytea[]) WITH ORDINALITY AS n(p, j) \
             CROSS JOIN LATERAL (SELECT p, {other}, id FROM kip_props \
                 WHERE {end} = f.e AND p = n.p ORDER BY {other} LIMIT {}) AS l \
             ORDER BY f.i, n.j, l.{other}",
            SCAN_MANY_PER_PAIR + 1
        );
        let preds: Vec<&[u8]> = names.iter().map(|n| n.as_bytes()).collect();
        for chunk in nodes.chunks(SCAN_MANY_CHUNK) {
            let keys: Vec<i64> = chunk.iter().map(|e| ek(e.encode())).collect();
            let rows = self.query(&sql, &[&keys, &preds])?;
            let mut at = 0;
            while at < rows.len() {
                let pair = (get::<i64>(&rows[at], 0)?, get::<i64>(&rows[at], 1)?);
                let mut end_at = at + 1;
                while end_at < rows.len()
                    && (get::<i64>(&rows[end_at], 0)?, get::<i64>(&rows[end_at], 1)?) == pair
                {
                    end_at += 1;
                }
                let node_at = usize::try_from(pair.0 - 1).ok().and_then(|i| chunk.get(i));
                let name_at = usize::try_from(pair.1 - 1).ok().and_then(|j| names.get(j));
                let (Some(node), Some(name)) = (node_at.copied(), name_at) else {
                    return Err(StoreError::Other("scan_many: a row out of range".into()));
                };
                if end_at - at > SCAN_MANY_PER_PAIR {
                    let mut more = true;
                    self.scan_links(
                        end,
                        other,
                        ek(node.encode()),
                        Some(name),
                        &mut |p, o, id| {
                            more = f(node, p, o, id)?;
                            Ok(more)
                        },
                    )?;
                    if !more {
                        return Ok(());
                    }
                } else {
                    for r in &rows[at..end_at] {
                        let p = std::str::from_utf8(get::<&[u8]>(r, 2)?).map_err(|_| {
                            StoreError::Corruption("a stored predicate is not UTF-8".into())
                        })?;
                        if !f(node, p, ElemRef::decode(uk(get(r, 3)?)), unum(get(r, 4)?)?)? {
                            return Ok(());
                        }
                    }
                }
                at = end_at;
            }
        }
        Ok(())
    }
}
