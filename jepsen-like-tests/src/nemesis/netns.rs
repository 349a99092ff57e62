//! One network namespace per node, joined by veth pairs to a bridge in the root namespace:
//! every node gets its own address (`10.213.<subnet>.<node>`), the bridge (where the runner
//! and its proxies live) is `.254`. Setup first removes leftovers of an earlier run with the
//! same prefix, teardown tolerates missing pieces, so both are idempotent.

use std::net::Ipv4Addr;

use super::command::{CommandError, CommandRunner, args};
use crate::NodeId;

#[derive(Debug, thiserror::Error)]
pub enum NetnsError {
    #[error(transparent)]
    Command(#[from] CommandError),
    #[error("invalid namespace lab: {0}")]
    Invalid(String),
}

/// Whether namespaces and iptables can be used here, and if not, why (a clear skip reason).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NetnsSupport {
    pub namespaces: Result<(), String>,
    pub iptables: Result<(), String>,
}

/// `CAP_NET_ADMIN` in the effective set of this process (read from `/proc`, no libc).
fn has_net_admin() -> Result<(), String> {
    const CAP_NET_ADMIN: u32 = 12;
    let status = std::fs::read_to_string("/proc/self/status")
        .map_err(|e| format!("cannot read /proc/self/status: {e}"))?;
    let effective = status
        .lines()
        .find_map(|line| line.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .ok_or("no CapEff line in /proc/self/status")?;
    if effective & (1 << CAP_NET_ADMIN) == 0 {
        return Err("not root (CAP_NET_ADMIN missing)".into());
    }
    Ok(())
}

/// Probes by creating and deleting a namespace named `<prefix>-probe`.
pub fn probe(runner: &impl CommandRunner, prefix: &str) -> NetnsSupport {
    let unavailable = |reason: String| NetnsSupport {
        namespaces: Err(reason.clone()),
        iptables: Err(reason),
    };
    if let Err(reason) = has_net_admin() {
        return unavailable(reason);
    }
    match runner.output("ip", &args(&["-V"])) {
        Ok(out) if out.success => {}
        _ => return unavailable("iproute2 (`ip`) is not installed".into()),
    }
    let namespace = format!("{prefix}-probe");
    runner.run_lenient("ip", &args(&["netns", "del", &namespace]));
    if let Err(e) = runner.run("ip", &args(&["netns", "add", &namespace])) {
        return unavailable(format!("cannot create network namespaces: {e}"));
    }
    let iptables = match runner.output(
        "ip",
        &args(&[
            "netns", "exec", &namespace, "iptables", "-w", "-L", "INPUT", "-n",
        ]),
    ) {
        Ok(out) if out.success => Ok(()),
        Ok(out) => Err(format!(
            "iptables unusable in a namespace: {}",
            out.stderr.trim()
        )),
        Err(e) => Err(format!("iptables is not installed: {e}")),
    };
    runner.run_lenient("ip", &args(&["netns", "del", &namespace]));
    NetnsSupport {
        namespaces: Ok(()),
        iptables,
    }
}

/// The namespaces, veths and bridge of one cluster.
#[derive(Debug)]
pub struct NetnsLab<R: CommandRunner> {
    runner: R,
    prefix: String,
    subnet: u8,
    nodes: Vec<NodeId>,
}

impl<R: CommandRunner> NetnsLab<R> {
    /// `prefix`: up to 6 ASCII letters/digits naming every interface and namespace (distinct
    /// per concurrent lab); `subnet`: third octet of `10.213.x.0/24` (distinct per lab).
    pub fn new(
        runner: R,
        prefix: &str,
        subnet: u8,
        nodes: Vec<NodeId>,
    ) -> Result<Self, NetnsError> {
        if prefix.is_empty()
            || prefix.len() > 6
            || !prefix.chars().all(|c| c.is_ascii_alphanumeric())
        {
            return Err(NetnsError::Invalid(format!(
                "prefix `{prefix}` must be 1-6 ASCII letters or digits (interface names are short)"
            )));
        }
        if let Some(bad) = nodes.iter().find(|&&n| n == 0 || n > 250) {
            return Err(NetnsError::Invalid(format!(
                "node id {bad} must be within 1..=250"
            )));
        }
        Ok(Self {
            runner,
            prefix: prefix.to_owned(),
            subnet,
            nodes,
        })
    }

    pub fn runner(&self) -> &R {
        &self.runner
    }

    pub fn nodes(&self) -> &[NodeId] {
        &self.nodes
    }

    pub fn namespace(&self, node: NodeId) -> String {
        format!("{}-n{node}", self.prefix)
    }

    pub fn bridge(&self) -> String {
        format!("{}br", self.prefix)
    }

    fn host_veth(&self, node: NodeId) -> String {
        format!("{}h{node}", self.prefix)
    }

    fn peer_veth(&self, node: NodeId) -> String {
        format!("{}p{node}", self.prefix)
    }

    pub fn node_ip(&self, node: NodeId) -> Ipv4Addr {
        Ipv4Addr::new(10, 213, self.subnet, node as u8)
    }

    pub fn bridge_ip(&self) -> Ipv4Addr {
        Ipv4Addr::new(10, 213, self.subnet, 254)
    }

    /// The command prefix that runs a program inside `node`'s namespace.
    pub fn exec_prefix(&self, node: NodeId) -> Vec<String> {
        args(&["ip", "netns", "exec", &self.namespace(node)])
    }

    /// Runs `program args...` inside `node`'s namespace.
    pub fn exec(&self, node: NodeId, program: &str, rest: &[String]) -> Result<(), CommandError> {
        let mut full = args(&["netns", "exec", &self.namespace(node), program]);
        full.extend(rest.iter().cloned());
        self.runner.run("ip", &full).map(|_| ())
    }

    pub fn setup(&self) -> Result<(), NetnsError> {
        self.teardown();
        let ip = |parts: &[&str]| self.runner.run("ip", &args(parts)).map(|_| ());
        let bridge = self.bridge();
        let bridge_cidr = format!("{}/24", self.bridge_ip());
        ip(&["link", "add", &bridge, "type", "bridge"])?;
        ip(&["addr", "add", &bridge_cidr, "dev", &bridge])?;
        ip(&["link", "set", &bridge, "up"])?;
        for &node in &self.nodes {
            let (ns, host, peer) = (
                self.namespace(node),
                self.host_veth(node),
                self.peer_veth(node),
            );
            let cidr = format!("{}/24", self.node_ip(node));
            ip(&["netns", "add", &ns])?;
            ip(&["link", "add", &host, "type", "veth", "peer", "name", &peer])?;
            ip(&["link", "set", &peer, "netns", &ns])?;
            ip(&["link", "set", &host, "master", &bridge])?;
            ip(&["link", "set", &host, "up"])?;
            ip(&["-n", &ns, "link", "set", &peer, "name", "eth0"])?;
            ip(&["-n", &ns, "link", "set", "lo", "up"])?;
            ip(&["-n", &ns, "link", "set", "eth0", "up"])?;
            ip(&["-n", &ns, "addr", "add", &cidr, "dev", "eth0"])?;
        }
        Ok(())
    }

    /// Removes everything this lab may have created; missing pieces are fine.
    pub fn teardown(&self) {
        for &node in &self.nodes {
            // Deleting the host end removes the pair at once; deleting the namespace alone
            // leaves the host end around until the kernel gets to it.
            self.runner
                .run_lenient("ip", &args(&["link", "del", &self.host_veth(node)]));
            self.runner
                .run_lenient("ip", &args(&["netns", "del", &self.namespace(node)]));
        }
        self.runner
            .run_lenient("ip", &args(&["link", "del", &self.bridge()]));
    }

    /// Tears the lab down when dropped (tests that panic still clean up).
    pub fn guard(&self) -> LabGuard<'_, R> {
        LabGuard(self)
    }
}

