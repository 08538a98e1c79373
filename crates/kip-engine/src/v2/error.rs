//! The KIP 2.0 error registry (Specification §86-87): stable codes, their categories and
//! retry classes, and the error object of the response envelope.
//!
//! The 1.x engine's [`KipError`] (with its `KIP_xxxx` code) becomes a 2.0 [`V2Error`]
//! once, here ([`V2Error::from_kip`]); 2.0 runtime rules raise [`V2Error`]s directly.

#[cfg(test)]
use kip_lang::ErrorCode;
use kip_lang::KipError;
use serde_json::{json, Map, Value};

macro_rules! registry {
    ($( $category:literal => [ $( $code:ident ),* $(,)? ] ),* $(,)?) => {
        /// A code of the KIP 2.0 core error registry (§87).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum Code {
            $( $( #[doc = concat!("`", stringify!($code), "` (", $category, ")")] $code, )* )*
        }

        impl Code {
            /// Every code, in the order of the registry.
            pub const ALL: &'static [Code] = &[ $( $( Code::$code, )* )* ];

            /// The registry name (`"SchemaSymbolNotFound"`).
            pub fn name(self) -> &'static str {
                match self { $( $( Code::$code => stringify!($code), )* )* }
            }

            /// The code with this registry name.
            pub fn from_name(name: &str) -> Option<Code> {
                match name { $( $( stringify!($code) => Some(Code::$code), )* )* _ => None }
            }

            /// The §86.2 category of the registry section the code is listed in.
            pub fn category(self) -> &'static str {
                match self { $( $( Code::$code => $category, )* )* }
            }
        }
    };
}

registry! {
    "syntax" => [InvalidSyntax, InvalidIdentifier],
    "protocol" => [
        InvalidRequestEnvelope, UnsupportedProtocolVersion, UnsupportedCapability,
        UnsupportedIsolation, LanguageMismatch, ReadonlyViolation, DuplicateLocalHandle,
        DuplicateMutationTarget,
    ],
    "schema" => [
        SchemaSymbolNotFound, SchemaSymbolAmbiguous, SchemaFieldNotFound,
        SchemaPackageUnavailable, SchemaEnvironmentChanged, HistoricalSchemaUnavailable,
        TypeMismatch, ConstraintViolation,
    ],
    "data" => [
        NotFoundOrNotVisible, ReferenceError, StructuralReferenceInvalid,
        IdentitySelectorRequired, NameIdentityForbidden, IdentityConflict, ClientKeyConflict,
        IdentityMergeConflict,
    ],
    "epistemic" => [
        ImmutableField, EpistemicRevisionRequired, EvidenceCorrectionRequired,
        InvalidLifecycleTransition, RetractionNotAuthorized, SupersessionMismatch,
        EvidenceCorrectionConflict, ActivityTerminal, ProjectionTargetUnbound,
        ProjectionTargetUnbounded, ProjectionNotAuthorized, ProjectionPolicyUnavailable,
    ],
    "governance" => [
        Unauthenticated, NotAuthorized, RequiresApproval, RequiresStrongerAuthentication,
        ActorBindingRequired, ProtectedSystemField, ProtectedGovernanceField,
        ProtectedSchemaState, LegalHoldConflict, PurgeDenied,
    ],
    "transaction" => [
        VersionConflict, PreconditionFailed, SerializationConflict, IdempotencyConflict,
        TransactionUnknown, OutcomeUnknown, TransactionTooLarge,
    ],
    "history" => [
        HistoricalSnapshotUnavailable, CursorMismatch, CursorTypeMismatch, CursorExpired,
        CursorInvalidated, ChangeCursorExpired, ChangeCursorInvalid,
    ],
    "search" => [SearchModeUnsupported, SearchIndexUnavailable, HistoricalSearchUnavailable],
    "artifact" => [
        ArtifactUnavailable, ArtifactTooLarge, ArtifactParseError, DigestMismatch,
        ProofInvalid, SignerUnknown, BlobUnavailable, CapsuleValidationFailed,
        ImportPreviewConflict,
    ],
    "resource" => [ResourceExhausted, ResultLimitExceeded, ExecutionTimeout, RateLimited],
    "system" => [InternalError],
}

impl Code {
    /// The registry section the code is listed in (`"87.6"`).
    pub fn section(self) -> &'static str {
        match self.category() {
            "syntax" | "protocol" => "87.1",
            "schema" => "87.2",
            "data" => "87.3",
            "epistemic" => "87.4",
            "governance" => "87.5",
            "transaction" => "87.6",
            "history" => "87.7",
            "search" => "87.8",
            "artifact" => "87.9",
            _ => "87.10",
        }
    }

    /// The §86.3 retry class a client should apply when nothing more specific is known.
    pub fn retry_class(self) -> &'static str {
        use Code::*;
        match self {
            VersionConflict | PreconditionFailed | SchemaEnvironmentChanged | CursorInvalidated => {
                "requires_refresh"
            }
            SerializationConflict | ExecutionTimeout | RateLimited => "safe_same_request",
            OutcomeUnknown => "outcome_lookup_required",
            HistoricalSnapshotUnavailable | CursorExpired | ChangeCursorExpired => {
                "requires_new_snapshot"
            }
            ArtifactUnavailable | BlobUnavailable => "requires_reacquire_artifact",
            TransactionUnknown | InternalError => "non_retryable",
            _ if self.category() == "governance" => "requires_authority",
            _ => "requires_different_input",
        }
    }
}

