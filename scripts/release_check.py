#!/usr/bin/env python3
"""Assembles and checks kip-nexus's release artifacts; scripts/release.sh drives it.

Every check here fails loudly (a message naming the file and what was expected, exit 1).
The facts come from one place each: the version and the repository from Cargo.toml's
[workspace.package], the package name from pyproject.toml; server.json, the README's
MCP Registry marker, the Dockerfile's label and the workflow must agree with them.

  assemble WHEEL_DIR OUT_DIR  every wheel in WHEEL_DIR checked (version, platform tag
                              against the architecture of its `kip` and `kip-nexus`,
                              stripped, glibc symbol versions within the manylinux tag,
                              the README marker) and copied with a tarball of its `kip`;
                              the sdist checked (every file the crates include is in it)
                              and copied; server.json validated and copied; SHA256SUMS
                              written and read back
  server-json [--kip KIP] [--schema REGISTRY_SCHEMA]
                              server.json against packaging/server-json.schema.json (and the
                              registry's own schema when given) and the
                              project's facts (with --kip: its package arguments run)
  dockerfile --kip KIP --python PY
                              hadolint is run by release.sh; here: the stages' wiring,
                              then the runtime stage's ENTRYPOINT+CMD run as the image
                              would run them (own network namespace, the image's uid,
                              its ENV, its port), answering MCP over HTTP with an API key,
                              401 without, and stopping on SIGTERM as PID 1
  sums DIR                    SHA256SUMS in DIR matches the files, and names all of them
  tag TAG                     TAG is v<version>; GITHUB_REPOSITORY (when set) is the
                              repository Cargo.toml names
  workflow                    .github/workflows/release.yml parses and uses what exists
  facts                       the facts as KEY=VALUE lines (the workflow's $GITHUB_OUTPUT)
"""

import gzip
import hashlib
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

try:
    import tomllib
except ImportError:  # Python < 3.11: release.sh installs tomli into its tools venv
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
# The project's own strict schema of the server.json it publishes (packaging/README.md);
# the release workflow passes the registry's own schema with --schema as well.
SCHEMA = ROOT / "packaging" / "server-json.schema.json"
WORKFLOW = ROOT / ".github" / "workflows" / "release.yml"

# The wheel's platform tag -> the Rust target triple the tarball is named after, and
# the architecture the binary inside must be built for.
PLATFORMS = [
    (re.compile(r"^(manylinux|musllinux)_\d+_\d+_x86_64$|^manylinux\d+_x86_64$"), "x86_64-unknown-linux-gnu", ("elf", 62)),
    (re.compile(r"^(manylinux|musllinux)_\d+_\d+_aarch64$|^manylinux\d+_aarch64$"), "aarch64-unknown-linux-gnu", ("elf", 183)),
    (re.compile(r"^macosx_\d+_\d+_x86_64$"), "x86_64-apple-darwin", ("macho", 0x01000007)),
    (re.compile(r"^macosx_\d+_\d+_arm64$"), "aarch64-apple-darwin", ("macho", 0x0100000C)),
]
# The oldest glibc a manylinux1/2010/2014 tag promises (PEP 600's aliases).
LEGACY_MANYLINUX = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}


class CheckFailed(Exception):
    pass


def fail(msg):
    raise CheckFailed(msg)


def say(msg):
    print(f"release-check: {msg}", file=sys.stderr)


