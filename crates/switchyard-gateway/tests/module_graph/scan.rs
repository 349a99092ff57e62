//! One file: the modules it declares and the module paths it refers to.

use std::collections::BTreeMap;

use super::tokens::{Token, tokenize};

/// One reference from a file to a module path, with its line.
#[derive(Debug, Clone)]
pub(crate) struct Reference {
    pub(crate) line: usize,
    pub(crate) path: Vec<String>,
}

/// What one file declares and refers to.
#[derive(Debug, Default)]
pub(crate) struct Scan {
    /// `mod x;` declared at the top of the file (not inline, not test-only).
    pub(crate) children: Vec<String>,
    /// References, relative to the file's own module.
    pub(crate) references: Vec<Reference>,
    /// Names brought in by `use` (re-exports among them), to the path they stand for.
    pub(crate) imports: BTreeMap<String, Vec<String>>,
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
pub(crate) fn scan(source: &str) -> Scan {
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
