//! The crate's layout rules, checked on its source: no import cycles between top-level modules or
//! between files; no scheduling calls, `libc` or system calls in the numerical modules (`solver`,
//! `sparse`, `loss`, `sample`, `ring`); only `ingest` reads request bodies; and `api` does not import
//! `sys`. A reference is a `crate::a::b` or `super::b` path outside `#[cfg(test)]` code (a module's
//! `tests` file is test code throughout); a file is a module (`a/b.rs` or `a/b/mod.rs` is `a::b`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The numerical modules: pure functions of their inputs, scheduled by their callers.
const PURE_MODULES: [&str; 5] = ["solver", "sparse", "loss", "sample", "ring"];

/// What a pure module must not contain.
const SCHEDULING_WORDS: [&str; 7] = [
    "libc::",
    "yield_now",
    "yield_point",
    "sched_",
    "std::thread",
    "tokio",
    "crate::sys",
];

/// What reads the bytes of a request body: the `http_body` frame API and its utilities, axum's
/// whole-body reader and the body timeout. Only `ingest` (its HTTP source) names them.
const BODY_READING_WORDS: [&str; 10] = [
    "poll_frame",
    "HttpBody",
    "http_body::",
    "http_body_util",
    "BodyExt",
    "into_data_stream",
    "into_data(",
    ".frame()",
    "to_bytes(",
    "TimeoutBody",
];

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `src/a/b.rs` and `src/a/b/mod.rs` → `["a", "b"]`; `src/lib.rs` → `[]`.
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file
        .strip_prefix(src)
        .expect("under src")
        .with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

