//! A crate's module tree, read from its root along `mod` declarations, and the file-level
//! dependency graph its references draw.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::scan::{Reference, scan};

/// A file of the module tree: its module path and what it refers to.
#[derive(Debug)]
pub(crate) struct ModuleFile {
    module: Vec<String>,
    references: Vec<Reference>,
    imports: BTreeMap<String, Vec<String>>,
}

/// The file-level dependency graph of one crate root.
#[derive(Debug, Default)]
pub(crate) struct Graph {
    /// Display names of the files, by index.
    pub(crate) files: Vec<String>,
    /// Edges with the first line and path that made each.
    pub(crate) edges: BTreeMap<(usize, usize), (usize, String)>,
}

/// The files of the crate rooted at `root`, by module path, following `mod` declarations.
pub(crate) fn module_tree(root: &Path) -> BTreeMap<PathBuf, ModuleFile> {
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

pub(crate) fn graph(root: &Path, base: &Path) -> Graph {
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
