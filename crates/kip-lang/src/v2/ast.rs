//! The KIP 2.0 syntax tree: one node family per normative grammar
//! (`KIP-2.0-KQL.ebnf`, `KIP-2.0-KML.ebnf`, `KIP-2.0-META.ebnf`).
//!
//! The tree is syntactic only: Schema symbols are not resolved, functions are not checked
//! against a registry and the semantic rules the grammars leave to validators (a bound
//! handle, an id form where a statement resolves by structure, ...) are not applied.
//! Literals are kept as [`serde_json::Value`] scalars (string, number, boolean or null).

use crate::span::Span;
use serde_json::Value as Json;

/// One KIP 2.0 statement with the span of its text.
#[derive(Debug, Clone, PartialEq)]
pub struct Statement {
    /// What the statement is.
    pub kind: StatementKind,
    /// Where it is in the source.
    pub span: Span,
}

/// The three languages of KIP 2.0.
#[derive(Debug, Clone, PartialEq)]
pub enum StatementKind {
    /// A KQL `FIND` query.
    Query(Box<Query>),
    /// A KML mutation statement.
    Mutation(Box<Mutation>),
    /// A META statement.
    Meta(Box<Meta>),
}

impl StatementKind {
    /// The language of the statement: `"KQL"`, `"KML"` or `"META"`.
    pub fn language(&self) -> &'static str {
        match self {
            StatementKind::Query(_) => "KQL",
            StatementKind::Mutation(_) => "KML",
            StatementKind::Meta(_) => "META",
        }
    }
}

// ---- shared terms ---------------------------------------------------------------------

/// `scalar_value` / `meta_value` / `scalar_or_parameter`: a parameter or a literal.
#[derive(Debug, Clone, PartialEq)]
pub enum Scalar {
    /// `:name` (the name without `:`).
    Param(String),
    /// A JSON scalar literal.
    Literal(Json),
}

/// `schema_symbol`: a quoted Schema symbol or a parameter.
#[derive(Debug, Clone, PartialEq)]
pub enum Symbol {
    /// `"Person"`.
    Name(String),
    /// `:name`.
    Param(String),
}

/// `target_ref`: a variable, a parameter or a quoted id.
#[derive(Debug, Clone, PartialEq)]
pub enum TargetRef {
    /// `?name`.
    Var(String),
    /// `:name`.
    Param(String),
    /// `"id"`.
    Id(String),
}

/// `predicate_atom`: a quoted predicate, a parameter or a variable.
#[derive(Debug, Clone, PartialEq)]
pub enum PredicateAtom {
    /// `"prefers"`.
    Name(String),
    /// `:name`.
    Param(String),
    /// `?name`.
    Var(String),
}

/// `field_name`: an identifier or a quoted name.
pub type FieldName = String;

/// `data_value` / `mutation_value`: the value forms of objects and assignments.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `:name`.
    Param(String),
    /// A JSON scalar literal.
    Literal(Json),
    /// `[ ... ]`.
    Array(Vec<Value>),
    /// `{ key: value, ... }`.
    Object(Vec<(FieldName, Value)>),
    /// `name(args)`.
    Call(Call),
    /// `?var` with zero or more field steps.
    Field(FieldAccess),
}

/// `field_access`: `?var.name["quoted"]...` (no steps: the variable itself).
#[derive(Debug, Clone, PartialEq)]
pub struct FieldAccess {
    /// The variable name without `?`.
    pub var: String,
    /// The field steps, in order.
    pub steps: Vec<String>,
}

/// `function_call`: `name(expr, ...)`.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    /// The function name as written.
    pub name: String,
    /// The arguments.
    pub args: Vec<Expr>,
}

/// An expression (`FILTER`, projections, function arguments).
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    /// A primary value (field access, parameter, literal, array, object or call).
    Value(Value),
    /// `! e`.
    Not(Box<Expr>),
    /// `- e`.
    Neg(Box<Expr>),
    /// `l op r`.
    Binary(BinOp, Box<Expr>, Box<Expr>),
    /// `( e )`.
    Group(Box<Expr>),
}

/// A binary operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinOp {
    /// `||`
    Or,
    /// `&&`
    And,
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `<`
    Lt,
    /// `>`
    Gt,
    /// `<=`
    Le,
    /// `>=`
    Ge,
}

