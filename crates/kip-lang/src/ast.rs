//! The typed KIP abstract syntax tree.
//!
//! Types mirror the grammar one-to-one. Every node carries a [`Span`]; spans are ignored
//! by equality, so `parse(print(ast)) == ast`. Places where a `:name` placeholder may stand
//! are typed [`Slot`] (a literal or a parameter) or are a [`ValueExpr`] of kind
//! [`ValueKind::Param`]; parameters are replaced on the tree by [`crate::bind`], never by
//! editing text.
//!
//! One file on purpose (about 1,000 lines since RC11's UPDATE, MERGE, EXPORT and
//! SEARCH modes): the whole tree is one type definition read together, and splitting
//! it would scatter the grammar's shape.

use crate::span::Span;

/// One KIP command (statement).
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// A KQL `FIND` query.
    Find(FindQuery),
    /// A KML `UPSERT`.
    Upsert(Upsert),
    /// A KML `DELETE` statement.
    Delete(Delete),
    /// A KML `UPDATE` statement (RC9+).
    Update(Update),
    /// A KML `MERGE CONCEPT` statement (RC9+).
    Merge(Merge),
    /// A META `EXPORT` command (RC9+).
    Export(Export),
    /// A META `DESCRIBE` command.
    Describe(Describe),
    /// A META `SEARCH` command.
    Search(Search),
}

/// The family a command belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommandKind {
    /// KQL (`FIND`).
    Kql,
    /// KML (`UPSERT`, `UPDATE`, `MERGE`, `DELETE`).
    Kml,
    /// META (`DESCRIBE`, `SEARCH`, `EXPORT`).
    Meta,
}

impl Command {
    /// KQL, KML or META.
    pub fn kind(&self) -> CommandKind {
        match self {
            Command::Find(_) => CommandKind::Kql,
            Command::Upsert(_) | Command::Delete(_) | Command::Update(_) | Command::Merge(_) => {
                CommandKind::Kml
            }
            Command::Describe(_) | Command::Search(_) | Command::Export(_) => CommandKind::Meta,
        }
    }

    /// True for commands that may change the graph (`UPSERT`, `UPDATE`, `MERGE`,
    /// `DELETE`).
    pub fn is_write(&self) -> bool {
        self.kind() == CommandKind::Kml
    }

    /// The span of the whole command.
    pub fn span(&self) -> Span {
        match self {
            Command::Find(q) => q.span,
            Command::Upsert(u) => u.span,
            Command::Delete(d) => d.span,
            Command::Update(u) => u.span,
            Command::Merge(m) => m.span,
            Command::Export(e) => e.span,
            Command::Describe(d) => d.span,
            Command::Search(s) => s.span,
        }
    }
}

/// A named `?variable` (or UPSERT handle); `name` is without the `?`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Variable {
    /// The name without the `?` prefix.
    pub name: String,
    /// Where it is.
    pub span: Span,
}

/// A `:name` placeholder; `name` is without the `:`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Param {
    /// The name without the `:` prefix.
    pub name: String,
    /// Where it is.
    pub span: Span,
}

/// A position that holds either a literal of type `T` or a `:param` placeholder.
#[derive(Debug, Clone, PartialEq)]
pub enum Slot<T> {
    /// A literal written in the command.
    Literal(T, Span),
    /// A placeholder, filled by parameter binding.
    Param(Param),
}

impl<T> Slot<T> {
    /// The literal, or `None` while it is still a placeholder.
    pub fn literal(&self) -> Option<&T> {
        match self {
            Slot::Literal(v, _) => Some(v),
            Slot::Param(_) => None,
        }
    }

    /// Where it is.
    pub fn span(&self) -> Span {
        match self {
            Slot::Literal(_, s) => *s,
            Slot::Param(p) => p.span,
        }
    }
}

/// A string position (type name, predicate, id, key, search term, ...).
pub type StrSlot = Slot<String>;

/// A JSON value as written in a command, possibly containing placeholders.
#[derive(Debug, Clone, PartialEq)]
pub struct ValueExpr {
    /// The value.
    pub kind: ValueKind,
    /// Where it is.
    pub span: Span,
}

