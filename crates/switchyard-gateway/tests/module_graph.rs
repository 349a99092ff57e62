#![allow(clippy::unwrap_used, clippy::expect_used)]
//! No module cycles inside the gateway, admission and ledger crates.
//!
//! Reads each crate's source tree from its roots (`lib.rs`, `main.rs`, `bin/*.rs`) along its
//! `mod x;` declarations, and draws an edge from a file to the file that defines what it
//! names through `use crate::…`, `use super::…`, `use self::…`, a declared child module
//! (`use child::…`, `child::f()`), or an inline `crate::a::b` / `super::x` path. A path is
//! resolved to the longest module prefix that is a file, so a name taken through a module's
//! re-export points at the file that re-exports it (the crate root's re-exports are followed
//! to their source instead). A `mod` declaration only places a file in the tree:
//! it is not a use. Comments, string literals and `#[cfg(test)]` items are left out (a test
//! module using its parent is not a dependency of the code). Any strongly connected set of
//! two or more files is a cycle, reported with one loop through it and where each step is.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// One reference from a file to a module path, with its line.
#[derive(Debug, Clone)]
struct Reference {
    line: usize,
    path: Vec<String>,
}

/// A file of the module tree: its module path and what it refers to.
#[derive(Debug)]
struct ModuleFile {
    module: Vec<String>,
    references: Vec<Reference>,
    imports: BTreeMap<String, Vec<String>>,
}

/// The file-level dependency graph of one crate root.
#[derive(Debug, Default)]
struct Graph {
    /// Display names of the files, by index.
    files: Vec<String>,
    /// Edges with the first line and path that made each.
    edges: BTreeMap<(usize, usize), (usize, String)>,
}

// ---------------------------------------------------------------- tokens

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Ident(String),
    PathSep,
    Punct(char),
}

/// Identifiers, `::` and single punctuation of Rust source, with their lines; comments,
/// strings, chars and lifetimes removed.
fn tokenize(source: &str) -> Vec<(Token, usize)> {
    let chars: Vec<char> = source.chars().collect();
    let mut tokens = Vec::new();
    let (mut i, mut line) = (0usize, 1usize);
    let at = |i: usize| chars.get(i).copied().unwrap_or('\0');
    while i < chars.len() {
        let c = chars[i];
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else if c == '/' && at(i + 1) == '/' {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && at(i + 1) == '*' {
            let mut depth = 0usize;
            while i < chars.len() {
                if chars[i] == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    if chars[i] == '\n' {
                        line += 1;
                    }
                    i += 1;
                }
            }
        } else if c == '"' || ((c == 'r' || c == 'b') && raw_or_byte_string_start(&chars, i)) {
            // Prefix letters, then `#`s of a raw string, then the quoted text.
            let mut raw = false;
            while chars[i] != '"' && chars[i] != '#' {
                raw |= chars[i] == 'r';
                i += 1;
            }
            let mut hashes = 0;
            while chars[i] == '#' {
                hashes += 1;
                i += 1;
            }
            raw |= hashes > 0;
            i += 1;
            while i < chars.len() {
                if chars[i] == '\n' {
                    line += 1;
                }
                if !raw && chars[i] == '\\' {
                    i += 2;
                    continue;
                }
                if chars[i] == '"' && (0..hashes).all(|k| at(i + 1 + k) == '#') {
                    i += 1 + hashes;
                    break;
                }
                i += 1;
            }
        } else if c == '\'' {
            if at(i + 1) == '\\' {
                i += 2;
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if at(i + 2) == '\'' {
                i += 3;
            } else {
                // A lifetime or label: its name is no path.
                i += 1;
                while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                    i += 1;
                }
            }
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            tokens.push((
                Token::Ident(word.trim_start_matches("r#").to_string()),
                line,
            ));
        } else if c.is_ascii_digit() {
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
        } else if c == ':' && at(i + 1) == ':' {
            tokens.push((Token::PathSep, line));
            i += 2;
        } else {
            tokens.push((Token::Punct(c), line));
            i += 1;
        }
    }
    tokens
}

/// `r"`, `r#"`, `b"`, `br"`, `br#"` at `i`, not inside an identifier.
fn raw_or_byte_string_start(chars: &[char], i: usize) -> bool {
    if i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_') {
        return false;
    }
    let mut j = i;
    if chars.get(j) == Some(&'b') {
        j += 1;
    }
    if chars.get(j) == Some(&'r') {
        j += 1;
        while chars.get(j) == Some(&'#') {
            j += 1;
        }
    }
    j > i && chars.get(j) == Some(&'"')
}