/// A match pattern value: `term` and `pattern_value` of the grammars (arrays only occur
/// as `pattern_value`).
#[derive(Debug, Clone, PartialEq)]
pub enum Pattern {
    /// `?name`.
    Var(String),
    /// `:name`.
    Param(String),
    /// A JSON scalar literal.
    Literal(Json),
    /// `[ pattern, ... ]`.
    Array(Vec<Pattern>),
    /// `{ key: pattern, ... }`.
    Object(ObjectPattern),
    /// A Proposition tuple.
    Tuple(Box<PropTuple>),
}

/// `object_pattern`: `{ key: pattern, ... }`.
pub type ObjectPattern = Vec<(FieldName, Pattern)>;

/// `proposition_tuple`.
#[derive(Debug, Clone, PartialEq)]
pub enum PropTuple {
    /// `( subject, predicate, object )`; the predicate is one exact atom outside KQL.
    Triple(Pattern, Vec<PathAtom>, Pattern),
    /// `( id: value )`.
    Id(Scalar),
}

/// `predicate_path_atom`: a predicate with an optional path quantifier.
#[derive(Debug, Clone, PartialEq)]
pub struct PathAtom {
    /// The predicate.
    pub atom: PredicateAtom,
    /// `{min}` / `{min,}` / `{min,max}`.
    pub quantifier: Option<Quantifier>,
}

/// `path_quantifier`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quantifier {
    /// The lower bound.
    pub min: u64,
    /// The upper bound: `{n}` has `Some(n)`, `{n,}` has `None`.
    pub max: Option<u64>,
}

/// The kind of a record pattern or record creation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordKind {
    /// `ASSERTION`.
    Assertion,
    /// `EVIDENCE`.
    Evidence,
    /// `ACTIVITY`.
    Activity,
}

/// One `WHERE` clause (KQL; KML and EXPORT use the raw subset without BELIEF).
#[derive(Debug, Clone, PartialEq)]
pub enum WhereClause {
    /// `?c [CONCEPT] { ... }`.
    Concept {
        /// The bound variable.
        var: String,
        /// The match object.
        pattern: ObjectPattern,
    },
    /// `[?p] [PROPOSITION] ( ... )`.
    Proposition {
        /// The bound variable, if any.
        var: Option<String>,
        /// The tuple.
        tuple: PropTuple,
    },
    /// `?r ASSERTION|EVIDENCE|ACTIVITY { ... }`.
    Record {
        /// The bound variable.
        var: String,
        /// Which record kind.
        kind: RecordKind,
        /// The match object.
        pattern: ObjectPattern,
    },
    /// `[?s] STRUCTURAL ( from, field, to )`.
    Structural {
        /// The bound variable, if any.
        var: Option<String>,
        /// The source term.
        from: Pattern,
        /// The structural field.
        field: Symbol,
        /// The target term.
        to: Pattern,
    },
    /// `?b BELIEF ( ... )` (KQL only).
    Belief {
        /// The bound variable.
        var: String,
        /// What is projected.
        target: BeliefTarget,
    },
    /// `?b BELIEF SLOT ( subject, predicate )` (KQL only).
    BeliefSlot {
        /// The bound variable.
        var: String,
        /// The subject term.
        subject: Pattern,
        /// The exact predicate.
        predicate: PredicateAtom,
    },
    /// `FILTER ( expr )`.
    Filter(Expr),
    /// `NOT { ... }`.
    Not(Vec<WhereClause>),
    /// `OPTIONAL { ... }`.
    Optional(Vec<WhereClause>),
    /// `UNION { ... }`.
    Union(Vec<WhereClause>),
}

/// The operand of `BELIEF`.
#[derive(Debug, Clone, PartialEq)]
pub enum BeliefTarget {
    /// `( ?p )`: a bound Proposition.
    Var(String),
    /// `( id: value )`.
    Id(Scalar),
    /// `( subject, predicate, object )` with an exact predicate.
    Triple(Pattern, PredicateAtom, Pattern),
}

/// `as_of_clause`.
#[derive(Debug, Clone, PartialEq)]
pub enum AsOf {
    /// `AS OF SEQ v`.
    Seq(Scalar),
    /// `AS OF TX v`.
    Tx(Scalar),
    /// `AS OF TIME v`.
    Time(Scalar),
}

// ---- KQL ------------------------------------------------------------------------------