pub struct LabGuard<'a, R: CommandRunner>(&'a NetnsLab<R>);

impl<R: CommandRunner> Drop for LabGuard<'_, R> {
    fn drop(&mut self) {
        self.0.teardown();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nemesis::command::RecordingRunner;

    #[test]
    fn setup_tears_down_first_then_builds_bridge_and_one_namespace_per_node() {
        let lab = NetnsLab::new(RecordingRunner::new(), "syt", 7, vec![1, 2]).unwrap();
        lab.setup().unwrap();
        let commands = lab.runner().commands();
        assert_eq!(commands[0], "ip link del syth1", "leftovers removed first");
        assert!(commands.contains(&"ip link add sytbr type bridge".to_owned()));
        assert!(commands.contains(&"ip addr add 10.213.7.254/24 dev sytbr".to_owned()));
        assert!(commands.contains(&"ip netns add syt-n2".to_owned()));
        assert!(commands.contains(&"ip -n syt-n2 addr add 10.213.7.2/24 dev eth0".to_owned()));
        assert_eq!(lab.exec_prefix(1), vec!["ip", "netns", "exec", "syt-n1"]);
    }

    #[test]
    fn setup_reports_the_failing_command() {
        let runner = RecordingRunner::new().failing_on("netns add syt-n2");
        let lab = NetnsLab::new(runner, "syt", 7, vec![1, 2]).unwrap();
        let error = lab.setup().unwrap_err().to_string();
        assert!(error.contains("ip netns add syt-n2"), "{error}");
    }

    #[test]
    fn names_stay_within_interface_limits() {
        assert!(NetnsLab::new(RecordingRunner::new(), "toolongx", 1, vec![1]).is_err());
        assert!(NetnsLab::new(RecordingRunner::new(), "ok", 1, vec![0]).is_err());
        let lab = NetnsLab::new(RecordingRunner::new(), "abcdef", 1, vec![250]).unwrap();
        assert!(lab.host_veth(250).len() <= 15 && lab.bridge().len() <= 15);
    }
}