// ---------------------------------------------------------------- one file

/// What one file declares and refers to.
#[derive(Debug, Default)]
struct Scan {
    /// `mod x;` declared at the top of the file (not inline, not test-only).
    children: Vec<String>,
    /// References, relative to the file's own module.
    references: Vec<Reference>,
    /// Names brought in by `use` (re-exports among them), to the path they stand for.
    imports: BTreeMap<String, Vec<String>>,
}

fn is_ident(tokens: &[(Token, usize)], i: usize, word: &str) -> bool {
    matches!(tokens.get(i), Some((Token::Ident(w), _)) if w == word)
}

fn is_punct(tokens: &[(Token, usize)], i: usize, c: char) -> bool {
    matches!(tokens.get(i), Some((Token::Punct(p), _)) if *p == c)
}

/// Index just past the `#[cfg(test)]` attribute starting at `i`, if it is one.
fn cfg_test_attribute(tokens: &[(Token, usize)], i: usize) -> Option<usize> {
    let shape = is_punct(tokens, i, '#')
        && is_punct(tokens, i + 1, '[')
        && is_ident(tokens, i + 2, "cfg")
        && is_punct(tokens, i + 3, '(')
        && is_ident(tokens, i + 4, "test")
        && is_punct(tokens, i + 5, ')')
        && is_punct(tokens, i + 6, ']');
    shape.then_some(i + 7)
}

/// Index just past the item starting at `i`: its `;`, or the end of its first `{…}` block.
fn skip_item(tokens: &[(Token, usize)], mut i: usize) -> usize {
    let mut depth = 0usize;
    while i < tokens.len() {
        match &tokens[i].0 {
            Token::Punct('{') => depth += 1,
            Token::Punct('}') => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return i + 1;
                }
            }
            Token::Punct(';') if depth == 0 => return i + 1,
            _ => {}
        }
        i += 1;
    }
    i
}

/// Expands the use tree at `i` into whole paths; returns the index past it.
fn use_tree(
    tokens: &[(Token, usize)],
    mut i: usize,
    prefix: &[String],
    out: &mut Vec<(Vec<String>, Option<String>)>,
) -> usize {
    let mut path = prefix.to_vec();
    if matches!(tokens.get(i), Some((Token::PathSep, _))) {
        i += 1;
    }
    loop {
        match tokens.get(i) {
            Some((Token::Ident(word), _)) if word == "self" && !path.is_empty() => i += 1,
            Some((Token::Ident(word), _)) => {
                path.push(word.clone());
                i += 1;
            }
            Some((Token::Punct('{'), _)) => {
                i += 1;
                while !is_punct(tokens, i, '}') && i < tokens.len() {
                    i = use_tree(tokens, i, &path, out);
                    if is_punct(tokens, i, ',') {
                        i += 1;
                    }
                }
                return i + 1;
            }
            Some((Token::Punct('*'), _)) => {
                out.push((path, None));
                return i + 1;
            }
            _ => {
                out.push((path, None));
                return i;
            }
        }
        if matches!(tokens.get(i), Some((Token::PathSep, _))) {
            i += 1;
            continue;
        }
        let mut alias = None;
        if is_ident(tokens, i, "as") {
            if let Some((Token::Ident(name), _)) = tokens.get(i + 1) {
                alias = Some(name.clone());
            }
            i += 2;
        }
        out.push((path, alias));
        return i;
    }
}