/// A KIP 2.0 error (§86.1): code, message, hint, retry class and details.
#[derive(Debug, Clone, PartialEq)]
pub struct V2Error {
    /// The registry code.
    pub code: Code,
    /// What went wrong, for the agent.
    pub message: String,
    /// What to do instead.
    pub hint: Option<String>,
    /// Structured details (`line` / `column` for errors tied to the text, `parameter`, ...).
    pub details: Map<String, Value>,
}

impl V2Error {
    /// An error with a message.
    pub fn new(code: Code, message: impl Into<String>) -> V2Error {
        V2Error {
            code,
            message: message.into(),
            hint: None,
            details: Map::new(),
        }
    }

    /// With a hint.
    pub fn with_hint(mut self, hint: impl Into<String>) -> V2Error {
        self.hint = Some(hint.into());
        self
    }

    /// With one detail.
    pub fn with_detail(mut self, key: &str, value: impl Into<Value>) -> V2Error {
        self.details.insert(key.into(), value.into());
        self
    }

    /// The error object of the response envelope (`Error` of `kip-response.schema.json`).
    pub fn to_json(&self) -> Value {
        let mut o = Map::new();
        o.insert("code".into(), json!(self.code.name()));
        o.insert("category".into(), json!(self.code.category()));
        o.insert("message".into(), json!(self.message));
        if let Some(h) = &self.hint {
            o.insert("hint".into(), json!(h));
        }
        o.insert("retry".into(), json!({"class": self.code.retry_class()}));
        if !self.details.is_empty() {
            o.insert("details".into(), Value::Object(self.details.clone()));
        }
        Value::Object(o)
    }

    /// The 2.0 form of an error raised by the language layer or the 1.x engine: the
    /// registry code its `KIP_xxxx` code maps to (Migration §32), the same message and
    /// hint, and where it is in the text.
    pub fn from_kip(e: &KipError) -> V2Error {
        // The mapping lives once, in kip-lang (`ErrorCode::v2_name`).
        let code = Code::from_name(e.code.v2_name()).unwrap_or(Code::InternalError);
        let mut out = V2Error::new(code, e.message.clone());
        out.hint = e.hint.clone();
        if let (Some(l), Some(c)) = (e.line, e.column) {
            out.details.insert("line".into(), json!(l));
            out.details.insert("column".into(), json!(c));
        }
        if let Some(f) = &e.found {
            out.details.insert("found".into(), json!(f));
        }
        if let Some(x) = &e.expected {
            out.details.insert("expected".into(), json!(x));
        }
        out
    }
}

impl From<kip_storage::StoreError> for V2Error {
    /// A storage failure (the same precise message and hint as in 1.x).
    fn from(e: kip_storage::StoreError) -> V2Error {
        V2Error::from_kip(&KipError::from(e))
    }
}

impl From<KipError> for V2Error {
    fn from(e: KipError) -> V2Error {
        V2Error::from_kip(&e)
    }
}

/// The result of the 2.0 executors.
pub type V2Result<T> = Result<T, V2Error>;

impl std::fmt::Display for V2Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code.name(), self.message)
    }
}

impl std::error::Error for V2Error {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_registry_holds_every_code_of_section_87_once() {
        let spec = include_str!("../../../../spec/kip2/KIP-2.0-SPECIFICATION.md");
        let start = spec.find("# 87. Core Error Registry").expect("§87");
        let end = spec[start..].find("# 88.").expect("§88") + start;
        let mut listed = Vec::new();
        let mut in_block = false;
        for line in spec[start..end].lines() {
            if line.starts_with("```") {
                in_block = !in_block;
            } else if in_block && !line.trim().is_empty() {
                listed.push(line.trim().to_string());
            }
        }
        let ours: Vec<&str> = Code::ALL.iter().map(|c| c.name()).collect();
        assert_eq!(ours, listed);
    }

    #[test]
    fn every_1x_code_maps_to_a_registry_code_of_the_same_name_as_kip_lang_says() {
        for code in [
            ErrorCode::InvalidSyntax,
            ErrorCode::InvalidIdentifier,
            ErrorCode::TypeMismatch,
            ErrorCode::InvalidValueType,
            ErrorCode::ConstraintViolation,
            ErrorCode::ReferenceError,
            ErrorCode::NotFound,
            ErrorCode::DuplicateExists,
            ErrorCode::ImmutableTarget,
            ErrorCode::VersionConflict,
            ErrorCode::ExecutionTimeout,
            ErrorCode::ResourceExhausted,
            ErrorCode::InternalError,
        ] {
            let e = V2Error::from_kip(&KipError::new(code, "m"));
            assert_eq!(e.code.name(), code.v2_name());
        }
    }

    #[test]
    fn an_error_object_has_code_category_message_and_retry() {
        let e =
            V2Error::new(Code::ReadonlyViolation, "no writes here").with_hint("use execute_kip");
        assert_eq!(
            e.to_json(),
            json!({"code": "ReadonlyViolation", "category": "protocol", "message": "no writes here",
                   "hint": "use execute_kip", "retry": {"class": "requires_different_input"}})
        );
        assert_eq!(Code::NotAuthorized.retry_class(), "requires_authority");
        assert_eq!(Code::InternalError.category(), "system");
    }

    #[test]
    fn every_code_is_found_by_its_name_in_its_section() {
        for c in Code::ALL {
            assert_eq!(Code::from_name(c.name()), Some(*c));
        }
        assert_eq!(Code::from_name("KIP_3002"), None);
        assert_eq!(Code::PurgeDenied.section(), "87.5");
        assert_eq!(Code::RateLimited.section(), "87.10");
        assert_eq!(Code::InvalidSyntax.section(), "87.1");
    }
}
