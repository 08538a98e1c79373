//! Schema Packages installed in a memory (Specification §20, Schema Packages design,
//! DECISIONS.md item 41): the owner installs a package artifact and activates it; the
//! active ones join the built-in Core and Cognitive Memory Profile in the memory's
//! Schema Environment. Ordinary KML cannot do either (§20.10): this is reached through
//! the owner's interfaces (`kip schema install`, `Admin::install_schema_package`).
//!
//! The installed packages are one record of the store's `meta` table, written in the
//! install's transaction, so they travel with the memory on both backends.

use super::error::{Code, V2Error, V2Result};
use super::schema_env::{active, Environment, KINDS};
use crate::store::{GraphRead, GraphWrite};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};

/// The `meta` key of the installed packages.
pub const META_KEY: &str = "kip2.schema_packages";

/// The names Core reserves (§20.13): a package may not define or alias them.
const CORE_NAMES: &[&str] = &[
    "Concept",
    "Proposition",
    "Assertion",
    "Evidence",
    "Activity",
    "evidence",
    "source",
    "generated_by",
    "inputs",
    "outputs",
    "associated_actors",
];

/// One installed package.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Installed {
    /// `kip://...@version`.
    pub package_ref: String,
    /// Whether it is part of the Schema Environment.
    pub active: bool,
    /// When it was installed.
    pub installed_at: String,
    /// The artifact as installed (immutable, §20.11).
    pub artifact: Value,
}

/// The installed packages of the memory.
pub fn list(g: &dyn GraphRead) -> V2Result<Vec<Installed>> {
    match g.meta(META_KEY)? {
        None => Ok(Vec::new()),
        Some(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
            V2Error::new(
                Code::InternalError,
                format!("the installed schema packages do not read back: {e}"),
            )
        }),
    }
}

/// The environment of the packages installed and active in `g` (cached by the stored
/// bytes: one parse per change).
pub fn environment(g: &dyn GraphRead) -> V2Result<Arc<Environment>> {
    static CACHE: Mutex<Option<(Vec<u8>, Arc<Environment>)>> = Mutex::new(None);
    let bytes = g.meta(META_KEY)?.unwrap_or_default();
    let mut cache = CACHE.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((b, env)) = cache.as_ref() {
        if *b == bytes {
            return Ok(env.clone());
        }
    }
    let mut env = Environment::default();
    if !bytes.is_empty() {
        for p in list(g)? {
            if p.active {
                env.add(&p.artifact, &p.package_ref);
            }
        }
    }
    let env = Arc::new(env);
    *cache = Some((bytes, env.clone()));
    Ok(env)
}

fn invalid(message: impl Into<String>) -> V2Error {
    V2Error::new(Code::ConstraintViolation, message)
        .with_hint("a package artifact is {\"format\": \"KIP-Schema-Package\", \"manifest\": {\"package_id\": \"kip://...\", \"version\": \"1.0.0\"}, \"definitions\": {...}}")
}

/// The package reference of an artifact, after checking its shape.
pub(super) fn check(artifact: &Value) -> V2Result<String> {
    if artifact.get("format").and_then(Value::as_str) != Some("KIP-Schema-Package") {
        return Err(invalid(
            "not a schema package: \"format\" is not \"KIP-Schema-Package\"",
        ));
    }
    let id = artifact
        .pointer("/manifest/package_id")
        .and_then(Value::as_str)
        .filter(|s| s.starts_with("kip://") && !s.contains('@'))
        .ok_or_else(|| invalid("manifest.package_id is a kip:// URI without a version"))?;
    let version = artifact
        .pointer("/manifest/version")
        .and_then(Value::as_str)
        .filter(|v| {
            !v.is_empty()
                && v.chars()
                    .all(|c| c.is_ascii_alphanumeric() || ".-+".contains(c))
        })
        .ok_or_else(|| invalid("manifest.version is an exact version such as \"1.0.0\""))?;
    if id == "kip://core" {
        return Err(invalid(
            "kip://core is built in and cannot be installed or replaced (§20.13)",
        ));
    }
    let package_ref = format!("{id}@{version}");
    if package_ref == super::schema_env::PROFILE_REF {
        return Err(invalid(
            "the Cognitive Memory Profile 2.0.0 is built in and active already",
        ));
    }
    for kind in KINDS {
        if let Some(m) = artifact
            .pointer(&format!("/definitions/{}", kind.section()))
            .and_then(Value::as_object)
        {
            for local in m.keys() {
                if CORE_NAMES.contains(&local.as_str()) {
                    return Err(invalid(format!(
                        "\"{local}\" is a Core symbol; a package may not shadow it (§20.13)"
                    )));
                }
            }
        }
    }
    Ok(package_ref)
}