/// `query`: `FIND ( ... ) WHERE { ... }` with its modifiers.
#[derive(Debug, Clone, PartialEq)]
pub struct Query {
    /// The projection list.
    pub projection: Vec<Projection>,
    /// The WHERE block.
    pub where_clauses: Vec<WhereClause>,
    /// `AS OF ...`.
    pub as_of: Option<AsOf>,
    /// `FOR TIME v`.
    pub for_time: Option<Scalar>,
    /// `WITH EPISTEMIC { ... }`.
    pub epistemic: Option<Vec<(FieldName, Value)>>,
    /// `ORDER BY ...`.
    pub order_by: Vec<OrderItem>,
    /// `LIMIT v`.
    pub limit: Option<Scalar>,
    /// `CURSOR v`.
    pub cursor: Option<Scalar>,
}

/// `projection_expression`.
#[derive(Debug, Clone, PartialEq)]
pub enum Projection {
    /// `COUNT|SUM|AVG|MIN|MAX ( [DISTINCT] expr )`.
    Aggregate {
        /// The aggregate, uppercase.
        func: String,
        /// `DISTINCT` was given.
        distinct: bool,
        /// The argument.
        arg: Expr,
    },
    /// Any other expression.
    Expr(Expr),
}

/// `order_item`.
#[derive(Debug, Clone, PartialEq)]
pub struct OrderItem {
    /// What to sort by.
    pub key: Projection,
    /// `DESC` was given.
    pub descending: bool,
}

// ---- KML ------------------------------------------------------------------------------

/// A KML statement (`kml_statement`; inside `MUTATE`, a `mutation_clause`).
#[derive(Debug, Clone, PartialEq)]
pub enum Mutation {
    /// `MUTATE { clause ... }` (clauses never MUTATE).
    Mutate(Vec<Mutation>),
    /// `CREATE CONCEPT ?h { ... }`.
    CreateConcept {
        /// The local handle.
        handle: String,
        /// The clauses.
        clauses: Vec<Clause>,
    },
    /// `UPSERT CONCEPT ?h { ... }`.
    UpsertConcept {
        /// The local handle.
        handle: String,
        /// The clauses.
        clauses: Vec<Clause>,
    },
    /// `ENSURE PROPOSITION [?h] ( ... ) [EXPECT VERSION v]`.
    EnsureProposition {
        /// The optional handle.
        handle: Option<String>,
        /// The tuple.
        tuple: PropTuple,
        /// `EXPECT VERSION`.
        expect_version: Option<Scalar>,
    },
    /// `ASSERT [?h] ( ... ) { ... } [SUPERSEDING target]`.
    Assert {
        /// The optional handle.
        handle: Option<String>,
        /// The tuple.
        tuple: PropTuple,
        /// The assignment object (by, mode, stance, confidence, ...).
        members: Vec<(FieldName, Value)>,
        /// `SUPERSEDING target`.
        superseding: Option<TargetRef>,
    },
    /// `CREATE EVIDENCE|ASSERTION|ACTIVITY ?h { ... }`.
    CreateRecord {
        /// The record kind.
        kind: RecordKind,
        /// The local handle.
        handle: String,
        /// The clauses.
        clauses: Vec<Clause>,
    },
    /// `UPDATE target [EXPECT VERSION v] action ... [WHERE {..}] [LIMIT v]`.
    Update {
        /// The target.
        target: TargetRef,
        /// `EXPECT VERSION`.
        expect_version: Option<Scalar>,
        /// The update actions.
        actions: Vec<Clause>,
        /// The selection, if given.
        selection: Selection,
    },
    /// `RETRACT ASSERTION target [WHERE] [LIMIT] [EXPECT STATE v]`.
    Retract {
        /// The target.
        target: TargetRef,
        /// The selection.
        selection: Selection,
        /// `EXPECT STATE`.
        expect_state: Option<Scalar>,
    },
    /// `SUPERSEDE ASSERTION target BY target` / `CORRECT EVIDENCE target BY target`.
    Replace {
        /// `RecordKind::Assertion` for SUPERSEDE, `RecordKind::Evidence` for CORRECT.
        kind: RecordKind,
        /// The old element.
        target: TargetRef,
        /// The new element.
        by: TargetRef,
        /// `EXPECT STATE`.
        expect_state: Option<Scalar>,
    },
    /// `TRANSITION ACTIVITY target TO v {SET ...} [EXPECT STATE v]`.
    Transition {
        /// The Activity.
        target: TargetRef,
        /// The new state.
        to: Scalar,
        /// `SET FIELDS` / `SET STRUCTURAL` finalization clauses.
        finalize: Vec<Clause>,
        /// `EXPECT STATE`.
        expect_state: Option<Scalar>,
    },
    /// `SET RETENTION target { ... } [WHERE] [LIMIT] [EXPECT VERSION v]`.
    SetRetention {
        /// The target.
        target: TargetRef,
        /// The retention assignments.
        policy: Vec<(FieldName, Value)>,
        /// The selection.
        selection: Selection,
        /// `EXPECT VERSION`.
        expect_version: Option<Scalar>,
    },
    /// `ARCHIVE` / `TOMBSTONE target [WHERE] [LIMIT] [EXPECT STATE v]`.
    Lifecycle {
        /// `true` for TOMBSTONE, `false` for ARCHIVE.
        tombstone: bool,
        /// The target.
        target: TargetRef,
        /// The selection.
        selection: Selection,
        /// `EXPECT STATE`.
        expect_state: Option<Scalar>,
    },
    /// `PURGE target [WHERE] [LIMIT] [REFERENCE POLICY v] CONFIRM "PURGE"`.
    Purge {
        /// The target.
        target: TargetRef,
        /// The selection.
        selection: Selection,
        /// `REFERENCE POLICY`.
        reference_policy: Option<Scalar>,
    },
    /// `MERGE CONCEPT target INTO target [WHERE] [EXPECT VERSION v]`.
    MergeConcept {
        /// The Concept merged away.
        source: TargetRef,
        /// The surviving Concept.
        into: TargetRef,
        /// The guard block.
        where_clauses: Option<Vec<WhereClause>>,
        /// `EXPECT VERSION`.
        expect_version: Option<Scalar>,
    },
}

