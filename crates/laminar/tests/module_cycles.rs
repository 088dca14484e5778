//! The shape of the house (issue 28): inside every crate, no import cycle between source files
//! of more than `CYCLE_FILES_MAX` files, and no source file over `FILE_LINES_MAX` lines before
//! its tests. A subsystem that imports the object that imports it cannot be read or tested
//! alone; a cycle that grows shows up here before review.
//!
//! Edges are the `crate::a::b` and `super::x` paths a file names (in `use` lines and inline,
//! before `#[cfg(test)]`), resolved to the longest module path that is a file, as
//! `../shared/tools/module-cycles.py` reads them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const CYCLE_FILES_MAX: usize = 4;
const FILE_LINES_MAX: usize = 1_000;

type Module = Vec<String>;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Every source file of a crate, by module path (`a/b.rs` and `a/b/mod.rs` are `a::b`).
fn modules(src: &Path) -> BTreeMap<Module, PathBuf> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files
        .into_iter()
        .map(|p| {
            let rel = p.strip_prefix(src).unwrap().with_extension("");
            let mut m: Module = rel.iter().map(|s| s.to_string_lossy().into_owned()).collect();
            if matches!(m.last().map(String::as_str), Some("mod" | "lib" | "main")) {
                m.pop();
            }
            (m, p)
        })
        .collect()
}

/// The longest prefix of `segs` that names a module file.
fn resolve(mods: &BTreeMap<Module, PathBuf>, segs: &[String]) -> Option<Module> {
    (0..=segs.len())
        .rev()
        .map(|n| segs[..n].to_vec())
        .find(|m| mods.contains_key(m))
}

/// `crate::a::b` and `super::a` paths in `text`, each as (`crate` or `super`, segments).
fn paths(text: &str) -> Vec<(&str, Vec<String>)> {
    let bytes = text.as_bytes();
    let ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut out = Vec::new();
    for kind in ["crate", "super"] {
        let mut from = 0;
        while let Some(i) = text[from..].find(kind) {
            let at = from + i;
            from = at + kind.len();
            if at > 0 && ident(bytes[at - 1]) {
                continue;
            }
            let mut segs = Vec::new();
            let mut j = from;
            while text[j..].starts_with("::") {
                let start = j + 2;
                let mut end = start;
                while end < bytes.len() && ident(bytes[end]) {
                    end += 1;
                }
                if end == start {
                    break;
                }
                segs.push(text[start..end].to_string());
                j = end;
            }
            if !segs.is_empty() {
                out.push((kind, segs));
            }
        }
    }
    out
}

/// `use crate::a::{b, c::d}` lines: the local names they bind, to full module paths.
fn aliases(text: &str) -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    for stmt in text.split(';') {
        let Some(rest) = stmt.trim_start().strip_prefix("use crate::") else {
            continue;
        };
        let (head, group) = match rest.split_once("::{") {
            Some((h, g)) => (h, Some(g.trim_end_matches('}'))),
            None => (rest, None),
        };
        let head: Vec<String> = head.split("::").map(|s| s.trim().to_string()).collect();
        let names: Vec<Vec<String>> = match group {
            Some(g) => g
                .split(',')
                .map(|n| {
                    let n = n.split(" as ").next().unwrap().trim();
                    n.split("::")
                        .filter(|s| !s.is_empty() && *s != "self")
                        .map(str::to_string)
                        .collect()
                })
                .collect(),
            None => vec![vec![]],
        };
        for n in names {
            let full: Vec<String> = head.iter().cloned().chain(n).filter(|s| !s.is_empty()).collect();
            if let Some(last) = full.last() {
                if last.chars().all(|c| c.is_alphanumeric() || c == '_') {
                    out.push((last.clone(), full));
                }
            }
        }
    }
    out
}

fn edges(mods: &BTreeMap<Module, PathBuf>) -> BTreeMap<Module, BTreeSet<Module>> {
    let mut edges: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for (m, p) in mods {
        let text = std::fs::read_to_string(p).unwrap();
        let text = text.split("#[cfg(test)]").next().unwrap();
        let mut add = |t: Option<Module>| {
            if let Some(t) = t.filter(|t| t != m) {
                edges.entry(m.clone()).or_default().insert(t);
            }
        };
        for (name, full) in aliases(text) {
            for (at, _) in text.match_indices(&format!("{name}::")) {
                let before = text[..at].chars().last();
                if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                    continue;
                }
                let rest: Vec<String> = text[at + name.len()..]
                    .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                    .next()
                    .unwrap()
                    .split("::")
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect();
                add(resolve(mods, &[full.clone(), rest].concat()));
            }
        }
        for (kind, segs) in paths(text) {
            let base: Module = if kind == "crate" {
                vec![]
            } else {
                m[..m.len().saturating_sub(1)].to_vec()
            };
            add(resolve(mods, &[base, segs].concat()));
        }
    }
    edges
}