/// The forms a [`ValueExpr`] takes.
#[derive(Debug, Clone, PartialEq)]
pub enum ValueKind {
    /// `null`
    Null,
    /// `true` / `false`
    Bool(bool),
    /// A JSON number.
    Number(serde_json::Number),
    /// A JSON string.
    String(String),
    /// `[...]`
    Array(Vec<ValueExpr>),
    /// `{key: value, ...}` with keys in written order.
    Object(Vec<(String, ValueExpr)>),
    /// A `:name` placeholder.
    Param(Param),
}

impl ValueExpr {
    /// Converts to a JSON value; `Err(param)` names the first unbound placeholder found.
    /// Later keys win over earlier duplicates, as in JSON parsers.
    pub fn to_json(&self) -> Result<serde_json::Value, &Param> {
        use serde_json::Value;
        Ok(match &self.kind {
            ValueKind::Null => Value::Null,
            ValueKind::Bool(b) => Value::Bool(*b),
            ValueKind::Number(n) => Value::Number(n.clone()),
            ValueKind::String(s) => Value::String(s.clone()),
            ValueKind::Array(items) => Value::Array(
                items
                    .iter()
                    .map(ValueExpr::to_json)
                    .collect::<Result<_, _>>()?,
            ),
            ValueKind::Object(entries) => {
                let mut map = serde_json::Map::new();
                for (k, v) in entries {
                    map.insert(k.clone(), v.to_json()?);
                }
                Value::Object(map)
            }
            ValueKind::Param(p) => return Err(p),
        })
    }

    /// A literal value (no placeholders) from JSON.
    pub fn from_json(v: &serde_json::Value, span: Span) -> ValueExpr {
        use serde_json::Value;
        let kind = match v {
            Value::Null => ValueKind::Null,
            Value::Bool(b) => ValueKind::Bool(*b),
            Value::Number(n) => ValueKind::Number(n.clone()),
            Value::String(s) => ValueKind::String(s.clone()),
            Value::Array(items) => ValueKind::Array(
                items
                    .iter()
                    .map(|i| ValueExpr::from_json(i, span))
                    .collect(),
            ),
            Value::Object(map) => ValueKind::Object(
                map.iter()
                    .map(|(k, v)| (k.clone(), ValueExpr::from_json(v, span)))
                    .collect(),
            ),
        };
        ValueExpr { kind, span }
    }
}

/// An object literal (`SET ATTRIBUTES { ... }`, `WITH METADATA { ... }`).
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectExpr {
    /// Entries in written order.
    pub entries: Vec<(String, ValueExpr)>,
    /// Where it is, braces included.
    pub span: Span,
}

// ---------------------------------------------------------------------------------------
// KQL
// ---------------------------------------------------------------------------------------

/// `FIND(...) WHERE { ... } [ORDER BY ...] [LIMIT n] [CURSOR "t"]`.
#[derive(Debug, Clone, PartialEq)]
pub struct FindQuery {
    /// The projections, at least one.
    pub projections: Vec<Projection>,
    /// The `WHERE` body.
    pub where_clauses: Vec<WhereClause>,
    /// `ORDER BY` keys, in priority order (empty when absent).
    pub order_by: Vec<OrderKey>,
    /// `LIMIT`.
    pub limit: Option<Slot<u64>>,
    /// `CURSOR`.
    pub cursor: Option<StrSlot>,
    /// The whole query.
    pub span: Span,
}

/// One expression of `FIND(...)` or `ORDER BY`.
#[derive(Debug, Clone, PartialEq)]
pub enum Projection {
    /// A variable or dot path.
    Path(DotPath),
    /// An aggregation.
    Aggregate(Aggregate),
}

impl Projection {
    /// Where it is.
    pub fn span(&self) -> Span {
        match self {
            Projection::Path(p) => p.span,
            Projection::Aggregate(a) => a.span,
        }
    }
}

/// An aggregation function.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AggregateFunc {
    /// `COUNT`
    Count,
    /// `SUM`
    Sum,
    /// `AVG`
    Avg,
    /// `MIN`
    Min,
    /// `MAX`
    Max,
}