def facts():
    """The project's release facts, each read from the one file that owns it."""
    cargo = tomllib.loads((ROOT / "Cargo.toml").read_text())
    pkg = cargo["workspace"]["package"]
    version = pkg["version"]
    repo_url = pkg.get("repository") or fail("Cargo.toml: [workspace.package] has no repository")
    m = re.fullmatch(r"https://github\.com/([A-Za-z0-9-]+)/([A-Za-z0-9._-]+)", repo_url)
    if not m:
        fail(f"Cargo.toml: repository {repo_url!r} is not https://github.com/OWNER/NAME (the MCP Registry name io.github.OWNER/NAME needs a GitHub home)")
    owner, name = m.groups()
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    project = pyproject["project"]
    urls = project.get("urls", {})
    if urls.get("Repository") != repo_url:
        fail(f"pyproject.toml: [project.urls] Repository is {urls.get('Repository')!r}, Cargo.toml names {repo_url!r}")
    if "version" not in project.get("dynamic", []):
        fail("pyproject.toml: the version must be dynamic (taken from Cargo.toml by maturin), not written twice")
    kip_cli = tomllib.loads((ROOT / "crates" / "kip-cli" / "Cargo.toml").read_text())["package"]
    if kip_cli.get("version") != {"workspace": True}:
        fail("crates/kip-cli/Cargo.toml: version must be version.workspace = true (one version for the release)")
    return {
        "version": version,
        "repo_url": repo_url,
        "server_name": f"io.github.{owner}/{name}",
        "image": f"ghcr.io/{owner.lower()}/{name.lower()}",
        "pypi_name": project["name"],
    }


# ---------------------------------------------------------------------------- binaries


def binary_kind(data):
    """("elf", e_machine) or ("macho", cputype) of an executable's bytes."""
    if data[:4] == b"\x7fELF":
        if data[4] != 2 or data[5] != 1:
            fail("not a 64-bit little-endian ELF file")
        return ("elf", int.from_bytes(data[18:20], "little"))
    if data[:4] == b"\xcf\xfa\xed\xfe":  # MH_MAGIC_64, little-endian
        return ("macho", int.from_bytes(data[4:8], "little"))
    fail(f"neither ELF nor 64-bit Mach-O (starts {data[:4].hex()})")


def elf_section_names(data):
    e_shoff = int.from_bytes(data[0x28:0x30], "little")
    e_shentsize = int.from_bytes(data[0x3A:0x3C], "little")
    e_shnum = int.from_bytes(data[0x3C:0x3E], "little")
    e_shstrndx = int.from_bytes(data[0x3E:0x40], "little")

    def section(i):
        off = e_shoff + i * e_shentsize
        name = int.from_bytes(data[off : off + 4], "little")
        offset = int.from_bytes(data[off + 0x18 : off + 0x20], "little")
        return name, offset

    _, strtab = section(e_shstrndx)
    names = []
    for i in range(e_shnum):
        name, _ = section(i)
        end = data.index(b"\0", strtab + name)
        names.append(data[strtab + name : end].decode())
    return names


def glibc_floor(path):
    """The newest GLIBC_x.y symbol version the ELF binary needs: the oldest glibc it runs on."""
    out = subprocess.run(["objdump", "-T", str(path)], check=True, capture_output=True, text=True).stdout
    versions = {tuple(int(x) for x in v.split(".")) for v in re.findall(r"GLIBC_(\d+(?:\.\d+)+)", out)}
    if not versions:
        fail(f"{path}: no GLIBC_ symbol versions (a static binary needs no manylinux tag)")
    return max(versions)


def manylinux_floor(platform):
    m = re.match(r"^manylinux_(\d+)_(\d+)_", platform)
    if m:
        return (int(m.group(1)), int(m.group(2)))
    for legacy, v in LEGACY_MANYLINUX.items():
        if platform.startswith(legacy + "_"):
            return v
    return None


def check_binary(data, platform, label):
    """The binary inside a wheel: built for the tag's architecture, stripped."""
    for pattern, triple, kind in PLATFORMS:
        if pattern.match(platform):
            break
    else:
        fail(f"{label}: platform tag {platform} is none the release builds (linux x86_64/aarch64 manylinux, macOS x86_64/arm64)")
    got = binary_kind(data)
    if got != kind:
        fail(f"{label}: the binary is {got[0]} machine {got[1]:#x}, the tag {platform} needs {kind[0]} machine {kind[1]:#x}")
    if kind[0] == "elf":
        leftovers = [n for n in elf_section_names(data) if n == ".symtab" or n.startswith(".debug")]
        if leftovers:
            fail(f"{label}: the binary is not stripped (sections {', '.join(leftovers)})")
    return triple


# ----------------------------------------------------------------------------- wheels


WHEEL_RE = re.compile(r"^(?P<dist>[A-Za-z0-9_]+)-(?P<version>[^-]+)-(?P<py>[^-]+)-(?P<abi>[^-]+)-(?P<plat>[^-]+)\.whl$")