/// The strongly connected sets of files (Tarjan), largest first.
fn cycles(nodes: &[Module], edges: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<Module>> {
    struct T<'a> {
        edges: &'a BTreeMap<Module, BTreeSet<Module>>,
        index: BTreeMap<Module, usize>,
        low: BTreeMap<Module, usize>,
        stack: Vec<Module>,
        on: BTreeSet<Module>,
        out: Vec<Vec<Module>>,
    }
    fn strong(t: &mut T, v: &Module) {
        let i = t.index.len();
        t.index.insert(v.clone(), i);
        t.low.insert(v.clone(), i);
        t.stack.push(v.clone());
        t.on.insert(v.clone());
        for w in t.edges.get(v).into_iter().flatten() {
            if !t.index.contains_key(w) {
                strong(t, w);
                let lw = t.low[w];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if t.on.contains(w) {
                let iw = t.index[w];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if t.low[v] == t.index[v] {
            let mut set = Vec::new();
            loop {
                let w = t.stack.pop().unwrap();
                t.on.remove(&w);
                let done = &w == v;
                set.push(w);
                if done {
                    break;
                }
            }
            t.out.push(set);
        }
    }
    let mut t = T {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in nodes {
        if !t.index.contains_key(v) {
            strong(&mut t, v);
        }
    }
    t.out.sort_by_key(|s| std::cmp::Reverse(s.len()));
    t.out
}

#[test]
fn no_crate_has_an_import_cycle_of_more_than_a_few_files_or_a_file_over_a_thousand_lines() {
    let root = workspace().join("crates");
    let mut problems = Vec::new();
    let mut crates: Vec<_> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    crates.sort();
    for krate in crates {
        let src = krate.join("src");
        if !src.is_dir() {
            continue;
        }
        let name = krate.file_name().unwrap().to_string_lossy().into_owned();
        let (cycle_max, lines_max) = (CYCLE_FILES_MAX, FILE_LINES_MAX);
        let mods = modules(&src);
        let nodes: Vec<Module> = mods.keys().cloned().collect();
        let largest = cycles(&nodes, &edges(&mods))
            .into_iter()
            .next()
            .unwrap_or_default();
        let mut members: Vec<String> = largest.iter().map(|m| m.join("::")).collect();
        members.sort();
        eprintln!(
            "{name}: largest cycle {} of {} files: {}",
            largest.len(),
            mods.len(),
            members.join(", ")
        );
        if largest.len() > cycle_max {
            problems.push(format!(
                "{name}: an import cycle of {} files (at most {cycle_max}): {}",
                largest.len(),
                members.join(", ")
            ));
        }
        for (m, p) in &mods {
            let text = std::fs::read_to_string(p).unwrap();
            let lines = text.split("#[cfg(test)]").next().unwrap().lines().count();
            if lines > lines_max {
                problems.push(format!(
                    "{name}: {} has {lines} lines before its tests (at most {lines_max})",
                    if m.is_empty() {
                        "the crate root".to_string()
                    } else {
                        m.join("::")
                    }
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The handlers parse, authorize, call the data plane or a coordinator, and encode: the
/// logs' files are `laminar-data`'s business (issue 42), so no handler names
/// `laminar-storage`.
const HANDLERS_STILL_ON_STORAGE: &[&str] = &[];

#[test]
fn no_handler_imports_the_storage_engine() {
    let dir = workspace().join("crates/laminar-broker/src/handlers");
    let mut named = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        let code = text.split("#[cfg(test)]").next().unwrap();
        if code.contains("laminar_storage") {
            named.push(path.file_name().unwrap().to_string_lossy().into_owned());
        }
    }
    named.sort();
    assert_eq!(
        named, HANDLERS_STILL_ON_STORAGE,
        "handlers that name laminar_storage (the data plane, laminar-data, should do it for them)"
    );
}

/// A leader writes through one sequence (`LedPartition::append_with` in
/// `laminar-data/src/partition.rs`): on the partition's storage thread, the leadership checked
/// right before the append, then the high watermark and the waiting fetches told. Produce, the
/// coordinators' records and the markers all take it, so no other file of the broker's crates
/// appends as a leader, makes a `LeaderWrite` or tells it of an append.
#[test]
fn one_leader_write_sequence() {
    const SEQUENCE: &str = "crates/laminar-data/src/partition.rs";
    const STEPS: &[&str] = &[
        "AppendMode::Leader",
        "LeaderWrite::new(",
        ".appended(",
        ".append_as(",
    ];
    /// The follower's append, with the leader's offsets (`AppendMode::Replica`).
    const REPLICA_APPEND: &str = "crates/laminar-data/src/follow.rs";
    let mut found = Vec::new();
    for krate in [
        "laminar-broker",
        "laminar-coordinators",
        "laminar-data",
        "laminar-cluster",
        "laminar-net",
    ] {
        let mut files = Vec::new();
        rust_files(&workspace().join("crates").join(krate).join("src"), &mut files);
        for path in files {
            let text = std::fs::read_to_string(&path).unwrap();
            let code = text.split("#[cfg(test)]").next().unwrap();
            let name = path
                .strip_prefix(workspace())
                .unwrap()
                .to_string_lossy()
                .into_owned();
            for step in STEPS {
                let allowed = name == SEQUENCE || (*step == ".append_as(" && name == REPLICA_APPEND);
                if !allowed
                    && code
                        .lines()
                        .any(|l| !l.trim_start().starts_with("//") && l.contains(step))
                {
                    found.push(format!("{name}: {step}"));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "leader writes outside the one sequence (LedPartition::append_with):\n{}",
        found.join("\n")
    );
}