impl AggregateFunc {
    /// The keyword.
    pub fn keyword(self) -> &'static str {
        match self {
            AggregateFunc::Count => "COUNT",
            AggregateFunc::Sum => "SUM",
            AggregateFunc::Avg => "AVG",
            AggregateFunc::Min => "MIN",
            AggregateFunc::Max => "MAX",
        }
    }

    /// The function for a keyword.
    pub fn from_keyword(s: &str) -> Option<AggregateFunc> {
        Some(match s {
            "COUNT" => AggregateFunc::Count,
            "SUM" => AggregateFunc::Sum,
            "AVG" => AggregateFunc::Avg,
            "MIN" => AggregateFunc::Min,
            "MAX" => AggregateFunc::Max,
            _ => return None,
        })
    }
}

/// `COUNT(?x)`, `COUNT(DISTINCT ?x)`, `SUM(?x.attributes.n)`, ...
#[derive(Debug, Clone, PartialEq)]
pub struct Aggregate {
    /// The function.
    pub func: AggregateFunc,
    /// `DISTINCT` was written.
    pub distinct: bool,
    /// The aggregated expression.
    pub arg: DotPath,
    /// Where it is.
    pub span: Span,
}

/// `?var` or `?var.field[.key...]`.
#[derive(Debug, Clone, PartialEq)]
pub struct DotPath {
    /// The variable.
    pub var: Variable,
    /// The segments after the variable (`["attributes", "risk_level"]`); empty for the
    /// whole element.
    pub path: Vec<String>,
    /// Where it is.
    pub span: Span,
}

/// Sort direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Direction {
    /// Ascending (default).
    #[default]
    Asc,
    /// Descending.
    Desc,
}

/// One `ORDER BY` key.
#[derive(Debug, Clone, PartialEq)]
pub struct OrderKey {
    /// What to sort by.
    pub expr: Projection,
    /// `ASC` / `DESC`.
    pub direction: Direction,
    /// Whether the direction was written explicitly (kept for faithful printing).
    pub explicit_direction: bool,
}

/// One clause of a `WHERE` body (or of `NOT`/`OPTIONAL`/`UNION`).
#[derive(Debug, Clone, PartialEq)]
pub enum WhereClause {
    /// `?var {id|type|name: ...}`
    Concept(ConceptPattern),
    /// `[?link] (s, p, o)` or `[?link] (id: "...")`
    Proposition(PropositionPattern),
    /// `FILTER(expr)`
    Filter(Filter),
    /// `NOT { ... }`
    Not(GroupClause),
    /// `OPTIONAL { ... }`
    Optional(GroupClause),
    /// `UNION { ... }`
    Union(GroupClause),
}

/// A bound concept clause: `?var {type: "Drug"}`.
#[derive(Debug, Clone, PartialEq)]
pub struct ConceptPattern {
    /// The bound variable.
    pub var: Variable,
    /// The matcher.
    pub matcher: ConceptMatcher,
    /// Where it is.
    pub span: Span,
}

/// `{id: ...}`, `{type: ..., name: ...}`, `{type: ...}`, `{name: ...}` (any non-empty
/// combination of the three keys).
#[derive(Debug, Clone, PartialEq)]
pub struct ConceptMatcher {
    /// `id`
    pub id: Option<StrSlot>,
    /// `type`
    pub concept_type: Option<StrSlot>,
    /// `name`
    pub name: Option<StrSlot>,
    /// Where it is, braces included.
    pub span: Span,
}

/// A proposition clause, optionally bound to a link variable.
#[derive(Debug, Clone, PartialEq)]
pub struct PropositionPattern {
    /// `?link` before the parenthesis.
    pub var: Option<Variable>,
    /// What is matched.
    pub matcher: PropositionMatcher,
    /// Where it is.
    pub span: Span,
}

/// The inside of a proposition clause's parentheses.
#[derive(Debug, Clone, PartialEq)]
pub enum PropositionMatcher {
    /// `(id: "P:1")`
    Id(StrSlot),
    /// `(subject, predicate, object)`
    Triple(Box<TriplePattern>),
}

/// `(subject, predicate, object)`.
#[derive(Debug, Clone, PartialEq)]
pub struct TriplePattern {
    /// The subject.
    pub subject: Endpoint,
    /// The predicate (with optional path modifiers).
    pub predicate: PredicatePattern,
    /// The object.
    pub object: Endpoint,
}

