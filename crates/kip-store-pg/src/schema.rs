//! The database schema and its versioned migrations.
//!
//! Every table is named `kip_*` and created in the connection's current schema (the
//! first of its `search_path`, `public` by default; `options=-csearch_path=NAME` in the
//! URL puts a memory in a schema of its own). Migrations are numbered; `kip_migrations`
//! records which ran. They run at open, in one transaction under an advisory lock, so
//! several processes starting at once apply each migration exactly once.
//!
//! Why `bytea` for names and keys rather than `text`: KIP strings may hold U+0000,
//! which `text` cannot store, and `bytea` compares byte by byte, the order the engine
//! relies on for ranges (the same order as the embedded store's keys), whatever the
//! database's collation.
//!
//! Element references (a link's subject or object, a text-index document, an
//! embedding's element) are the embedded store's `u64` keys ([`kip_storage::ElemRef`],
//! bit 63 set for propositions) with that bit flipped, stored as `bigint`: the flip
//! keeps their order in a signed column (concepts first, then propositions).

/// `(version, SQL)` of every migration, in order.
pub(crate) const MIGRATIONS: &[(i32, &str)] = &[
    (
        1,
        r#"
CREATE TABLE kip_meta (
    key bytea PRIMARY KEY,
    value bytea NOT NULL
);
CREATE TABLE kip_concepts (
    id bigint PRIMARY KEY,
    type bytea NOT NULL,
    name bytea NOT NULL,
    rec bytea NOT NULL,
    CONSTRAINT kip_concepts_key UNIQUE (type, name) DEFERRABLE INITIALLY DEFERRED
);
CREATE INDEX kip_concepts_type ON kip_concepts (type, id);
CREATE INDEX kip_concepts_name ON kip_concepts (name, id);
CREATE TABLE kip_props (
    id bigint PRIMARY KEY,
    s bigint NOT NULL,
    p bytea NOT NULL,
    o bigint NOT NULL,
    rec bytea NOT NULL,
    CONSTRAINT kip_props_spo UNIQUE (s, p, o) DEFERRABLE INITIALLY DEFERRED
);
CREATE INDEX kip_props_pos ON kip_props (p, o, s);
CREATE INDEX kip_props_osp ON kip_props (o, p, s);
CREATE TABLE kip_stats (
    key bytea PRIMARY KEY,
    n bigint NOT NULL
);
CREATE TABLE kip_postings (
    term bytea NOT NULL,
    elem bigint NOT NULL,
    tf bigint NOT NULL,
    len bigint NOT NULL,
    PRIMARY KEY (term, elem)
);
CREATE TABLE kip_attrs (
    type bytea NOT NULL,
    attr bytea NOT NULL,
    vkey bytea NOT NULL,
    id bigint NOT NULL,
    PRIMARY KEY (type, attr, vkey, id)
);
CREATE TABLE kip_embed_marks (
    elem bigint PRIMARY KEY
);
CREATE TABLE kip_vectors (
    elem bigint PRIMARY KEY,
    v bytea NOT NULL
);
CREATE TABLE kip_audit (
    seq bigint PRIMARY KEY,
    rec bytea NOT NULL
);
"#,
    ),
    (
        2,
        // The key epoch (`keys.rs`): raised by the database itself whenever a concept
        // row loses its key (deleted, renamed, the table truncated), whoever does it: a
        // kip of any version, or an operator by hand. The count lives in the table's own
        // schema's `kip_stats`, whatever the session's search_path.
        r#"
CREATE FUNCTION kip_key_epoch_bump() RETURNS trigger LANGUAGE plpgsql AS $kip$
BEGIN
    EXECUTE format(
        'INSERT INTO %I.kip_stats (key, n) VALUES (convert_to(''#key_epoch'', ''UTF8''), 1) '
        'ON CONFLICT (key) DO UPDATE SET n = kip_stats.n + 1',
        TG_TABLE_SCHEMA);
    RETURN NULL;
END
$kip$;
CREATE TRIGGER kip_concepts_deleted AFTER DELETE ON kip_concepts
    FOR EACH STATEMENT EXECUTE FUNCTION kip_key_epoch_bump();
CREATE TRIGGER kip_concepts_truncated AFTER TRUNCATE ON kip_concepts
    FOR EACH STATEMENT EXECUTE FUNCTION kip_key_epoch_bump();
CREATE TRIGGER kip_concepts_rekeyed AFTER UPDATE ON kip_concepts
    FOR EACH ROW WHEN (OLD.type IS DISTINCT FROM NEW.type OR OLD.name IS DISTINCT FROM NEW.name)
    EXECUTE FUNCTION kip_key_epoch_bump();
"#,
    ),
    (
        3,
        // The request log (`kip_storage::RequestLog`): each write statement's outcome
        // under its request's id, written in the statement's transaction, so a request
        // re-sent after a failover or retried by its client is answered, not re-applied.
        r#"
CREATE TABLE kip_requests (
    key bytea PRIMARY KEY,
    at bigint NOT NULL,
    outcome bytea NOT NULL
);
CREATE INDEX kip_requests_at ON kip_requests (at, key);
"#,
    ),
    (
        4,
        // KIP 2.0 element records (`kip_storage::elements`: assertions, evidence,
        // activities) and their structural references, target first; keys lead with
        // the memory space (docs/storage.md §1).
        r#"
CREATE TABLE kip_elements (
    space integer NOT NULL,
    id bigint NOT NULL,
    rec bytea NOT NULL,
    PRIMARY KEY (space, id)
);
CREATE TABLE kip_element_refs (
    space integer NOT NULL,
    target bigint NOT NULL,
    role bytea NOT NULL,
    source bigint NOT NULL,
    PRIMARY KEY (space, target, role, source)
);
"#,
    ),
    (
        5,
        // History (`kip_storage::history`, docs/storage.md §3): the version chain of
        // past states, what each commit changed, and the commit records of each space.
        r#"
CREATE TABLE kip_hist_versions (
    space integer NOT NULL,
    key bigint NOT NULL,
    part smallint NOT NULL,
    valid_to bigint NOT NULL,
    state bytea NOT NULL,
    PRIMARY KEY (space, key, part, valid_to)
);
CREATE TABLE kip_hist_changes (
    space integer NOT NULL,
    seq bigint NOT NULL,
    key bigint NOT NULL,
    PRIMARY KEY (space, seq, key)
);
CREATE TABLE kip_hist_commits (
    space integer NOT NULL,
    seq bigint NOT NULL,
    rec bytea NOT NULL,
    PRIMARY KEY (space, seq)
);
"#,
    ),
];

/// The newest schema version this build knows.
pub(crate) fn latest() -> i32 {
    MIGRATIONS.last().map_or(0, |m| m.0)
}