def check_wheel(wheel, f):
    """Checks one wheel; returns (target triple, binary bytes, glibc floor or None)."""
    m = WHEEL_RE.match(wheel.name) or fail(f"{wheel.name}: not a wheel file name")
    if m["dist"] != f["pypi_name"].replace("-", "_"):
        fail(f"{wheel.name}: distribution {m['dist']}, pyproject.toml names {f['pypi_name']}")
    if m["version"] != f["version"]:
        fail(f"{wheel.name}: version {m['version']}, Cargo.toml says {f['version']}")
    if (m["py"], m["abi"]) != ("py3", "none"):
        fail(f"{wheel.name}: tags {m['py']}-{m['abi']}, a binary wheel is py3-none (any Python)")
    platforms = m["plat"].split(".")
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        data_dir = f"{m['dist']}-{m['version']}.data/scripts/"
        binaries = {}
        for name in ("kip", "kip-nexus"):  # kip-nexus: the launcher `uvx kip-nexus` runs
            path = data_dir + name
            if path not in names:
                fail(f"{wheel.name}: no {path}")
            mode = (z.getinfo(path).external_attr >> 16) & 0o777
            if mode & 0o111 == 0:
                fail(f"{wheel.name}: {path} is not executable in the archive (mode {mode:o})")
            binaries[name] = z.read(path)
        extra = sorted(n for n in names if n.startswith(data_dir) and n[len(data_dir) :] not in binaries)
        if extra:
            fail(f"{wheel.name}: unexpected files among the commands: {extra}")
        binary = binaries["kip"]
        metadata = z.read(f"{m['dist']}-{m['version']}.dist-info/METADATA").decode()
    if not re.search(rf"^Version: {re.escape(f['version'])}$", metadata, re.M):
        fail(f"{wheel.name}: METADATA does not say Version: {f['version']}")
    marker = f"mcp-name: {f['server_name']}"
    if marker not in metadata:
        fail(f"{wheel.name}: the PyPI description lacks {marker!r} (the MCP Registry checks it to accept the pypi package)")
    triples = {check_binary(b, p, f"{wheel.name} ({name})") for name, b in binaries.items() for p in platforms}
    if len(triples) != 1:
        fail(f"{wheel.name}: platform tags {platforms} name different targets")
    floor = None
    if triples == {"x86_64-unknown-linux-gnu"} or triples == {"aarch64-unknown-linux-gnu"}:
        with tempfile.NamedTemporaryFile() as tmp:
            tmp.write(binary)
            tmp.flush()
            floor = glibc_floor(tmp.name)
        for p in platforms:
            promise = manylinux_floor(p)
            if promise is None:
                fail(f"{wheel.name}: {p} is not a manylinux tag")
            if floor > promise:
                fail(f"{wheel.name}: the binary needs glibc {'.'.join(map(str, floor))}, the tag {p} promises {'.'.join(map(str, promise))}")
    return triples.pop(), binary, floor


def check_sdist(sdist, f):
    """The source distribution holds what a build from it reads: the manifests and every file a packaged crate's source includes (include_str!/include_bytes!,
    e.g. the spec/ texts the server ships), which cargo's own file list leaves out."""
    top = f"{f['pypi_name'].replace('-', '_')}-{f['version']}"
    if sdist.name != f"{top}.tar.gz":
        fail(f"{sdist.name}: not the sdist of {f['pypi_name']} {f['version']}")
    with tarfile.open(sdist) as t:
        names = set(t.getnames())
    missing = [p for p in ("pyproject.toml", "Cargo.toml", "Cargo.lock", "README.md") if f"{top}/{p}" not in names]
    crates = 0
    for rs in sorted(ROOT.glob("crates/*/src/**/*.rs")):
        rel = rs.relative_to(ROOT).as_posix()
        if f"{top}/{rel}" not in names:
            continue  # a crate the wheel does not build (fuzz targets, ...)
        crates += 1
        for m in re.finditer(r'include_(?:str|bytes)!\(\s*"([^"]+)"', rs.read_text()):
            target = os.path.normpath(os.path.join(os.path.dirname(rel), m[1]))
            if f"{top}/{target}" not in names:
                missing.append(f"{target} (included by {rel})")
    if missing:
        fail(f"{sdist.name}: a build from it would miss {', '.join(missing)} ([tool.maturin] include in pyproject.toml)")
    say(f"{sdist.name}: ok ({crates} source files, every file they include present)")