/// The file's code before its first `#[cfg(test)]`, without `//` comments.
fn code(text: &str) -> String {
    let text = text.split("#[cfg(test)]").next().unwrap_or_default();
    text.lines()
        .map(|l| l.split("//").next().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every path a file names after `crate::` or `super::` (with a `use` group's members), resolved to
/// module paths.
fn references(module: &[String], code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    for (prefix, base) in [
        ("crate::", Vec::new()),
        (
            "super::",
            // `super` of `a/b.rs` is `a`; of `a/b/mod.rs` also `a` (its module is `a::b`).
            module[..module.len().saturating_sub(1)].to_vec(),
        ),
    ] {
        let mut at = 0;
        while let Some(found) = code[at..].find(prefix) {
            let start = at + found;
            at = start + prefix.len();
            if start > 0 && (bytes[start - 1].is_ascii_alphanumeric() || bytes[start - 1] == b'_') {
                continue;
            }
            let rest = &code[at..];
            let path_len = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
                .unwrap_or(rest.len());
            let path: Vec<String> = rest[..path_len]
                .split("::")
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect();
            let mut full = base.clone();
            full.extend(path.iter().cloned());
            if rest[path_len..].starts_with('{') {
                let group = &rest[path_len + 1..];
                let group = &group[..group.find('}').unwrap_or(group.len())];
                for item in group.split(',') {
                    let first = item.trim().split("::").next().unwrap_or_default();
                    if first.starts_with(|c: char| c.is_ascii_lowercase()) {
                        let mut member = full.clone();
                        member.push(first.to_string());
                        out.push(member);
                    }
                }
            }
            out.push(full);
        }
    }
    out
}

/// The modules that take part in a cycle of `edges` (Tarjan's strongly connected components).
fn cycles(edges: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) -> Vec<Vec<Vec<String>>> {
    struct State<'a> {
        edges: &'a BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        index: BTreeMap<&'a Vec<String>, usize>,
        low: BTreeMap<&'a Vec<String>, usize>,
        stack: Vec<&'a Vec<String>>,
        on_stack: BTreeSet<&'a Vec<String>>,
        found: Vec<Vec<Vec<String>>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a Vec<String>) {
        let i = s.index.len();
        s.index.insert(v, i);
        s.low.insert(v, i);
        s.stack.push(v);
        s.on_stack.insert(v);
        if let Some(targets) = s.edges.get(v) {
            for w in targets {
                let w = s.edges.get_key_value(w).map_or(w, |(k, _)| k);
                if !s.index.contains_key(w) {
                    visit(s, w);
                    let low = s.low[w].min(s.low[v]);
                    s.low.insert(v, low);
                } else if s.on_stack.contains(w) {
                    let low = s.index[w].min(s.low[v]);
                    s.low.insert(v, low);
                }
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.push(w.clone());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                s.found.push(component);
            }
        }
    }
    let mut s = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in edges.keys() {
        if !s.index.contains_key(v) {
            visit(&mut s, v);
        }
    }
    s.found
}

struct Crate {
    /// Module path → the file's code.
    files: BTreeMap<Vec<String>, (PathBuf, String)>,
}

impl Crate {
    fn read() -> Crate {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut paths = Vec::new();
        sources(&src, &mut paths);
        let files = paths
            .into_iter()
            .filter(|p| !module_of(&src, p).iter().any(|m| m == "tests"))
            .map(|p| {
                let text = std::fs::read_to_string(&p).expect("read source");
                let module = module_of(&src, &p);
                // A `tests` file is declared `#[cfg(test)] mod tests;`: all of it is test code.
                let code = match module.last().map(String::as_str) {
                    Some("tests") => String::new(),
                    _ => code(&text),
                };
                (module, (p, code))
            })
            .collect();
        Crate { files }
    }

    /// The longest module path that is a file, for a referenced path.
    fn resolve(&self, path: &[String]) -> Option<Vec<String>> {
        (1..=path.len())
            .rev()
            .map(|n| path[..n].to_vec())
            .find(|p| self.files.contains_key(p))
    }

    /// File → files it references, leaving out a module's references to its own submodules and back
    /// (a parent declares and re-exports its children; that is not a cycle of concerns).
    fn file_edges(&self) -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
        let mut edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
        for (module, (_, code)) in &self.files {
            for r in references(module, code) {
                let Some(target) = self.resolve(&r) else {
                    continue;
                };
                let nested = target.starts_with(module) || module.starts_with(&target);
                if !nested {
                    edges.entry(module.clone()).or_default().insert(target);
                }
            }
        }
        edges
    }
}

#[test]
fn no_import_cycles_between_top_level_modules_or_between_files() {
    let krate = Crate::read();
    let files = krate.file_edges();
    let mut modules: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    for (from, targets) in &files {
        for to in targets {
            if let (Some(a), Some(b)) = (from.first(), to.first()) {
                if a != b {
                    modules
                        .entry(vec![a.clone()])
                        .or_default()
                        .insert(vec![b.clone()]);
                }
            }
        }
    }
    assert!(
        modules.len() > 5,
        "the scan found too few module references to be trusted: {modules:?}"
    );
    assert_eq!(
        cycles(&modules),
        Vec::<Vec<Vec<String>>>::new(),
        "module cycles"
    );
    assert_eq!(
        cycles(&files),
        Vec::<Vec<Vec<String>>>::new(),
        "file cycles"
    );
}

#[test]
fn numerical_modules_make_no_scheduling_or_system_calls() {
    let krate = Crate::read();
    let mut offences = Vec::new();
    for (module, (path, code)) in &krate.files {
        if !module
            .first()
            .is_some_and(|m| PURE_MODULES.contains(&m.as_str()))
        {
            continue;
        }
        for word in SCHEDULING_WORDS {
            if code.contains(word) {
                offences.push(format!("{}: {word}", path.display()));
            }
        }
        if code.contains("unsafe") && code.contains("syscall") {
            offences.push(format!("{}: unsafe syscall", path.display()));
        }
    }
    assert!(offences.is_empty(), "{offences:#?}");
}

#[test]
fn only_ingest_reads_request_bodies() {
    let krate = Crate::read();
    let mut offences = Vec::new();
    for (module, (path, code)) in &krate.files {
        if module.first().is_some_and(|m| m == "ingest") {
            continue;
        }
        for word in BODY_READING_WORDS {
            if code.contains(word) {
                offences.push(format!("{}: {word}", path.display()));
            }
        }
    }
    assert!(
        offences.is_empty(),
        "request bodies are read in ingest::source::http only: {offences:#?}"
    );
}

#[test]
fn api_does_not_import_sys() {
    let krate = Crate::read();
    let mut offences = Vec::new();
    for (module, (path, code)) in &krate.files {
        if module.first().is_none_or(|m| m != "api") {
            continue;
        }
        let names_sys = references(module, code)
            .iter()
            .any(|r| r.first().is_some_and(|m| m == "sys"));
        if names_sys || code.contains("crate::sys") {
            offences.push(path.display().to_string());
        }
    }
    assert!(
        offences.is_empty(),
        "api holds routes and statuses; OS tuning is sys's, used by ingest: {offences:#?}"
    );
}

#[test]
fn the_cycle_finder_finds_a_cycle() {
    let m = |s: &str| vec![s.to_string()];
    let mut edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    edges.entry(m("a")).or_default().insert(m("b"));
    edges.entry(m("b")).or_default().insert(m("c"));
    edges.entry(m("c")).or_default().insert(m("a"));
    edges.entry(m("c")).or_default().insert(m("d"));
    let found = cycles(&edges);
    assert_eq!(found.len(), 1);
    let mut members = found[0].clone();
    members.sort();
    assert_eq!(members, vec![m("a"), m("b"), m("c")]);
    let refs = references(
        &["solver".into(), "sdiht".into()],
        "use crate::sparse::{masked_dot, Scratch};\nuse super::objective::x;",
    );
    assert!(refs.contains(&vec!["sparse".into(), "masked_dot".into()]));
    assert!(refs.contains(&vec!["solver".into(), "objective".into(), "x".into()]));
}