/// An optional `WHERE { ... }` and the `LIMIT` after it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Selection {
    /// `WHERE { ... }`.
    pub where_clauses: Option<Vec<WhereClause>>,
    /// `LIMIT v`.
    pub limit: Option<Scalar>,
}

/// A clause inside a CREATE / UPSERT block, an UPDATE action or a TRANSITION
/// finalization (each statement admits its own subset, as its grammar rule says).
#[derive(Debug, Clone, PartialEq)]
pub enum Clause {
    /// `TYPE symbol`.
    Type(Symbol),
    /// `CLIENT KEY v`.
    ClientKey(Scalar),
    /// `NAME v`.
    Name(Scalar),
    /// `MATCH { ... }`.
    Match(ObjectPattern),
    /// `EXPECT VERSION v`.
    ExpectVersion(Scalar),
    /// `SET FIELDS { ... }`.
    SetFields(Vec<(FieldName, Value)>),
    /// `SET ATTRIBUTES { ... }`.
    SetAttributes(Vec<(FieldName, Value)>),
    /// `SET FACET symbol { ... }`.
    SetFacet(Symbol, Vec<(FieldName, Value)>),
    /// `UNSET ATTRIBUTES { a, "b" }`.
    UnsetAttributes(Vec<FieldName>),
    /// `UNSET FACET symbol { ... }`.
    UnsetFacet(Symbol, Vec<FieldName>),
    /// `SET STRUCTURAL { (field, value) [options] ... }`.
    SetStructural(Vec<StructuralEntry>),
    /// `UNSET STRUCTURAL { (field, value) ... }`.
    UnsetStructural(Vec<StructuralEntry>),
}

/// One `structural_assignment` / `structural_removal`.
#[derive(Debug, Clone, PartialEq)]
pub struct StructuralEntry {
    /// The structural field.
    pub field: Symbol,
    /// The target value.
    pub target: Value,
    /// The options object (assignments only).
    pub options: Option<Vec<(FieldName, Value)>>,
}

// ---- META -----------------------------------------------------------------------------