def source_date_epoch():
    env = os.environ.get("SOURCE_DATE_EPOCH")
    if env:
        return int(env)
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "log", "-1", "--format=%ct"], check=True, capture_output=True, text=True)
        return int(out.stdout.strip())
    except (subprocess.CalledProcessError, FileNotFoundError, ValueError):
        return 0


def write_tarball(path, top, binary, mtime):
    """kip plus the README, owned by root, dated like the commit: the same input makes the same bytes."""
    members = [("kip", binary, 0o755), ("README.md", (ROOT / "README.md").read_bytes(), 0o644)]
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data, mode in members:
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size, info.mode, info.mtime = len(data), mode, mtime
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            tar.addfile(info, io.BytesIO(data))
    with open(path, "wb") as out, gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=mtime) as gz:
        gz.write(raw.getvalue())


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def write_sums(out):
    files = sorted(p for p in out.iterdir() if p.is_file() and p.name != "SHA256SUMS")
    (out / "SHA256SUMS").write_text("".join(f"{sha256(p)}  {p.name}\n" for p in files))


def check_sums(out):
    sums = out / "SHA256SUMS"
    if not sums.is_file():
        fail(f"{sums}: missing")
    listed = {}
    for n, line in enumerate(sums.read_text().splitlines(), 1):
        m = re.fullmatch(r"([0-9a-f]{64})  (\S+)", line) or fail(f"{sums}:{n}: not 'SHA-256  NAME': {line!r}")
        listed[m[2]] = m[1]
    present = {p.name for p in out.iterdir() if p.is_file() and p.name != "SHA256SUMS"}
    if set(listed) != present:
        fail(f"{sums}: lists {sorted(listed)}, the directory holds {sorted(present)}")
    for name, digest in listed.items():
        if sha256(out / name) != digest:
            fail(f"{sums}: {name} does not match its checksum")
    say(f"SHA256SUMS matches all {len(listed)} artifacts")


def cmd_assemble(wheel_dir, out):
    f = facts()
    wheel_dir, out = Path(wheel_dir), Path(out)
    wheels = sorted(wheel_dir.glob("*.whl"))
    if not wheels:
        fail(f"{wheel_dir}: no wheels")
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    mtime = source_date_epoch()
    seen = {}
    for wheel in wheels:
        triple, binary, floor = check_wheel(wheel, f)
        if triple in seen:
            fail(f"two wheels for {triple}: {seen[triple]} and {wheel.name}")
        seen[triple] = wheel.name
        shutil.copy2(wheel, out / wheel.name)
        top = f"kip-{f['version']}-{triple}"
        write_tarball(out / f"{top}.tar.gz", top, binary, mtime)
        note = f", needs glibc >= {'.'.join(map(str, floor))}" if floor else ""
        say(f"{wheel.name}: ok ({triple}, stripped{note}) -> {top}.tar.gz")
    for sdist in sorted(wheel_dir.glob("*.tar.gz")):
        check_sdist(sdist, f)
        shutil.copy2(sdist, out / sdist.name)
    check_server_json(f)
    shutil.copy2(ROOT / "server.json", out / "server.json")
    write_sums(out)
    check_sums(out)


# ------------------------------------------------------------------------- server.json

VERSION_RANGE = re.compile(r"[\^~<>=*\s]|(^|\.)[xX](\.|$)|^latest$")


