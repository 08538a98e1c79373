//! The HNSW graphs on disk, so that a memory large enough for one does not rebuild it
//! at every open (hours at a few million vectors on two cores).
//!
//! A graph is derived data: the vectors themselves are in the store, and whatever is
//! wrong with a saved graph (missing, torn by a crash, another model, another format,
//! damaged bytes) only means it is rebuilt in the background, as if it had never been
//! saved. Layout, under the data directory (owner-only, like the rest of it):
//!
//! ```text
//! vectors.hnsw/concepts/   the concepts' graph        vectors.hnsw/links/   the propositions'
//!   manifest.json          format, model id, dimension, slot count, CRC-32 of each file
//!   slots.bin              per graph node (= slot): element key and a hash of its
//!                          quantized vector, 16 bytes little-endian
//!   graph.hnsw.graph       hnsw_rs's dump of the graph
//!   graph.hnsw.data        hnsw_rs's dump of the graph's rows
//! ```
//!
//! A save writes a fresh `<space>.tmp` directory (files synced, the manifest last),
//! then replaces `<space>` with it by a rename. On open every file's CRC is checked
//! before hnsw_rs reads it (its reader asserts on malformed input), and each slot is
//! taken only if the store still holds that element with the same quantized vector;
//! other slots are dead, and vectors the graph does not hold are added after them and
//! inserted by the background thread (searched exactly meanwhile). The restore runs on
//! the background thread too, after open (reading a large graph takes seconds): until
//! it is done the vectors are searched exactly, as without a save.
//!
//! When: after a graph is built, when a graph has grown by a tenth since it was saved
//! (checked by the background thread), and at shutdown under the same rule. The dump
//! uses hnsw_rs's native-endian format: the files are not portable across
//! architectures (a foreign file fails its checks and is rebuilt).

use super::index::{Ann, Cosine, Space, DEAD};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Directory of the saved graphs, under the data directory.
pub const DIR: &str = "vectors.hnsw";
/// Version of this layout.
const FORMAT: u64 = 1;
const BASENAME: &str = "graph";
const MANIFEST: &str = "manifest.json";
const SLOTS: &str = "slots.bin";

/// A saved graph's description ([`MANIFEST`]).
#[derive(Debug, Serialize, Deserialize)]
struct Manifest {
    format: u64,
    model: String,
    dim: usize,
    slots: usize,
    /// The dump's basename (hnsw_rs may pick another one than asked).
    basename: String,
    /// Each file of the save but the manifest, with its CRC-32.
    files: Vec<(String, u32)>,
}

fn space_name(links: bool) -> &'static str {
    if links {
        "links"
    } else {
        "concepts"
    }
}

/// The directory holding a space's saved graph.
pub fn space_dir(root: &Path, links: bool) -> PathBuf {
    root.join(DIR).join(space_name(links))
}

/// The hash a slot's quantized vector is saved with (FNV-1a over its bytes and scale).
fn row_hash(row: &[i8], scale: f32) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in row.iter().map(|&x| x as u8).chain(scale.to_le_bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

fn private_dir(p: &Path) -> std::io::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(p)
}

fn crc_of(p: &Path) -> std::io::Result<u32> {
    let mut f = std::fs::File::open(p)?;
    let mut h = crc32fast::Hasher::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = std::io::Read::read(&mut f, &mut buf)?;
        if n == 0 {
            return Ok(h.finalize());
        }
        h.update(buf.get(..n).unwrap_or_default());
    }
}

fn sync_dir(p: &Path) -> std::io::Result<()> {
    std::fs::File::open(p)?.sync_all()
}

fn other(e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(e.to_string())
}

/// Saves the graph of `space` (the caller holds its read lock, so slots and graph
/// agree) under `root`; returns the slots saved (0: no graph to save).
pub fn save(root: &Path, model: &str, links: bool, space: &Space) -> std::io::Result<usize> {
    let Some(ann) = &space.ann else {
        return Ok(0);
    };
    let covered = ann.covered().min(space.ids.len());
    if covered != hnsw_rs::prelude::Hnsw::get_nb_point(&ann.graph) {
        // Slots stored while a step was under way; the next save will do.
        return Ok(0);
    }
    let base = root.join(DIR);
    private_dir(&base)?;
    let fin = space_dir(root, links);
    let tmp = base.join(format!("{}.tmp", space_name(links)));
    match std::fs::remove_dir_all(&tmp) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    private_dir(&tmp)?;
    let basename = hnsw_rs::api::AnnT::file_dump(&ann.graph, &tmp, BASENAME).map_err(other)?;
    let mut slots = Vec::with_capacity(covered * 16);
    for s in 0..covered {
        let (key, hash) = match space.ids.get(s) {
            Some(&id) if id != DEAD => (id, row_hash(space.row(s), space.scales[s])),
            _ => (DEAD, 0),
        };
        slots.extend_from_slice(&key.to_le_bytes());
        slots.extend_from_slice(&hash.to_le_bytes());
    }
    std::fs::write(tmp.join(SLOTS), &slots)?;
    let mut files = Vec::new();
    for name in [
        format!("{basename}.hnsw.graph"),
        format!("{basename}.hnsw.data"),
        SLOTS.to_string(),
    ] {
        let p = tmp.join(&name);
        let f = std::fs::File::open(&p)?;
        f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
        f.sync_all()?;
        files.push((name, crc_of(&p)?));
    }
    let manifest = Manifest {
        format: FORMAT,
        model: model.to_string(),
        dim: space.dim,
        slots: covered,
        basename,
        files,
    };
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(tmp.join(MANIFEST))?;
    f.write_all(&serde_json::to_vec(&manifest).map_err(other)?)?;
    f.sync_all()?;
    sync_dir(&tmp)?;
    match std::fs::remove_dir_all(&fin) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    std::fs::rename(&tmp, &fin)?;
    sync_dir(&base)?;
    Ok(covered)
}