/// A META statement.
#[derive(Debug, Clone, PartialEq)]
pub enum Meta {
    /// `DESCRIBE ...`.
    Describe(Describe),
    /// `LIST ...`.
    List {
        /// What is listed, uppercase words joined by a space (e.g. `"SCHEMA PACKAGES"`).
        what: String,
        /// `STATUS v` (LIST SCHEMA PACKAGES only).
        status: Option<Scalar>,
        /// `LIMIT v`.
        limit: Option<Scalar>,
        /// `CURSOR v`.
        cursor: Option<Scalar>,
    },
    /// `SEARCH kind query ...`.
    Search(Box<Search>),
    /// `VERIFY target v`.
    Verify {
        /// `CAPSULE`, `SCHEMA PACKAGE`, `RECEIPT`, `BLOB` or `CHECKPOINT`.
        target: String,
        /// The artifact.
        value: Scalar,
    },
    /// `VALIDATE target v [WITH { ... }]`.
    Validate {
        /// `KQL`, `KML`, `CAPSULE`, `SCHEMA PACKAGE` or `IMPORT PLAN`.
        target: String,
        /// The artifact or text.
        value: Scalar,
        /// Validation options.
        options: Option<Vec<(FieldName, Value)>>,
    },
    /// `PREVIEW KML v`.
    PreviewKml(Scalar),
    /// `PREVIEW IMPORT CAPSULE v INTO v`.
    PreviewImportCapsule {
        /// The capsule.
        capsule: Scalar,
        /// The destination.
        into: Scalar,
    },
    /// `HISTORY ELEMENT v ...` / `HISTORY SPACE ...`.
    History {
        /// The element (None for HISTORY SPACE).
        element: Option<Scalar>,
        /// `FROM SEQ v`.
        from_seq: Option<Scalar>,
        /// `TO SEQ v`.
        to_seq: Option<Scalar>,
        /// `LIMIT v`.
        limit: Option<Scalar>,
        /// `CURSOR v`.
        cursor: Option<Scalar>,
    },
    /// `CHANGES SINCE v [LIMIT v]` / `CHANGES AFTER SEQ v [LIMIT v]`.
    Changes {
        /// `true` for `AFTER SEQ`, `false` for `SINCE`.
        after_seq: bool,
        /// The coordinate or cursor.
        from: Scalar,
        /// `LIMIT v`.
        limit: Option<Scalar>,
    },
    /// `SNAPSHOT [AS OF ...]`.
    Snapshot(Option<AsOf>),
    /// `EXPORT CAPSULE target WHERE { ... } [WITH { ... }] [AS OF ...]`.
    ExportCapsule {
        /// The capsule target.
        target: TargetRef,
        /// The raw selection.
        where_clauses: Vec<WhereClause>,
        /// Options.
        options: Option<Vec<(FieldName, Value)>>,
        /// `AS OF ...`.
        as_of: Option<AsOf>,
    },
}

/// The `DESCRIBE` forms.
#[derive(Debug, Clone, PartialEq)]
pub enum Describe {
    /// `DESCRIBE PRIMER [MODE v]`.
    Primer(Option<Scalar>),
    /// `DESCRIBE PROTOCOL`.
    Protocol,
    /// `DESCRIBE EXECUTION CONTEXT`.
    ExecutionContext,
    /// `DESCRIBE CAPABILITIES`.
    Capabilities,
    /// `DESCRIBE PROJECTION CAPABILITY`.
    ProjectionCapability,
    /// `DESCRIBE SCHEMA ENVIRONMENT [AS OF ...]`.
    SchemaEnvironment(Option<AsOf>),
    /// `DESCRIBE SNAPSHOT [AS OF ...]`.
    Snapshot(Option<AsOf>),
    /// `DESCRIBE COMPATIBILITY FROM v TO v`.
    Compatibility(Scalar, Scalar),
    /// `DESCRIBE TRANSACTION BY IDEMPOTENCY KEY v`.
    TransactionByIdempotencyKey(Scalar),
    /// `DESCRIBE ACCESS [WITH { ... }]`.
    Access(Option<Vec<(FieldName, Value)>>),
    /// The forms taking one value: `what` is the uppercase words after DESCRIBE
    /// (`SPACE`, `PACKAGE`, `TYPE`, `PREDICATE`, `FACET`, `STRUCTURAL FIELD`, `ERROR`,
    /// `TRANSACTION`, `CAPSULE`, `EPISTEMIC POLICY`, `TRUST`); the value is optional for
    /// `SPACE`, `EPISTEMIC POLICY` and `TRUST`.
    Named {
        /// The described kind.
        what: String,
        /// The value.
        value: Option<Scalar>,
    },
}

/// `search_statement`.
#[derive(Debug, Clone, PartialEq)]
pub struct Search {
    /// `CONCEPT`, `PROPOSITION`, `ASSERTION`, `EVIDENCE`, `ACTIVITY` or `COGNITION`.
    pub kind: String,
    /// The query text.
    pub query: Scalar,
    /// `WITH TYPE v`.
    pub with_type: Option<Scalar>,
    /// `WITH PREDICATE v`.
    pub with_predicate: Option<Scalar>,
    /// `MODE "keyword"|"semantic"|"hybrid"|:p`.
    pub mode: Option<Scalar>,
    /// `THRESHOLD v`.
    pub threshold: Option<Scalar>,
    /// `AS OF SEQ v`.
    pub as_of_seq: Option<Scalar>,
    /// `LIMIT v`.
    pub limit: Option<Scalar>,
    /// `CURSOR v`.
    pub cursor: Option<Scalar>,
}
