#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The deployment files stay consistent with the code: the Kubernetes manifests validate
//! against the Kubernetes schemas (offline, with `kubernetes-validate` when it is installed, as
//! CI does), every Kustomize resource exists, and the gateway configs embedded in the
//! ConfigMap and the compose stack are accepted by the gateway's own config parser.

use std::path::{Path, PathBuf};
use switchyard_gateway::Config;

fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy")
}

/// Kubernetes API version the manifests target.
const KUBERNETES_VERSION: &str = "1.30.0";

/// `resources:` and `patches: - path:` entries of a kustomization file.
fn kustomize_entries(text: &str) -> Vec<String> {
    let mut entries = Vec::new();
    let mut in_list = false;
    for line in text.lines() {
        let trimmed = line.trim();
        if !line.starts_with(' ') && !line.starts_with('-') {
            in_list = trimmed == "resources:" || trimmed == "patches:";
            continue;
        }
        if in_list {
            let item = trimmed
                .trim_start_matches("- ")
                .trim_start_matches("path: ");
            if !item.is_empty() && !item.starts_with('#') {
                entries.push(item.to_string());
            }
        }
    }
    entries
}

/// The block scalar under `key: |` in a YAML file, dedented.
fn block_scalar(text: &str, key: &str) -> String {
    let mut lines = text.lines().skip_while(|l| l.trim() != format!("{key}: |"));
    let header = lines.next().expect("block scalar key");
    let base = header.len() - header.trim_start().len();
    let body: Vec<&str> = lines
        .take_while(|l| l.trim().is_empty() || l.len() - l.trim_start().len() > base)
        .collect();
    let indent = body
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0);
    body.iter()
        .map(|l| l.get(indent..).unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

fn manifests() -> Vec<PathBuf> {
    let kube = deploy_dir().join("kubernetes");
    let mut files = Vec::new();
    for dir in ["base", "overlays/production"] {
        let kustomization =
            std::fs::read_to_string(kube.join(dir).join("kustomization.yaml")).unwrap();
        for entry in kustomize_entries(&kustomization) {
            let path = kube.join(dir).join(&entry);
            assert!(
                path.exists(),
                "{dir}/kustomization.yaml lists a missing {entry}"
            );
            // Patches are partial objects and directories are other kustomizations.
            let is_patch = kustomization.contains(&format!("path: {entry}"));
            if path.is_file() && !is_patch {
                files.push(path);
            }
        }
    }
    assert!(files.len() >= 10, "{files:?}");
    files
}

#[test]
fn kustomize_resources_exist_and_manifests_validate_offline() {
    let files = manifests();
    let validator = std::process::Command::new("kubernetes-validate")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if validator {
        let output = std::process::Command::new("kubernetes-validate")
            .args(["--strict", "--quiet", "-k", KUBERNETES_VERSION])
            .args(&files)
            .output()
            .unwrap();
        let report = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(
            output.status.success(),
            "kubernetes-validate failed:\n{report}"
        );
        assert!(!report.contains("ERROR"), "{report}");
    } else {
        eprintln!("kubernetes-validate not installed: structural checks only (CI installs it)");
    }
    // Structure every document needs, whatever the validator.
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for document in text.split("\n---\n") {
            for field in ["apiVersion:", "kind:", "metadata:", "  name:"] {
                assert!(
                    document.lines().any(|l| l.starts_with(field)),
                    "{} lacks `{field}`",
                    file.display()
                );
            }
        }
    }
}

#[test]
fn the_kubernetes_config_is_a_valid_gateway_config_matching_the_statefulset() {
    let base = deploy_dir().join("kubernetes/base");
    let configmap = std::fs::read_to_string(base.join("configmap.yaml")).unwrap();
    let config = Config::parse(&block_scalar(&configmap, "switchyard.toml")).unwrap();
    assert!(config.discovery.enabled);
    let statefulset = std::fs::read_to_string(base.join("statefulset.yaml")).unwrap();
    let replicas: usize = statefulset
        .lines()
        .find_map(|l| l.trim().strip_prefix("replicas: "))
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(
        config.cluster.members.len(),
        replicas,
        "one Raft member per replica"
    );
    for (ordinal, member) in config.cluster.members.iter().enumerate() {
        assert_eq!(
            member.id,
            ordinal as u64 + 1,
            "--node-id-from-hostname gives ordinal + 1"
        );
        assert!(
            member
                .addr
                .starts_with(&format!("switchyard-{ordinal}.switchyard-headless:"))
        );
    }
    let grace: u64 = statefulset
        .lines()
        .find_map(|l| l.trim().strip_prefix("terminationGracePeriodSeconds: "))
        .unwrap()
        .parse()
        .unwrap();
    let drain_ms = config.server.shutdown_accept_ms
        + config.server.shutdown_grace_ms
        + config.server.shutdown_handover_ms;
    assert!(
        grace * 1000 > drain_ms,
        "Kubernetes would SIGKILL before the drain ends"
    );
}

#[test]
fn the_compose_config_is_a_valid_gateway_config() {
    let text =
        std::fs::read_to_string(deploy_dir().join("docker/switchyard.compose.toml")).unwrap();
    let config = Config::parse(&text).unwrap();
    assert_eq!(config.cluster.members.len(), 3);
    assert_eq!(config.workers.len(), 4);
}