/// A saved graph read back: the graph and, per node (= slot), the element key and the
/// hash of its quantized vector at the save.
pub struct Loaded {
    graph: hnsw_rs::prelude::Hnsw<'static, i8, Cosine>,
    slots: Vec<(u64, u64)>,
}

/// Reads the saved graph of one space (`Ok(None)`: nothing saved; an error says why a
/// save is not used). Slow for a large graph: called by the background thread, outside
/// any lock.
pub fn load(root: &Path, model: &str, links: bool, dim: usize) -> Result<Option<Loaded>, String> {
    let dir = space_dir(root, links);
    let bytes = match std::fs::read(dir.join(MANIFEST)) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot read its manifest: {e}")),
    };
    let m: Manifest =
        serde_json::from_slice(&bytes).map_err(|e| format!("damaged manifest: {e}"))?;
    if m.format != FORMAT {
        return Err(format!("format {} (this build reads {FORMAT})", m.format));
    }
    if m.model != model || m.dim != dim {
        return Err(format!("made for model {} ({} dimensions)", m.model, m.dim));
    }
    for (name, crc) in &m.files {
        if name.contains('/') || name.starts_with('.') {
            return Err(format!("unexpected file name {name:?}"));
        }
        let got = crc_of(&dir.join(name)).map_err(|e| format!("cannot read {name}: {e}"))?;
        if got != *crc {
            return Err(format!("{name} is damaged (CRC mismatch)"));
        }
    }
    let want = [
        format!("{}.hnsw.graph", m.basename),
        format!("{}.hnsw.data", m.basename),
        SLOTS.to_string(),
    ];
    if want.iter().any(|w| !m.files.iter().any(|(n, _)| n == w)) {
        return Err("incomplete save".into());
    }
    let raw = std::fs::read(dir.join(SLOTS)).map_err(|e| format!("cannot read slots: {e}"))?;
    if raw.len() != m.slots.saturating_mul(16) {
        return Err("slot map of the wrong length".into());
    }
    let mut slots = Vec::with_capacity(m.slots);
    for pair in raw.chunks_exact(16) {
        let mut key = [0u8; 8];
        let mut hash = [0u8; 8];
        key.copy_from_slice(pair.get(..8).unwrap_or(&[0; 8]));
        hash.copy_from_slice(pair.get(8..).unwrap_or(&[0; 8]));
        slots.push((u64::from_le_bytes(key), u64::from_le_bytes(hash)));
    }
    // hnsw_rs's reader asserts on malformed input: the CRCs above make that a bug, and
    // a panic all the same is caught and the graph rebuilt. The reader borrows from its
    // `HnswIo` for as long as the graph lives, so that small struct is leaked (once per
    // space per open).
    let reader = Box::new(hnsw_rs::hnswio::HnswIo::new(&dir, &m.basename));
    let loaded: Result<hnsw_rs::prelude::Hnsw<'static, i8, Cosine>, String> =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
            let io: &'static mut hnsw_rs::hnswio::HnswIo = Box::leak(reader);
            io.load_hnsw::<i8, Cosine>().map_err(|e| e.to_string())
        }))
        .map_err(|_| "hnsw_rs could not read the graph".to_string())?;
    let graph = loaded.map_err(|e| format!("hnsw_rs could not read the graph: {e}"))?;
    if hnsw_rs::prelude::Hnsw::get_nb_point(&graph) != m.slots {
        return Err("the graph and its slot map disagree".into());
    }
    Ok(Some(Loaded { graph, slots }))
}

/// Gives `space` (which has no graph) the loaded graph: its slots are renumbered in the
/// graph's order, a node keeping its vector only if the space holds that element with
/// the same quantized vector (else the node is dead), and the space's other vectors
/// follow, to be inserted by the background thread. Returns the live nodes kept.
pub fn adopt(space: &mut Space, loaded: Loaded) -> usize {
    let old = std::mem::replace(
        space,
        Space {
            dim: space.dim,
            ann_min: space.ann_min,
            generation: space.generation + 1,
            ..Space::default()
        },
    );
    let mut taken = vec![false; old.ids.len()];
    let mut kept = 0usize;
    for &(key, hash) in &loaded.slots {
        let same = old.slot.get(&key).copied().filter(|&s| {
            // A key listed twice takes its vector once (a save never does that).
            !taken[s] && key != DEAD && row_hash(old.row(s), old.scales[s]) == hash
        });
        match same {
            Some(s) => {
                let tag = old.type_names[old.types[s] as usize].as_str();
                space.push_restored(key, tag, Some((old.row(s), old.scales[s])));
                taken[s] = true;
                kept += 1;
            }
            None => space.push_restored(DEAD, "", None),
        }
    }
    let covered = loaded.slots.len();
    for (s, &was) in taken.iter().enumerate() {
        let id = old.ids[s];
        if id != DEAD && !was {
            let tag = old.type_names[old.types[s] as usize].as_str();
            space.push_restored(id, tag, Some((old.row(s), old.scales[s])));
        }
    }
    space.ann = Some(Ann::new(loaded.graph, covered));
    space.saved = covered;
    space.compact_if_sparse();
    kept
}