/// Installs `artifact` (and activates it when `activate`). Installing the same artifact
/// again is a no-op; another artifact under an installed reference is refused
/// (artifacts are immutable, §20.11). Returns the package's entry.
pub fn install(w: &mut dyn GraphWrite, artifact: &Value, activate: bool) -> V2Result<Value> {
    let package_ref = check(artifact)?;
    let mut all = list(w)?;
    match all.iter_mut().find(|p| p.package_ref == package_ref) {
        Some(p) if p.artifact != *artifact => {
            return Err(V2Error::new(
                Code::ConstraintViolation,
                format!(
                "{package_ref} is installed with other content; an artifact is immutable (§20.11)"
            ),
            )
            .with_hint("publish the change under a new version"))
        }
        Some(p) => p.active |= activate,
        None => all.push(Installed {
            package_ref: package_ref.clone(),
            active: activate,
            installed_at: crate::time::now_text(),
            artifact: artifact.clone(),
        }),
    }
    // A local name the package shares with an active one becomes ambiguous, which
    // resolution reports (§20.7); the exact symbols stay usable.
    save(w, &all)?;
    let on = all.iter().any(|p| p.package_ref == package_ref && p.active);
    Ok(json!({"package_ref": package_ref, "active": on}))
}

/// Activates or deactivates an installed package.
pub fn set_active(w: &mut dyn GraphWrite, package_ref: &str, on: bool) -> V2Result<()> {
    let mut all = list(w)?;
    let Some(p) = all.iter_mut().find(|p| p.package_ref == package_ref) else {
        return Err(V2Error::new(
            Code::SchemaPackageUnavailable,
            format!("{package_ref} is not installed"),
        )
        .with_hint("LIST SCHEMA PACKAGES shows what is installed"));
    };
    p.active = on;
    save(w, &all)
}

fn save(w: &mut dyn GraphWrite, all: &[Installed]) -> V2Result<()> {
    let before = active_refs(&list(w)?);
    let bytes = serde_json::to_vec(all)
        .map_err(|e| V2Error::new(Code::InternalError, format!("packages: {e}")))?;
    if w.meta(META_KEY)?.unwrap_or_default() == bytes {
        // Nothing changed (a re-install, an activation of an active package): no
        // transaction of the space (§32.8).
        return Ok(());
    }
    w.set_meta(META_KEY, &bytes)?;
    // A change of the Schema Environment is a transaction of the space (it may write
    // nothing else), and which packages were active from which seq is kept, so
    // `DESCRIBE SCHEMA ENVIRONMENT AS OF` answers the environment then (KIP2-HIST-004).
    let after = active_refs(all);
    if let Some(seq) = kip_storage::history::touch(w)? {
        if before != after {
            let mut versions = versions(w)?;
            if versions.is_empty() {
                versions.push(EnvVersion {
                    from: 0,
                    active: before,
                });
            }
            match versions.last_mut() {
                Some(last) if last.from == seq => last.active = after,
                _ => versions.push(EnvVersion {
                    from: seq,
                    active: after,
                }),
            }
            let bytes = serde_json::to_vec(&versions)
                .map_err(|e| V2Error::new(Code::InternalError, format!("packages: {e}")))?;
            w.set_meta(VERSIONS_KEY, &bytes)?;
        }
    }
    Ok(())
}

/// `meta` key: which packages were active from which seq (changes since history began).
const VERSIONS_KEY: &str = "kip2.schema_packages.versions";