/// A subject or object of a proposition clause.
#[derive(Debug, Clone, PartialEq)]
pub enum Endpoint {
    /// `?var` (a query variable, or an UPSERT handle).
    Var(Variable),
    /// `{...}` or inline named `?x {...}` (the variable is then `Some`).
    Concept {
        /// Inline name, if any.
        var: Option<Variable>,
        /// The matcher.
        matcher: ConceptMatcher,
    },
    /// A nested proposition `(...)` or inline named `?fact (...)`.
    Proposition(Box<PropositionPattern>),
}

impl Endpoint {
    /// Where it is.
    pub fn span(&self) -> Span {
        match self {
            Endpoint::Var(v) => v.span,
            Endpoint::Concept { var, matcher } => match var {
                Some(v) => v.span.to(matcher.span),
                None => matcher.span,
            },
            Endpoint::Proposition(p) => p.span,
        }
    }
}

/// The predicate part of a proposition clause.
#[derive(Debug, Clone, PartialEq)]
pub enum PredicatePattern {
    /// `?p`: binds the predicate name.
    Var(Variable),
    /// One or more literal predicates (`"a" | "b"`), with an optional hop range.
    Literal {
        /// The alternatives, at least one.
        alternatives: Vec<StrSlot>,
        /// `{m,n}`, `{m,}` or `{n}`.
        hops: Option<HopRange>,
        /// Where it is.
        span: Span,
    },
}

/// A hop range on a predicate. `max: None` means unbounded (`{m,}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct HopRange {
    /// Minimum hops.
    pub min: u32,
    /// Maximum hops, `None` when open-ended.
    pub max: Option<u32>,
    /// `{n}` was written (printing keeps the form).
    pub exact: bool,
}

/// `FILTER(expr)`.
#[derive(Debug, Clone, PartialEq)]
pub struct Filter {
    /// The boolean expression.
    pub expr: Expr,
    /// Where it is.
    pub span: Span,
}

/// The body of `NOT`/`OPTIONAL`/`UNION`.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupClause {
    /// The clauses inside the braces.
    pub clauses: Vec<WhereClause>,
    /// Where it is.
    pub span: Span,
}

/// A FILTER expression.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    /// A literal (or placeholder) value.
    Value(ValueExpr),
    /// A variable or dot path.
    Path(DotPath),
    /// `!e`
    Not(Box<Expr>, Span),
    /// `a op b`
    Binary {
        /// The operator.
        op: BinaryOp,
        /// Left operand.
        left: Box<Expr>,
        /// Right operand.
        right: Box<Expr>,
        /// Where it is.
        span: Span,
    },
    /// `FUNC(args...)`
    Call {
        /// The function.
        func: Function,
        /// Its arguments (count checked by the parser).
        args: Vec<Expr>,
        /// Where it is.
        span: Span,
    },
}

impl Expr {
    /// Where it is.
    pub fn span(&self) -> Span {
        match self {
            Expr::Value(v) => v.span,
            Expr::Path(p) => p.span,
            Expr::Not(_, s) => *s,
            Expr::Binary { span, .. } | Expr::Call { span, .. } => *span,
        }
    }
}

/// A binary operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BinaryOp {
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
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
}

impl BinaryOp {
    /// The operator text.
    pub fn symbol(self) -> &'static str {
        match self {
            BinaryOp::Or => "||",
            BinaryOp::And => "&&",
            BinaryOp::Eq => "==",
            BinaryOp::Ne => "!=",
            BinaryOp::Lt => "<",
            BinaryOp::Le => "<=",
            BinaryOp::Gt => ">",
            BinaryOp::Ge => ">=",
        }
    }

    /// Binding strength: `||` 1, `&&` 2, comparisons 3.
    pub fn precedence(self) -> u8 {
        match self {
            BinaryOp::Or => 1,
            BinaryOp::And => 2,
            _ => 3,
        }
    }
}

/// A FILTER function.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Function {
    /// `IN(expr, [values])`
    In,
    /// `IS_NULL(expr)`
    IsNull,
    /// `IS_NOT_NULL(expr)`
    IsNotNull,
    /// `CONTAINS(str, sub)`
    Contains,
    /// `STARTS_WITH(str, prefix)`
    StartsWith,
    /// `ENDS_WITH(str, suffix)`
    EndsWith,
    /// `REGEX(str, pattern)`
    Regex,
}

