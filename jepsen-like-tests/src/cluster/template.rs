//! Command lines for node processes from argument templates, so the real `switchyard serve`
//! flags can be filled in (in a TOML file) without touching code. Placeholders are `{name}`;
//! an unknown one is an error, so a typo cannot silently start a misconfigured node.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use crate::NodeId;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    #[error("unknown placeholder `{{{0}}}` in `{1}`")]
    Unknown(String, String),
    #[error("unterminated placeholder in `{0}`")]
    Unterminated(String),
}

/// How to run one node. `args` are used on every start; `bootstrap_args` are added on the
/// first start of node 1, `join_args` on the first start of every other node (a restart
/// recovers from the data directory).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeTemplate {
    pub program: String,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub bootstrap_args: Vec<String>,
    #[serde(default)]
    pub join_args: Vec<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
}

/// The values placeholders expand to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TemplateVars {
    pub id: NodeId,
    /// The node's own IP (its namespace address, or 127.0.0.1).
    pub host: String,
    pub client_addr: String,
    pub client_port: u16,
    pub raft_addr: String,
    pub raft_port: u16,
    /// The Raft address peers use (the node's fault proxy when proxies are on).
    pub advertised_raft_addr: String,
    pub data_dir: String,
    /// The node's own folder (its log, data directory and generated files live there).
    pub node_dir: String,
    /// `1=addr,2=addr,...` with advertised addresses.
    pub members: String,
    pub bootstrap_raft_addr: String,
    pub secret: String,
}

impl TemplateVars {
    fn lookup(&self, name: &str) -> Option<String> {
        Some(match name {
            "id" => self.id.to_string(),
            "host" => self.host.clone(),
            "client_addr" => self.client_addr.clone(),
            "client_port" => self.client_port.to_string(),
            "raft_addr" => self.raft_addr.clone(),
            "raft_port" => self.raft_port.to_string(),
            "advertised_raft_addr" => self.advertised_raft_addr.clone(),
            "data_dir" => self.data_dir.clone(),
            "node_dir" => self.node_dir.clone(),
            "members" => self.members.clone(),
            "bootstrap_raft_addr" => self.bootstrap_raft_addr.clone(),
            "secret" => self.secret.clone(),
            _ => return None,
        })
    }
}

/// Expands every `{name}` in `template`.
pub fn render(template: &str, vars: &TemplateVars) -> Result<String, TemplateError> {
    render_with(template, |name| vars.lookup(name))
}

/// Expands every `{name}` in `template` with `lookup` (`None`: unknown placeholder).
pub fn render_with(
    template: &str,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<String, TemplateError> {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let close = after
            .find('}')
            .ok_or_else(|| TemplateError::Unterminated(template.to_owned()))?;
        let name = &after[..close];
        let value = lookup(name)
            .ok_or_else(|| TemplateError::Unknown(name.to_owned(), template.to_owned()))?;
        out.push_str(&value);
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

impl NodeTemplate {
    /// The arguments (program excluded) for one start of the node.
    pub fn command_args(
        &self,
        vars: &TemplateVars,
        first_start: bool,
    ) -> Result<Vec<String>, TemplateError> {
        let extra: &[String] = match (first_start, vars.id) {
            (false, _) => &[],
            (true, 1) => &self.bootstrap_args,
            (true, _) => &self.join_args,
        };
        self.args
            .iter()
            .chain(extra)
            .map(|arg| render(arg, vars))
            .collect()
    }

    pub fn env(&self, vars: &TemplateVars) -> Result<Vec<(String, String)>, TemplateError> {
        self.env
            .iter()
            .map(|(k, v)| Ok((k.clone(), render(v, vars)?)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(id: NodeId) -> TemplateVars {
        TemplateVars {
            id,
            host: "10.213.1.2".into(),
            client_addr: "10.213.1.2:8080".into(),
            client_port: 8080,
            raft_addr: "10.213.1.2:7000".into(),
            raft_port: 7000,
            advertised_raft_addr: "10.213.1.254:17002".into(),
            data_dir: "/tmp/n2".into(),
            node_dir: "/tmp/n2".into(),
            members: "1=a,2=b".into(),
            bootstrap_raft_addr: "10.213.1.254:17001".into(),
            secret: "s3cret".into(),
        }
    }

    fn template() -> NodeTemplate {
        NodeTemplate {
            program: "switchyard".into(),
            args: vec![
                "serve".into(),
                "--node-id".into(),
                "{id}".into(),
                "--raft-addr={raft_addr}".into(),
            ],
            bootstrap_args: vec!["--init".into(), "{members}".into()],
            join_args: vec!["--join".into(), "{bootstrap_raft_addr}".into()],
            env: BTreeMap::from([("RUST_LOG".into(), "info,node={id}".into())]),
        }
    }

    #[test]
    fn first_start_adds_bootstrap_or_join_and_restart_adds_nothing() {
        let t = template();
        assert_eq!(
            t.command_args(&vars(1), true).unwrap(),
            vec![
                "serve",
                "--node-id",
                "1",
                "--raft-addr=10.213.1.2:7000",
                "--init",
                "1=a,2=b"
            ]
        );
        assert_eq!(
            t.command_args(&vars(2), true).unwrap()[4..],
            ["--join", "10.213.1.254:17001"]
        );
        assert_eq!(t.command_args(&vars(2), false).unwrap().len(), 4);
        assert_eq!(
            t.env(&vars(3)).unwrap(),
            vec![("RUST_LOG".into(), "info,node=3".into())]
        );
    }

    #[test]
    fn typos_and_broken_braces_are_errors() {
        assert_eq!(
            render("--id={nodeid}", &vars(1)),
            Err(TemplateError::Unknown(
                "nodeid".into(),
                "--id={nodeid}".into()
            ))
        );
        assert!(matches!(
            render("{id", &vars(1)),
            Err(TemplateError::Unterminated(_))
        ));
        assert_eq!(render("plain", &vars(1)).unwrap(), "plain");
    }

    #[test]
    fn templates_load_from_toml() {
        let parsed: NodeTemplate = toml::from_str(
            "program = \"switchyard\"\nargs = [\"serve\", \"--node-id\", \"{id}\"]\n[env]\nRUST_LOG = \"debug\"\n",
        )
        .unwrap();
        assert_eq!(parsed.args.len(), 3);
        assert!(parsed.join_args.is_empty());
        assert_eq!(
            parsed.env.get("RUST_LOG").map(String::as_str),
            Some("debug")
        );
    }
}