/// Reads one file: its declared children and every reference to a module path that starts
/// at `crate`, `super`, `self` or one of its children (resolved later).
fn scan(source: &str) -> Scan {
    let tokens = tokenize(source);
    let mut children: Vec<String> = Vec::new();
    for (i, (token, _)) in tokens.iter().enumerate() {
        if token == &Token::Ident("mod".into())
            && let Some((Token::Ident(name), _)) = tokens.get(i + 1)
            && is_punct(&tokens, i + 2, ';')
            && !preceded_by_cfg_test(&tokens, i)
        {
            children.push(name.clone());
        }
    }
    let mut scan = Scan {
        children: children.clone(),
        references: Vec::new(),
        imports: BTreeMap::new(),
    };
    // Inline modules open at these brace depths (their names prefix `self` and `super`).
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    while i < tokens.len() {
        if let Some(next) = cfg_test_attribute(&tokens, i) {
            let mut j = next;
            while is_punct(&tokens, j, '#') {
                j = skip_attribute(&tokens, j);
            }
            i = skip_item(&tokens, j);
            continue;
        }
        let line = tokens[i].1;
        match &tokens[i].0 {
            Token::Punct('{') => depth += 1,
            Token::Punct('}') => {
                depth = depth.saturating_sub(1);
                if inline.last().is_some_and(|(_, d)| *d == depth) {
                    inline.pop();
                }
            }
            Token::Ident(word) if word == "mod" => {
                if let Some((Token::Ident(name), _)) = tokens.get(i + 1)
                    && is_punct(&tokens, i + 2, '{')
                {
                    inline.push((name.clone(), depth));
                    depth += 1;
                    i += 3;
                    continue;
                }
            }
            Token::Ident(word) if word == "use" => {
                let mut paths = Vec::new();
                i = use_tree(&tokens, i + 1, &[], &mut paths);
                for (path, alias) in paths {
                    let name = alias.or_else(|| path.last().cloned());
                    let count = scan.references.len();
                    push_reference(&mut scan, &children, &inline, line, path);
                    // A name this file brings in (at its top) can be named through it.
                    if let (Some(name), true) = (name, inline.is_empty()) {
                        if let Some(reference) = scan.references.get(count) {
                            scan.imports.insert(name, reference.path.clone());
                        }
                    }
                }
                continue;
            }
            Token::Ident(word)
                if matches!(tokens.get(i + 1), Some((Token::PathSep, _)))
                    && !matches!(i.checked_sub(1).map(|p| &tokens[p].0), Some(Token::PathSep)) =>
            {
                let _ = word;
                let mut path = Vec::new();
                let mut j = i;
                while let Some((Token::Ident(segment), _)) = tokens.get(j) {
                    path.push(segment.clone());
                    if matches!(tokens.get(j + 1), Some((Token::PathSep, _))) {
                        j += 2;
                    } else {
                        j += 1;
                        break;
                    }
                }
                push_reference(&mut scan, &children, &inline, line, path);
                i = j;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    scan
}

fn skip_attribute(tokens: &[(Token, usize)], mut i: usize) -> usize {
    let mut depth = 0usize;
    while i < tokens.len() {
        match tokens[i].0 {
            Token::Punct('[') => depth += 1,
            Token::Punct(']') => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    i
}

/// Whether the `mod` at `i` carries `#[cfg(test)]` (visibility in between allowed).
fn preceded_by_cfg_test(tokens: &[(Token, usize)], i: usize) -> bool {
    (i.saturating_sub(12)..i).any(|start| cfg_test_attribute(tokens, start).is_some())
        && tokens[i.saturating_sub(12)..i]
            .iter()
            .all(|(t, _)| !matches!(t, Token::Punct(';') | Token::Punct('}')))
}

/// Keeps a path that starts at the crate, the file's own module or one of its children,
/// made relative to the file: `[“crate”, …]`, or `n` leading `super`s, or a child.
fn push_reference(
    scan: &mut Scan,
    children: &[String],
    inline: &[(String, usize)],
    line: usize,
    mut path: Vec<String>,
) {
    let Some(first) = path.first().cloned() else {
        return;
    };
    let first = first.trim_start_matches('$').to_string();
    path[0] = first.clone();
    // Inside an inline module, `self` and `super` start from it.
    let inline_names: Vec<String> = inline.iter().map(|(n, _)| n.clone()).collect();
    let relative = match first.as_str() {
        "crate" => path,
        "self" => {
            let mut whole = vec!["self".to_string()];
            whole.extend(inline_names);
            whole.extend(path.into_iter().skip(1));
            whole
        }
        "super" => {
            let supers = path.iter().take_while(|s| *s == "super").count();
            let mut scope = inline_names;
            let outside = supers.saturating_sub(scope.len());
            scope.truncate(scope.len().saturating_sub(supers));
            let mut whole = vec!["super".to_string(); outside];
            if outside == 0 {
                whole.push("self".into());
            }
            whole.extend(scope);
            whole.extend(path.into_iter().skip(supers));
            whole
        }
        _ if inline.is_empty() && children.contains(&first) => {
            let mut whole = vec!["self".to_string()];
            whole.extend(path);
            whole
        }
        _ => return,
    };
    scan.references.push(Reference {
        line,
        path: relative,
    });
}

// ---------------------------------------------------------------- the tree

/// The files of the crate rooted at `root`, by module path, following `mod` declarations.
fn module_tree(root: &Path) -> BTreeMap<PathBuf, ModuleFile> {
    let mut files = BTreeMap::new();
    let mut pending = vec![(root.to_path_buf(), Vec::<String>::new())];
    while let Some((file, module)) = pending.pop() {
        let Ok(source) = std::fs::read_to_string(&file) else {
            continue;
        };
        let scan = scan(&source);
        let dir = child_dir(&file);
        for child in &scan.children {
            let flat = dir.join(format!("{child}.rs"));
            let nested = dir.join(child).join("mod.rs");
            let found = if flat.exists() { flat } else { nested };
            let mut path = module.clone();
            path.push(child.clone());
            pending.push((found, path));
        }
        files.insert(
            file,
            ModuleFile {
                module,
                references: scan.references,
                imports: scan.imports,
            },
        );
    }
    files
}

/// Where the children of `file` live: beside a crate root or `mod.rs`, else in a folder
/// named after the file.
fn child_dir(file: &Path) -> PathBuf {
    let dir = file.parent().map(Path::to_path_buf).unwrap_or_default();
    match file.file_stem().and_then(|s| s.to_str()) {
        Some("mod" | "lib" | "main") => dir,
        _ if dir.file_name().is_some_and(|d| d == "bin") => dir,
        Some(stem) => dir.join(stem),
        None => dir,
    }
}

fn graph(root: &Path, base: &Path) -> Graph {
    let tree = module_tree(root);
    let by_module: BTreeMap<Vec<String>, PathBuf> = tree
        .iter()
        .map(|(file, m)| (m.module.clone(), file.clone()))
        .collect();
    let index: BTreeMap<PathBuf, usize> = tree
        .keys()
        .enumerate()
        .map(|(i, f)| (f.clone(), i))
        .collect();
    let mut graph = Graph {
        files: tree
            .keys()
            .map(|f| {
                f.strip_prefix(base)
                    .unwrap_or(f)
                    .to_string_lossy()
                    .into_owned()
            })
            .collect(),
        edges: BTreeMap::new(),
    };
    for (file, module_file) in &tree {
        let from = index[file];
        for reference in &module_file.references {
            let Some(absolute) = absolute(&module_file.module, &reference.path) else {
                continue;
            };
            let Some(target) = defining_file(&tree, &by_module, absolute) else {
                continue;
            };
            let to = index[&target];
            if to != from {
                graph
                    .edges
                    .entry((from, to))
                    .or_insert_with(|| (reference.line, reference.path.join("::")));
            }
        }
    }
    graph
}

/// The file `path` depends on: the longest module prefix that is a file. A name the crate
/// root re-exports (`crate::Error` for `pub use error::Error`) leads on to where it comes
/// from: every file names the crate's public items through the root, which is no
/// dependency on the root itself. A module's own re-exports are its interface, so a name
/// taken through them depends on the module's file.
fn defining_file(
    tree: &BTreeMap<PathBuf, ModuleFile>,
    by_module: &BTreeMap<Vec<String>, PathBuf>,
    mut path: Vec<String>,
) -> Option<PathBuf> {
    let mut seen = BTreeSet::new();
    loop {
        let prefix = (0..=path.len())
            .rev()
            .find(|n| by_module.contains_key(&path[..*n]))?;
        let file = &by_module[&path[..prefix]];
        let through = path
            .get(prefix)
            .filter(|_| prefix == 0)
            .and_then(|name| tree[file].imports.get(name))
            .and_then(|import| absolute(&tree[file].module, import));
        match through {
            Some(mut next) if seen.insert(path.clone()) => {
                next.extend(path[prefix + 1..].iter().cloned());
                path = next;
            }
            _ => return Some(file.clone()),
        }
    }
}

/// The reference made absolute from the crate root.
fn absolute(module: &[String], path: &[String]) -> Option<Vec<String>> {
    let mut scope = module.to_vec();
    let mut rest = path.iter().peekable();
    match rest.peek().map(|s| s.as_str()) {
        Some("crate") => {
            scope.clear();
            rest.next();
        }
        Some("self") => {
            rest.next();
        }
        Some("super") => {
            while rest.peek().is_some_and(|s| *s == "super") {
                rest.next();
                scope.pop()?;
            }
            if rest.peek().is_some_and(|s| *s == "self") {
                rest.next();
            }
        }
        _ => return None,
    }
    scope.extend(rest.cloned());
    Some(scope)
}

// ---------------------------------------------------------------- cycles

/// Every set of files that reach each other (two or more): its files, and one loop through it.
fn cycles(graph: &Graph) -> Vec<(BTreeSet<usize>, Vec<usize>)> {
    let n = graph.files.len();
    let mut adjacency = vec![Vec::new(); n];
    for &(from, to) in graph.edges.keys() {
        adjacency[from].push(to);
    }
    // Tarjan's strongly connected components, iteratively.
    let mut index = vec![usize::MAX; n];
    let mut low = vec![0; n];
    let mut on_stack = vec![false; n];
    let mut stack = Vec::new();
    let mut components = Vec::new();
    let mut next = 0;
    for start in 0..n {
        if index[start] != usize::MAX {
            continue;
        }
        let mut work = vec![(start, 0usize)];
        index[start] = next;
        low[start] = next;
        next += 1;
        stack.push(start);
        on_stack[start] = true;
        while let Some(&mut (v, ref mut child)) = work.last_mut() {
            if let Some(&w) = adjacency[v].get(*child) {
                *child += 1;
                if index[w] == usize::MAX {
                    index[w] = next;
                    low[w] = next;
                    next += 1;
                    stack.push(w);
                    on_stack[w] = true;
                    work.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
            } else {
                work.pop();
                if let Some(&(parent, _)) = work.last() {
                    low[parent] = low[parent].min(low[v]);
                }
                if low[v] == index[v] {
                    let mut component = BTreeSet::new();
                    while let Some(w) = stack.pop() {
                        on_stack[w] = false;
                        component.insert(w);
                        if w == v {
                            break;
                        }
                    }
                    if component.len() > 1 {
                        components.push(component);
                    }
                }
            }
        }
    }
    components
        .into_iter()
        .map(|component| {
            let cycle = one_loop(&adjacency, &component);
            (component, cycle)
        })
        .collect()
}

/// A shortest loop from the component's first file back to itself, inside the component.
fn one_loop(adjacency: &[Vec<usize>], component: &BTreeSet<usize>) -> Vec<usize> {
    let start = *component.iter().next().unwrap();
    let mut came_from: BTreeMap<usize, usize> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([start]);
    while let Some(v) = queue.pop_front() {
        for &w in &adjacency[v] {
            if !component.contains(&w) {
                continue;
            }
            if w == start {
                let mut path = vec![start, v];
                let mut at = v;
                while at != start {
                    at = came_from[&at];
                    path.push(at);
                }
                path.reverse();
                return path;
            }
            if let std::collections::btree_map::Entry::Vacant(e) = came_from.entry(w) {
                e.insert(v);
                queue.push_back(w);
            }
        }
    }
    vec![start]
}

/// Each cycle in words: the files that reach each other, then one loop with where each step
/// is: `a.rs -> b.rs (line 3: crate::b::X) -> a.rs (…)`.
fn describe(graph: &Graph, component: &BTreeSet<usize>, cycle: &[usize]) -> String {
    let files: Vec<&str> = component.iter().map(|&f| graph.files[f].as_str()).collect();
    let mut text = format!(
        "{} files reach each other: {}\n  for one: {}",
        files.len(),
        files.join(", "),
        graph.files[cycle[0]]
    );
    for pair in cycle.windows(2) {
        let (line, path) = &graph.edges[&(pair[0], pair[1])];
        text.push_str(&format!(
            "\n    -> {} (line {line} of the one before: {path})",
            graph.files[pair[1]]
        ));
    }
    text
}

/// The roots of a crate's source tree: the library, the binary, and each `bin/*.rs`.
fn roots(src: &Path) -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = ["lib.rs", "main.rs"]
        .iter()
        .map(|f| src.join(f))
        .filter(|p| p.exists())
        .collect();
    if let Ok(entries) = std::fs::read_dir(src.join("bin")) {
        let mut bins: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "rs"))
            .collect();
        bins.sort();
        roots.extend(bins);
    }
    roots
}

/// Every cycle of every crate under `crates` (directory names), described.
fn cycles_in(crates_dir: &Path, crates: &[&str]) -> Vec<String> {
    let mut found = Vec::new();
    for name in crates {
        let src = crates_dir.join(name).join("src");
        for root in roots(&src) {
            let graph = graph(&root, crates_dir);
            for (component, cycle) in cycles(&graph) {
                found.push(describe(&graph, &component, &cycle));
            }
        }
    }
    found
}

#[test]
fn the_gateway_admission_and_ledger_crates_have_no_module_cycles() {
    let crates_dir = std::env::var("MODULE_GRAPH_CRATES_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| Path::new(env!("CARGO_MANIFEST_DIR")).join(".."));
    let crates = [
        "switchyard-gateway",
        "switchyard-admission",
        "switchyard-ledger",
    ];
    for name in crates {
        let lib = crates_dir.join(name).join("src").join("lib.rs");
        let files = module_tree(&lib).len();
        assert!(
            files > 5,
            "{name}: only {files} files read: the walk is broken"
        );
    }
    let found = cycles_in(&crates_dir, &crates);
    assert!(
        found.is_empty(),
        "{} module cycle(s); break each (move the shared item to a file both can use):\n{}",
        found.len(),
        found.join("\n")
    );
}

// ---------------------------------------------------------------- the checker's own tests

/// A throwaway crate tree under a temp dir: `(path under src, contents)`.
fn synthetic(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (path, contents) in files {
        let path = dir.path().join("demo").join("src").join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, contents).unwrap();
    }
    dir
}

#[test]
fn a_cycle_through_a_re_export_and_super_is_found_and_named() {
    let tree = synthetic(&[
        ("lib.rs", "pub mod proxy;\npub mod state;\n"),
        (
            "proxy/mod.rs",
            "mod forward;\npub use forward::Context;\npub const HEADER: &str = \"x\";\n",
        ),
        (
            "proxy/forward.rs",
            "use super::HEADER;\npub struct Context;\n",
        ),
        ("state.rs", "pub struct State;\n"),
    ]);
    let found = cycles_in(tree.path(), &["demo"]);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].contains("demo/src/proxy/forward.rs"),
        "{}",
        found[0]
    );
    assert!(found[0].contains("demo/src/proxy/mod.rs"), "{}", found[0]);
    assert!(found[0].contains("super::HEADER"), "{}", found[0]);
}

#[test]
fn a_three_file_cycle_through_inline_paths_is_found() {
    let tree = synthetic(&[
        ("lib.rs", "mod a;\nmod b;\nmod c;\n"),
        ("a.rs", "pub fn f() { crate::b::g() }\n"),
        ("b.rs", "pub fn g() { let _ = crate::c::H; }\n"),
        ("c.rs", "use crate::{x::y, a::f};\npub const H: u8 = 1;\n"),
    ]);
    let found = cycles_in(tree.path(), &["demo"]);
    assert_eq!(found.len(), 1, "{found:?}");
    for file in ["a.rs", "b.rs", "c.rs"] {
        assert!(found[0].contains(file), "{}", found[0]);
    }
}

#[test]
fn layered_trees_comments_strings_and_test_modules_are_not_cycles() {
    let tree = synthetic(&[
        ("lib.rs", "mod a;\nmod b;\n"),
        (
            "a.rs",
            "use crate::b::G;\n// crate::a::x in a comment\n\
             #[cfg(test)]\nmod tests { use crate::b::*; }\n",
        ),
        (
            "b.rs",
            "pub const G: &str = \"crate::a::f\";\n/* crate::a::f */\n\
             #[cfg(test)]\nmod tests {\n    use crate::a;\n}\n\
             #[cfg(test)]\nfn helper() { crate::a::f(); }\n\
             pub fn life<'a>(x: &'a str) -> char { let _ = x; '\"' }\n",
        ),
    ]);
    let found = cycles_in(tree.path(), &["demo"]);
    assert!(found.is_empty(), "{found:?}");
    // A name taken through the crate root's re-export depends on the file that defines it,
    // not on the root that re-exports everything.
    std::fs::write(
        tree.path().join("demo/src/lib.rs"),
        "mod a;\nmod b;\npub use a::f;\npub use b::G;\n",
    )
    .unwrap();
    std::fs::write(
        tree.path().join("demo/src/a.rs"),
        "use crate::G;\npub fn f() {}\n",
    )
    .unwrap();
    let found = cycles_in(tree.path(), &["demo"]);
    assert!(found.is_empty(), "{found:?}");
    // The same tree with one real back edge is a cycle.
    std::fs::write(
        tree.path().join("demo/src/b.rs"),
        "pub const G: u8 = 0;\npub fn g() { crate::a::f() }\n",
    )
    .unwrap();
    assert_eq!(cycles_in(tree.path(), &["demo"]).len(), 1);
}