impl Function {
    /// Every function.
    pub const ALL: [Function; 7] = [
        Function::In,
        Function::IsNull,
        Function::IsNotNull,
        Function::Contains,
        Function::StartsWith,
        Function::EndsWith,
        Function::Regex,
    ];

    /// The keyword.
    pub fn keyword(self) -> &'static str {
        match self {
            Function::In => "IN",
            Function::IsNull => "IS_NULL",
            Function::IsNotNull => "IS_NOT_NULL",
            Function::Contains => "CONTAINS",
            Function::StartsWith => "STARTS_WITH",
            Function::EndsWith => "ENDS_WITH",
            Function::Regex => "REGEX",
        }
    }

    /// Number of arguments.
    pub fn arity(self) -> usize {
        match self {
            Function::IsNull | Function::IsNotNull => 1,
            _ => 2,
        }
    }

    /// The function for a keyword.
    pub fn from_keyword(s: &str) -> Option<Function> {
        Function::ALL.into_iter().find(|f| f.keyword() == s)
    }
}

// ---------------------------------------------------------------------------------------
// KML
// ---------------------------------------------------------------------------------------

/// `UPSERT { blocks } [WITH METADATA {...}]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Upsert {
    /// The blocks, in execution order.
    pub blocks: Vec<UpsertBlock>,
    /// Statement-level metadata (the default for every element).
    pub metadata: Option<ObjectExpr>,
    /// Where it is.
    pub span: Span,
}

/// A `CONCEPT` or `PROPOSITION` block.
#[derive(Debug, Clone, PartialEq)]
pub enum UpsertBlock {
    /// `CONCEPT ?h { ... } [WITH METADATA {...}]`
    Concept(ConceptBlock),
    /// `PROPOSITION ?h { ... } [WITH METADATA {...}]`
    Proposition(PropositionBlock),
}

/// `CONCEPT ?handle { identity  [SET ATTRIBUTES {...}]  [SET PROPOSITIONS {...}] }`.
#[derive(Debug, Clone, PartialEq)]
pub struct ConceptBlock {
    /// The local handle (optional).
    pub handle: Option<Variable>,
    /// `{type, name}` (match-or-create) or `{id}` (match-only).
    pub identity: ConceptMatcher,
    /// `EXPECT VERSION n` (RC9+): the block runs only if the concept's `_version` is
    /// `n`; `0` means it must not exist yet.
    pub expect_version: Option<Slot<u64>>,
    /// `SET ATTRIBUTES`.
    pub set_attributes: Option<ObjectExpr>,
    /// `SET PROPOSITIONS` entries (`None` when the clause is absent).
    pub set_propositions: Option<Vec<SetProposition>>,
    /// Block-level `WITH METADATA`.
    pub metadata: Option<ObjectExpr>,
    /// Where it is.
    pub span: Span,
}

/// One entry of `SET PROPOSITIONS`: `("pred", target) [WITH METADATA {...}]`.
#[derive(Debug, Clone, PartialEq)]
pub struct SetProposition {
    /// The predicate.
    pub predicate: StrSlot,
    /// The object.
    pub target: Endpoint,
    /// Per-entry metadata.
    pub metadata: Option<ObjectExpr>,
    /// Where it is.
    pub span: Span,
}

/// `PROPOSITION ?handle { (s, "p", o) | (id: ...)  [SET ATTRIBUTES {...}] }`.
#[derive(Debug, Clone, PartialEq)]
pub struct PropositionBlock {
    /// The local handle (optional).
    pub handle: Option<Variable>,
    /// The identity: a triple (match-or-create) or an id (match-only). Its `var` is `None`.
    pub identity: PropositionPattern,
    /// `EXPECT VERSION n` (RC9+), as for concept blocks.
    pub expect_version: Option<Slot<u64>>,
    /// `SET ATTRIBUTES`.
    pub set_attributes: Option<ObjectExpr>,
    /// Block-level `WITH METADATA`.
    pub metadata: Option<ObjectExpr>,
    /// Where it is.
    pub span: Span,
}

/// A `DELETE` statement.
#[derive(Debug, Clone, PartialEq)]
pub struct Delete {
    /// What is deleted.
    pub target: DeleteTarget,
    /// The `WHERE` body that binds the target variable.
    pub where_clauses: Vec<WhereClause>,
    /// Where it is.
    pub span: Span,
}