/// The packages active from seq `from` on (until the next entry).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct EnvVersion {
    from: u64,
    active: Vec<String>,
}

fn active_refs(all: &[Installed]) -> Vec<String> {
    all.iter()
        .filter(|p| p.active)
        .map(|p| p.package_ref.clone())
        .collect()
}

fn versions(g: &dyn GraphRead) -> V2Result<Vec<EnvVersion>> {
    match g.meta(VERSIONS_KEY)? {
        None => Ok(Vec::new()),
        Some(b) => serde_json::from_slice(&b).map_err(|e| {
            V2Error::new(
                Code::InternalError,
                format!("the schema environment versions do not read back: {e}"),
            )
        }),
    }
}

/// The Schema Environment's version (§35.4 `schema_environment_version`): the seq of
/// its last change since history began (0: unchanged since).
pub fn version(g: &dyn GraphRead) -> V2Result<u64> {
    Ok(versions(g)?.last().map_or(0, |v| v.from))
}

/// The environment of the packages that were active after commit `seq` (artifacts are
/// immutable and never removed, so today's copies are those of then).
fn environment_at(g: &dyn GraphRead, seq: u64) -> V2Result<Environment> {
    let all = list(g)?;
    let active: Vec<String> = match versions(g)?.iter().rev().find(|v| v.from <= seq) {
        Some(v) => v.active.clone(),
        None => active_refs(&all),
    };
    let mut env = Environment::default();
    for p in &all {
        if active.contains(&p.package_ref) {
            env.add(&p.artifact, &p.package_ref);
        }
    }
    Ok(env)
}

/// `LIST SCHEMA PACKAGES`: the built-in ones and the installed ones.
pub fn listing(g: &dyn GraphRead) -> V2Result<Value> {
    let mut out = vec![
        json!({"package_ref": super::schema_env::CORE_REF, "status": "active", "built_in": true}),
        json!({"package_ref": super::schema_env::PROFILE_REF, "status": "active", "built_in": true}),
    ];
    for p in list(g)? {
        out.push(json!({
            "package_ref": p.package_ref,
            "status": if p.active { "active" } else { "installed" },
            "installed_at": p.installed_at,
            "name": p.artifact.pointer("/manifest/name").cloned().unwrap_or(Value::Null),
        }));
    }
    Ok(Value::Array(out))
}

/// `DESCRIBE SCHEMA ENVIRONMENT`: the active packages and their local names.
pub fn describe(g: &dyn GraphRead) -> V2Result<Value> {
    let mut v = describe_env(&*environment(g)?)?;
    v["schema_environment_version"] = json!(version(g)?);
    Ok(v)
}

/// `DESCRIBE SCHEMA ENVIRONMENT AS OF ...`: the environment after commit `seq`.
pub fn describe_at(g: &dyn GraphRead, seq: u64) -> V2Result<Value> {
    let mut v = describe_env(&environment_at(g, seq)?)?;
    v["snapshot_seq"] = json!(seq);
    let at = versions(g)?
        .iter()
        .rev()
        .find(|e| e.from <= seq)
        .map_or(0, |e| e.from);
    v["schema_environment_version"] = json!(at);
    Ok(v)
}

fn describe_env(installed: &Environment) -> V2Result<Value> {
    let mut kinds = serde_json::Map::new();
    for kind in KINDS {
        let mut names: Vec<&str> = active().locals(kind);
        names.extend(installed.locals(kind));
        kinds.insert(kind.section().to_string(), json!(names));
    }
    let mut packages = vec![
        super::schema_env::CORE_REF.to_string(),
        super::schema_env::PROFILE_REF.to_string(),
    ];
    packages.extend(installed.package_refs().iter().cloned());
    Ok(json!({
        "space_id": super::request::DEFAULT_SPACE,
        "packages": packages,
        "legacy": {
            "package_ref": super::schema_env::LEGACY_REF,
            "note": "types and predicates the memory's KIP 1.x schema defines resolve here",
        },
        "symbols": kinds,
    }))
}