def check_server_json(f, kip=None, registry_schema=None):
    import jsonschema

    doc = json.loads((ROOT / "server.json").read_text())
    schemas = [(SCHEMA, json.loads(SCHEMA.read_text()))]
    if registry_schema is not None:
        # The registry's own schema (downloaded by the release workflow from the URL
        # server.json names): it must be that version's.
        official = json.loads(Path(registry_schema).read_text())
        if official.get("$id") != doc.get("$schema"):
            fail(f"{registry_schema}: $id is {official.get('$id')!r}, server.json names {doc.get('$schema')!r}")
        schemas.append((Path(registry_schema), official))
    for path, schema in schemas:
        validator = jsonschema.Draft7Validator(schema, format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER)
        errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path))
        if errors:
            fail(f"server.json does not validate against {path}:\n" + "\n".join(f"  /{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in errors))
    want = {
        "name": f["server_name"],
        "version": f["version"],
        "repository": {"url": f["repo_url"], "source": "github"},
    }
    for key, value in want.items():
        if doc.get(key) != value:
            fail(f"server.json: {key} is {doc.get(key)!r}, the project's facts say {value!r} (Cargo.toml [workspace.package])")
    if VERSION_RANGE.search(doc["version"]):
        fail(f"server.json: version {doc['version']!r} must be one version, not a range")
    by_type = {}
    for p in doc.get("packages", []):
        if p["registryType"] in by_type:
            fail(f"server.json: two {p['registryType']} packages")
        by_type[p["registryType"]] = p
    pypi = by_type.get("pypi") or fail("server.json: no pypi package")
    if (pypi["identifier"], pypi.get("version"), pypi.get("runtimeHint"), pypi["transport"]) != (f["pypi_name"], f["version"], "uvx", {"type": "stdio"}):
        fail(f"server.json: the pypi package must be {f['pypi_name']} {f['version']}, runtimeHint uvx, stdio transport: {pypi}")
    oci = by_type.get("oci")
    if oci is not None:
        if oci["identifier"] != f"{f['image']}:{f['version']}":
            fail(f"server.json: the oci package is {oci['identifier']!r}, the release workflow pushes {f['image']}:{f['version']}")
        if oci["transport"] != {"type": "stdio"} or oci.get("runtimeHint") != "docker":
            fail("server.json: the oci package runs with docker over stdio")
    readme = (ROOT / "README.md").read_text()
    if f"mcp-name: {f['server_name']}" not in readme:
        fail(f"README.md: no 'mcp-name: {f['server_name']}' (the MCP Registry looks for it in the PyPI description)")
    # The install section names the current release's downloads and image.
    for needle in (f"V={f['version']} ", f"{f['repo_url']}/releases/download/v$V/", f"{f['image']}:{f['version']}"):
        if needle not in readme:
            fail(f"README.md: the install section does not name {needle.strip()!r} (the version or repository moved?)")
    label = dockerfile_labels().get("io.modelcontextprotocol.server.name")
    if label != f["server_name"]:
        fail(f"Dockerfile: LABEL io.modelcontextprotocol.server.name is {label!r}, server.json names {f['server_name']}")
    if kip is not None:
        for p in doc["packages"]:
            args = [a["value"] for a in p.get("packageArguments", []) if a["type"] == "positional"]
            run_help(kip, args, f"server.json's {p['registryType']} package arguments")
    said = ", ".join(str(p.relative_to(ROOT)) if p.is_relative_to(ROOT) else str(p) for p, _ in schemas)
    say(f"server.json: valid against {said}; {f['server_name']} {f['version']}, packages {', '.join(sorted(by_type))}")


def run_help(kip, args, what):
    """The arguments parse (clap reads them all before acting on --help)."""
    r = subprocess.run([str(kip), *args, "--help"], capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        fail(f"{what} {args} are not accepted by kip: {r.stderr.strip()}")


# -------------------------------------------------------------------------- Dockerfile


def dockerfile_instructions():
    """(stage, INSTRUCTION, arguments) for every instruction, continuations joined."""
    lines, current = [], ""
    for raw in (ROOT / "Dockerfile").read_text().splitlines():
        stripped = raw.strip()
        if not current and (not stripped or stripped.startswith("#")):
            continue
        if stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            current += stripped[:-1] + " "
            continue
        lines.append(current + stripped)
        current = ""
    stages, out = [], []
    for line in lines:
        word, _, rest = line.partition(" ")
        word = word.upper()
        if word == "FROM":
            m = re.fullmatch(r"(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?", rest.strip(), re.I) or fail(f"Dockerfile: FROM {rest}")
            stages.append({"base": m[1], "name": m[2] or f"#{len(stages)}", "ins": []})
        elif not stages:
            if word != "ARG":
                fail(f"Dockerfile: {word} before the first FROM")
            continue
        stages[-1]["ins"].append((word, rest.strip()))
    return stages


def dockerfile_labels():
    labels = {}
    for stage in dockerfile_instructions():
        for word, rest in stage["ins"]:
            if word == "LABEL":
                for k, v in re.findall(r'(\S+?)="([^"]*)"', rest):
                    labels[k] = v
    return labels


def dockerfile_runtime():
    """The stages' wiring checked; the runtime stage's settings returned."""
    stages = {s["name"]: s for s in dockerfile_instructions()}
    order = list(stages)
    for name in ("build", "runtime", "release"):
        if name not in stages:
            fail(f"Dockerfile: no stage named {name} (stages: {order})")
    build = stages["build"]
    if not any(w == "RUN" and re.search(r"cargo build --release --locked -p kip-cli\b", r) for w, r in build["ins"]):
        fail("Dockerfile: the build stage does not run `cargo build --release --locked -p kip-cli` (the build the wheel and the binaries come from)")
    rt = stages["runtime"]
    conf = {"env": {}, "labels": dockerfile_labels()}
    for word, rest in rt["ins"]:
        if word in ("ENTRYPOINT", "CMD", "VOLUME"):
            try:
                value = json.loads(rest)
            except json.JSONDecodeError:
                fail(f"Dockerfile: {word} {rest} must be the JSON (exec) form, so kip is PID 1 and gets docker stop's SIGTERM")
            conf[word.lower()] = value
        elif word == "ENV":
            for k, v in re.findall(r"(\w+)=(\S+)", rest):
                conf["env"][k] = v
        elif word == "USER":
            m = re.fullmatch(r"(\d+):(\d+)", rest) or fail(f"Dockerfile: USER {rest} must be numeric uid:gid (a name may not resolve on the host, hadolint DL3066)")
            conf["uid"], conf["gid"] = int(m[1]), int(m[2])
        elif word == "EXPOSE":
            conf["expose"] = int(rest)
        elif word == "RUN":
            conf.setdefault("run", []).append(rest)
    for key in ("entrypoint", "cmd", "uid", "expose", "volume"):
        if key not in conf:
            fail(f"Dockerfile: the runtime stage has no {key.upper()}")
    if conf["entrypoint"] != ["kip"]:
        fail(f"Dockerfile: ENTRYPOINT is {conf['entrypoint']}, the image runs kip")
    if not any(f"--uid {conf['uid']}" in r for r in conf.get("run", [])):
        fail(f"Dockerfile: USER {conf['uid']} is not the uid the runtime stage creates")
    data = conf["env"].get("KIP_DATA")
    if data is None or conf["volume"] != [data]:
        fail(f"Dockerfile: ENV KIP_DATA ({data}) must be the VOLUME ({conf['volume']})")
    cmd = conf["cmd"]
    if "--http" not in cmd:
        fail(f"Dockerfile: CMD {cmd} does not serve HTTP")
    port = int(cmd[cmd.index("--http") + 1].rsplit(":", 1)[1])
    if port != conf["expose"]:
        fail(f"Dockerfile: CMD serves port {port}, EXPOSE says {conf['expose']}")
    conf["port"] = port
    release = stages["release"]
    if release["base"] != "runtime" or not any(w == "COPY" and re.fullmatch(r"--chmod=755 dist/docker/kip-\$\{TARGETARCH\} /usr/local/bin/kip", r) for w, r in release["ins"]):
        fail("Dockerfile: the release stage must be FROM runtime and COPY --chmod=755 dist/docker/kip-${TARGETARCH} /usr/local/bin/kip (what the workflow fills)")
    last = stages[order[-1]]
    if last["base"] != "runtime" or ("COPY", "--from=build /src/target/release/kip /usr/local/bin/kip") not in last["ins"]:
        fail("Dockerfile: the last (default) stage must be FROM runtime and copy /src/target/release/kip from the build stage")
    return conf


def wait_http(url, deadline):
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code
        except (urllib.error.URLError, ConnectionError, OSError):
            time.sleep(0.2)
    fail(f"nothing answered {url}")


def child_pid(pid):
    """The process `unshare --fork` started (PID 1 of the new PID namespace)."""
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        except OSError:
            kids = []
        if kids:
            return int(kids[0])
        time.sleep(0.05)
    fail("the container's first process did not start")


def cmd_dockerfile(kip, python):
    conf = dockerfile_runtime()
    if os.environ.get("KIP_RELEASE_IN_NETNS") != "1":
        say(f"Dockerfile: stages wired; runtime runs {conf['entrypoint'] + conf['cmd']} as {conf['uid']}:{conf['gid']}, KIP_DATA={conf['env']['KIP_DATA']}, port {conf['port']}")
        run_help(kip, conf["cmd"], "the Dockerfile's CMD")
        # Re-run this check in a network namespace of its own: only loopback, so the
        # image's 0.0.0.0:PORT binds nothing outside and cannot collide with a local server.
        base = ["unshare", "--net"] if os.geteuid() == 0 else ["unshare", "--user", "--map-root-user", "--net"]
        # Only root can become the image's uid; as another user the command runs as that user.
        env = dict(os.environ, KIP_RELEASE_IN_NETNS="1", KIP_RELEASE_AS_IMAGE_USER="1" if os.geteuid() == 0 else "0")
        r = subprocess.run([*base, sys.executable, __file__, "dockerfile", "--kip", str(kip), "--python", python], env=env)
        if r.returncode != 0:
            fail("the container run failed (above)")
        return
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    root = Path(tempfile.mkdtemp(prefix="kip-image-"))
    try:
        # The image's file system, as far as kip sees it: the binary at a path every user
        # can run, the volume owned by the image's user.
        bindir = root / "usr-local-bin"
        bindir.mkdir()
        shutil.copy2(kip, bindir / "kip")
        os.chmod(bindir / "kip", 0o755)
        os.chmod(root, 0o755)
        volume = root / "data"
        volume.mkdir()
        as_user = []
        if os.environ.get("KIP_RELEASE_AS_IMAGE_USER") == "1":
            os.chown(volume, conf["uid"], conf["gid"])
            as_user = ["setpriv", f"--reuid={conf['uid']}", f"--regid={conf['gid']}", "--clear-groups"]
        key = "release-check-" + os.urandom(8).hex()
        env = {k: v.replace(conf["env"]["KIP_DATA"], str(volume)) if k == "KIP_DATA" else v for k, v in conf["env"].items()}
        env.update(PATH=f"{bindir}:/usr/bin:/bin", HOME=str(volume), KIP_API_KEY=key)
        # `unshare --pid --fork`: kip is PID 1 of its namespace, as in a container, where
        # a signal without a handler is ignored; docker stop sends SIGTERM.
        log = open(root / "server.log", "w+")
        server = subprocess.Popen(["unshare", "--pid", "--fork", "--kill-child", *as_user, *conf["entrypoint"], *conf["cmd"]], env=env, cwd="/", stdout=log, stderr=subprocess.STDOUT)
        try:
            base = f"http://127.0.0.1:{conf['port']}"
            status = wait_http(base + "/health", time.time() + 30)
            if status != 401:
                fail(f"GET /health without the API key answered {status}, not 401")
            r = subprocess.run([python, str(ROOT / "tests" / "mcp" / "kip_client.py"), "http", base + "/mcp"], env=dict(os.environ, KIP_API_KEY=key), capture_output=True, text=True, timeout=120)
            if r.returncode != 0 or r.stdout.strip() != "ok":
                log.seek(0)
                fail(f"the MCP client over HTTP failed: {r.stdout}{r.stderr}\nthe server's log:\n{log.read()[-4000:]}")
            kip_pid = child_pid(server.pid)
            os.kill(kip_pid, signal.SIGTERM)
            try:
                code = server.wait(timeout=20)
            except subprocess.TimeoutExpired:
                fail("kip as PID 1 did not stop within 20 s of SIGTERM (docker stop would kill it)")
            if code != 0:
                fail(f"kip as PID 1 exited {code} on SIGTERM")
            written = [p for p in volume.rglob("*")]
            if not written:
                fail(f"the server wrote nothing into the volume (KIP_DATA={volume})")
            if as_user:
                foreign = [str(p) for p in written if p.lstat().st_uid != conf["uid"]]
                if foreign:
                    fail(f"files in the volume not owned by the image's uid {conf['uid']}: {foreign[:5]}")
        finally:
            if server.poll() is None:
                server.kill()
                server.wait()
            log.close()
        who = f"as uid {conf['uid']} (the memory in the volume is its own)" if as_user else "as this user (only root can take the image's uid)"
        say(f"the image's command ran {who} in its own network and PID namespaces: MCP over HTTP with the API key ok, 401 without, clean exit on SIGTERM")
    finally:
        shutil.rmtree(root, ignore_errors=True)


# ----------------------------------------------------------------------- tag, workflow


def cmd_tag(tag):
    f = facts()
    if tag != f"v{f['version']}":
        fail(f"tag {tag} is not v{f['version']} (Cargo.toml's version): bump the version or tag the right commit")
    repo = os.environ.get("GITHUB_REPOSITORY")
    if repo is not None and f"https://github.com/{repo}" != f["repo_url"]:
        fail(f"this workflow runs in {repo}, Cargo.toml names {f['repo_url']}: the registry name, image and PyPI links would point elsewhere (change [workspace.package] repository first)")
    say(f"tag {tag} is the version; repository {f['repo_url']}")


def cmd_workflow():
    import yaml

    wf = yaml.safe_load(WORKFLOW.read_text())
    on = wf.get(True, wf.get("on"))  # YAML 1.1 reads the key `on` as true
    tags = (on or {}).get("push", {}).get("tags")
    if tags != ["v*"]:
        fail(f"{WORKFLOW}: must run on pushed tags v*, not {tags}")
    jobs = wf["jobs"]
    for name, job in jobs.items():
        needs = job.get("needs", [])
        for need in [needs] if isinstance(needs, str) else needs:
            if need not in jobs:
                fail(f"{WORKFLOW}: job {name} needs {need}, which is not a job")
        for step in job.get("steps", []):
            for script in re.findall(r"scripts/[\w./-]+", step.get("run", "")):
                if not (ROOT / script).exists():
                    fail(f"{WORKFLOW}: job {name} runs {script}, which does not exist")
    say(f"{WORKFLOW.relative_to(ROOT)}: parses; {len(jobs)} jobs, their needs and scripts exist")


def main(argv):
    import argparse

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("assemble")
    a.add_argument("wheel_dir")
    a.add_argument("out_dir")
    s = sub.add_parser("server-json")
    s.add_argument("--kip")
    s.add_argument("--schema", help="the registry's own schema (downloaded from server.json's $schema URL) to validate against as well")
    d = sub.add_parser("dockerfile")
    d.add_argument("--kip", required=True)
    d.add_argument("--python", required=True)
    c = sub.add_parser("sums")
    c.add_argument("dir")
    t = sub.add_parser("tag")
    t.add_argument("tag")
    sub.add_parser("workflow")
    sub.add_parser("facts")
    args = ap.parse_args(argv)
    try:
        if args.cmd == "assemble":
            cmd_assemble(args.wheel_dir, args.out_dir)
        elif args.cmd == "server-json":
            check_server_json(facts(), args.kip, args.schema)
        elif args.cmd == "dockerfile":
            cmd_dockerfile(Path(args.kip).resolve(), args.python)
        elif args.cmd == "sums":
            check_sums(Path(args.dir))
        elif args.cmd == "tag":
            cmd_tag(args.tag)
        elif args.cmd == "workflow":
            cmd_workflow()
        elif args.cmd == "facts":
            for key, value in facts().items():
                print(f"{key}={value}")
            pin = re.search(r"^maturin==(\S+)$", (ROOT / "packaging" / "release-tools.txt").read_text(), re.M)
            print(f"maturin={pin[1]}")
    except CheckFailed as e:
        print(f"release-check: FAILED: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