/// The four forms of `DELETE`.
#[derive(Debug, Clone, PartialEq)]
pub enum DeleteTarget {
    /// `DELETE ATTRIBUTES {"k", ...} FROM ?var`
    Attributes {
        /// Keys to remove.
        keys: Vec<StrSlot>,
        /// The target variable.
        var: Variable,
    },
    /// `DELETE METADATA {"k", ...} FROM ?var`
    Metadata {
        /// Keys to remove.
        keys: Vec<StrSlot>,
        /// The target variable.
        var: Variable,
    },
    /// `DELETE PROPOSITIONS ?link`
    Propositions {
        /// The target variable.
        var: Variable,
    },
    /// `DELETE CONCEPT ?node DETACH`
    Concept {
        /// The target variable.
        var: Variable,
    },
}

impl DeleteTarget {
    /// The target variable.
    pub fn var(&self) -> &Variable {
        match self {
            DeleteTarget::Attributes { var, .. }
            | DeleteTarget::Metadata { var, .. }
            | DeleteTarget::Propositions { var }
            | DeleteTarget::Concept { var } => var,
        }
    }
}

/// `UPDATE ?target SET ATTRIBUTES {...} SET METADATA {...} WHERE {...} [LIMIT n]` (RC9+):
/// pattern-matched bulk mutation of existing elements; never creates.
#[derive(Debug, Clone, PartialEq)]
pub struct Update {
    /// The variable whose elements are updated.
    pub target: Variable,
    /// `SET ATTRIBUTES` (at least one of the two is present).
    pub set_attributes: Option<UpdateObject>,
    /// `SET METADATA`.
    pub set_metadata: Option<UpdateObject>,
    /// The `WHERE` body that binds the target.
    pub where_clauses: Vec<WhereClause>,
    /// `LIMIT`: at most this many elements are updated.
    pub limit: Option<Slot<u64>>,
    /// Where it is.
    pub span: Span,
}

/// The object of an `UPDATE`'s `SET ATTRIBUTES` / `SET METADATA`.
#[derive(Debug, Clone, PartialEq)]
pub struct UpdateObject {
    /// Entries in written order.
    pub entries: Vec<(String, UpdateValue)>,
    /// Where it is, braces included.
    pub span: Span,
}

/// A value position of `UPDATE`: a JSON value or an update expression.
#[derive(Debug, Clone, PartialEq)]
pub enum UpdateValue {
    /// A JSON value (literal or placeholder). As an operand, a number or a placeholder.
    Value(ValueExpr),
    /// `?target.attributes.key` / `?target.metadata.key`: only as an operand.
    Path(DotPath),
    /// `ADD(a, b)`, `MUL(a, b)`, `CLAMP(x, lo, hi)`, `COALESCE(x, default)`.
    Call {
        /// The function.
        func: UpdateFunc,
        /// Its operands (two, or three for `CLAMP`).
        args: Vec<UpdateValue>,
        /// Where it is.
        span: Span,
    },
}

/// The update-expression functions of RC11 §4.3.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UpdateFunc {
    /// `ADD(a, b)`: a + b.
    Add,
    /// `MUL(a, b)`: a × b.
    Mul,
    /// `CLAMP(x, lo, hi)`.
    Clamp,
    /// `COALESCE(x, default)`.
    Coalesce,
}

impl UpdateFunc {
    /// The function's name as written.
    pub fn as_str(self) -> &'static str {
        match self {
            UpdateFunc::Add => "ADD",
            UpdateFunc::Mul => "MUL",
            UpdateFunc::Clamp => "CLAMP",
            UpdateFunc::Coalesce => "COALESCE",
        }
    }

    /// Parses a name (case-sensitive, as written in the spec).
    pub fn parse(s: &str) -> Option<UpdateFunc> {
        [
            UpdateFunc::Add,
            UpdateFunc::Mul,
            UpdateFunc::Clamp,
            UpdateFunc::Coalesce,
        ]
        .into_iter()
        .find(|f| f.as_str() == s)
    }

    /// How many operands it takes.
    pub fn arity(self) -> usize {
        match self {
            UpdateFunc::Clamp => 3,
            _ => 2,
        }
    }
}

