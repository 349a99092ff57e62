//! Cycles in a dependency graph (strongly connected sets of files), described in words.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::tree::{Graph, graph};

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
pub(crate) fn cycles_in(crates_dir: &Path, crates: &[&str]) -> Vec<String> {
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
