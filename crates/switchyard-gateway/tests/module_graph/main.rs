#![allow(clippy::unwrap_used, clippy::expect_used)]
//! No module cycles inside any crate of the workspace.
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

mod cycles;
mod scan;
mod tokens;
mod tree;

use cycles::cycles_in;
use std::path::{Path, PathBuf};
use tree::module_tree;

/// Every crate of the workspace: each folder under `crates/` with a `src/lib.rs` or
/// `src/main.rs` (so a new crate is covered without a change here), and the chaos suite.
fn workspace_crates(crates_dir: &Path) -> Vec<(PathBuf, String)> {
    let mut found: Vec<(PathBuf, String)> = std::fs::read_dir(crates_dir)
        .unwrap()
        .filter_map(|entry| {
            let entry = entry.ok()?;
            let src = entry.path().join("src");
            let is_crate = src.join("lib.rs").exists() || src.join("main.rs").exists();
            let name = entry.file_name().into_string().ok()?;
            is_crate.then(|| (crates_dir.to_path_buf(), name))
        })
        .collect();
    found.sort();
    let root = crates_dir.join("..");
    if root
        .join("jepsen-like-tests")
        .join("src")
        .join("lib.rs")
        .exists()
    {
        found.push((root, "jepsen-like-tests".to_owned()));
    }
    found
}

#[test]
fn no_crate_of_the_workspace_has_a_module_cycle() {
    let crates_dir = std::env::var("MODULE_GRAPH_CRATES_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| Path::new(env!("CARGO_MANIFEST_DIR")).join(".."));
    let crates = workspace_crates(&crates_dir);
    let names: Vec<&str> = crates.iter().map(|(_, name)| name.as_str()).collect();
    for required in [
        "switchyard-gateway",
        "switchyard-router",
        "switchyard-workers",
        "switchyard-warmup",
        "jepsen-like-tests",
    ] {
        assert!(
            names.contains(&required),
            "{required} not found in {names:?}"
        );
    }
    let mut found = Vec::new();
    for (dir, name) in &crates {
        let src = dir.join(name).join("src");
        let root = if src.join("lib.rs").exists() {
            src.join("lib.rs")
        } else {
            src.join("main.rs")
        };
        let files = module_tree(&root).len();
        assert!(
            files > 1,
            "{name}: only {files} file read: the walk is broken"
        );
        found.extend(cycles_in(dir, &[name.as_str()]));
    }
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