/// `MERGE CONCEPT ?source INTO ?target WHERE {...}` (RC9+).
#[derive(Debug, Clone, PartialEq)]
pub struct Merge {
    /// The duplicate, deleted by the merge.
    pub source: Variable,
    /// The survivor.
    pub target: Variable,
    /// The `WHERE` body binding both.
    pub where_clauses: Vec<WhereClause>,
    /// Where it is.
    pub span: Span,
}

// ---------------------------------------------------------------------------------------
// META
// ---------------------------------------------------------------------------------------

/// `EXPORT ?target WHERE {...} [LIMIT n] [CURSOR "t"]` (RC9+): the matched elements as
/// an UPSERT capsule.
#[derive(Debug, Clone, PartialEq)]
pub struct Export {
    /// The variable whose elements are exported.
    pub target: Variable,
    /// The `WHERE` body.
    pub where_clauses: Vec<WhereClause>,
    /// `LIMIT`.
    pub limit: Option<Slot<u64>>,
    /// `CURSOR`.
    pub cursor: Option<StrSlot>,
    /// Where it is.
    pub span: Span,
}

/// A `DESCRIBE` command.
#[derive(Debug, Clone, PartialEq)]
pub struct Describe {
    /// What is described.
    pub target: DescribeTarget,
    /// Where it is.
    pub span: Span,
}

/// The six `DESCRIBE` forms.
#[derive(Debug, Clone, PartialEq)]
pub enum DescribeTarget {
    /// `DESCRIBE PRIMER`
    Primer,
    /// `DESCRIBE DOMAINS`
    Domains,
    /// `DESCRIBE CONCEPT TYPES [LIMIT n] [CURSOR "t"]`
    ConceptTypes {
        /// `LIMIT`
        limit: Option<Slot<u64>>,
        /// `CURSOR`
        cursor: Option<StrSlot>,
    },
    /// `DESCRIBE CONCEPT TYPE "Name"`
    ConceptType(StrSlot),
    /// `DESCRIBE PROPOSITION TYPES [LIMIT n] [CURSOR "t"]`
    PropositionTypes {
        /// `LIMIT`
        limit: Option<Slot<u64>>,
        /// `CURSOR`
        cursor: Option<StrSlot>,
    },
    /// `DESCRIBE PROPOSITION TYPE "pred"`
    PropositionType(StrSlot),
}

/// What `SEARCH` looks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SearchTarget {
    /// `SEARCH CONCEPT`
    Concept,
    /// `SEARCH PROPOSITION`
    Proposition,
}

/// The retrieval modes of `SEARCH ... MODE` (RC11 §5.2.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SearchMode {
    /// Lexical matching.
    Keyword,
    /// Meaning-based matching (embeddings owned by the engine).
    Semantic,
    /// Lexical and semantic results fused.
    Hybrid,
}

impl SearchMode {
    /// Every mode, in the order the spec lists them.
    pub const ALL: [SearchMode; 3] = [
        SearchMode::Keyword,
        SearchMode::Semantic,
        SearchMode::Hybrid,
    ];

    /// The mode's name as written in a command (`"keyword"`).
    pub fn as_str(self) -> &'static str {
        match self {
            SearchMode::Keyword => "keyword",
            SearchMode::Semantic => "semantic",
            SearchMode::Hybrid => "hybrid",
        }
    }

    /// Parses a mode name (exact, lowercase, as the spec writes them).
    pub fn parse(s: &str) -> Option<SearchMode> {
        SearchMode::ALL.into_iter().find(|m| m.as_str() == s)
    }
}

/// `SEARCH CONCEPT|PROPOSITION "term" [WITH TYPE "T"] [MODE "m"] [THRESHOLD x] [LIMIT n]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Search {
    /// Concepts or propositions.
    pub target: SearchTarget,
    /// The search text.
    pub term: StrSlot,
    /// `WITH TYPE`: a concept type, or a predicate for propositions.
    pub with_type: Option<StrSlot>,
    /// `MODE` (RC11).
    pub mode: Option<Slot<SearchMode>>,
    /// `THRESHOLD`: hits scoring below it are dropped (RC11), in `[0, 1]`.
    pub threshold: Option<Slot<f64>>,
    /// `LIMIT`
    pub limit: Option<Slot<u64>>,
    /// Where it is.
    pub span: Span,
}
