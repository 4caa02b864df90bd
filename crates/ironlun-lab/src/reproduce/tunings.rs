//! The RAM-disk study's three tuning scenarios (section 2; its appendix
//! on software and registry settings) as ironlun settings: the iSCSI
//! lengths each side offers, and the TCP stack's behaviour beyond the
//! window (delayed ACK, SACK, timestamps, window scaling, receive-buffer
//! autotuning, congestion control) applied to a network namespace of the
//! scenario's own.
//!
//! The study set its TCP registry values on both servers; here both ends
//! (initiator, relay and target, all in this process) talk over the
//! loopback of one namespace, so one set of per-namespace sysctls is seen
//! by both, as the study's two servers saw theirs. The namespace's
//! loopback keeps its own MTU: set to the study's 1500, it stalled
//! commands at queue depth 1 (64 KiB sequential reads at 9.8 MB/s
//! against 77.7 with the loopback's MTU, one run each), an artefact of
//! TCP seeing a loopback's microsecond round trip while the relay holds
//! data for the emulated link; the link's framing is the relay's and
//! the fitted testbed's to model (docs/studies.md). Delayed ACK is
//! turned off namespace-wide with the `quickack` route attribute (what
//! `TCP_QUICKACK` does per socket), so the relay's sockets follow it too.
//!
//! What a scenario is ([`scenarios`], [`Scenario::cell`],
//! [`TcpTuning::sysctls`], [`TcpTuning::ip_commands`]) is plain data and
//! tested without sockets; [`enter`] is the one place that changes a
//! namespace.

use std::process::Command;

use crate::cell::Cell;

/// The iSCSI lengths both sides offer or declare (RFC 7143 §13.12,
/// §13.13, §13.14).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IscsiTuning {
    pub first_burst: u32,
    pub max_burst: u32,
    /// Declared by the initiator (Data-In) and by the target (Data-Out).
    pub max_recv_dsl: u32,
}

/// The TCP stack of a scenario.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpTuning {
    pub delayed_ack: bool,
    pub sack: bool,
    pub timestamps: bool,
    pub window_scaling: bool,
    /// A fixed window (socket buffers, carried by the relay) with
    /// receive-buffer autotuning off; `None`: autotuned.
    pub window: Option<u32>,
    /// `net.ipv4.tcp_congestion_control`; `None`: the kernel's default
    /// is kept (and reported).
    pub congestion: Option<&'static str>,
}

/// One tuning scenario.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scenario {
    /// The name the published values use ("notweaks", ...).
    pub key: &'static str,
    /// The title of its workload set (`observe::scenario` reads it).
    pub title: &'static str,
    pub iscsi: IscsiTuning,
    pub tcp: TcpTuning,
}

/// The untuned iSCSI lengths. The study's text does not print them (its
/// screenshot of the defaults is not in the text; it says they could be
/// lowered but not raised in the GUI); the Microsoft initiator's and
/// target's documented defaults are taken: FirstBurstLength 64 KiB,
/// MaxBurstLength 256 KiB, MaxRecvDataSegmentLength 64 KiB (ironlun's
/// assumption, said in the notes).
const DEFAULT_ISCSI: IscsiTuning = IscsiTuning {
    first_burst: 65_536,
    max_burst: 262_144,
    max_recv_dsl: 65_536,
};

/// The study's iSCSI settings: FirstBurstLength and MaxRecvDataSegmentLength
/// 256 KiB, MaxBurstLength 512 KiB on the target and the initiator.
const TWEAKED_ISCSI: IscsiTuning = IscsiTuning {
    first_burst: 262_144,
    max_burst: 524_288,
    max_recv_dsl: 262_144,
};

/// A Windows Server 2008 R2 stack as installed: delayed ACK on (two
/// segments per ACK), SACK on, RFC 1323 window scaling on and timestamps
/// off, the window autotuned. Its default congestion provider (CTCP) has
/// no mainline Linux counterpart: the kernel's default stands in (a
/// namespace may only choose from the host's allowed list).
const DEFAULT_TCP: TcpTuning = TcpTuning {
    delayed_ack: true,
    sack: true,
    timestamps: false,
    window_scaling: true,
    window: None,
    congestion: None,
};

/// The study's TCP settings: an ACK for every segment (TcpAckFrequency
/// 1, TcpDelAckTicks 1), a 512 KiB window (TcpWindowSize,
/// GlobalMaxTcpWindowSize) with autotuning disabled, window scaling and
/// timestamps on (Tcp1323Opts 3), SACK on (SackOpts 1), congestion
/// provider none (standard Reno).
const TWEAKED_TCP: TcpTuning = TcpTuning {
    delayed_ack: false,
    sack: true,
    timestamps: true,
    window_scaling: true,
    window: Some(524_288),
    congestion: Some("reno"),
};

/// The three scenarios in the study's order: each differs from the one
/// before in one stack only (iSCSI, then TCP).
pub fn scenarios() -> [Scenario; 3] {
    [
        Scenario {
            key: "notweaks",
            title: "notweaks: defaults",
            iscsi: DEFAULT_ISCSI,
            tcp: DEFAULT_TCP,
        },
        Scenario {
            key: "iscsi-tweaks",
            title: "iSCSI tweaks: FirstBurstLength 256 KiB, MaxRecvDataSegmentLength 256 KiB, MaxBurstLength 512 KiB",
            iscsi: TWEAKED_ISCSI,
            tcp: DEFAULT_TCP,
        },
        Scenario {
            key: "tcp-iscsi-tweaks",
            title: "TCP + iSCSI tweaks: the above plus a 512 KiB TCP window, no delayed ACK, timestamps on, Reno",
            iscsi: TWEAKED_ISCSI,
            tcp: TWEAKED_TCP,
        },
    ]
}

fn on_off(b: bool) -> &'static str {
    if b {
        "on"
    } else {
        "off"
    }
}

impl Scenario {
    /// `base` (the link) with this scenario's offers and window.
    pub fn cell(&self, base: &Cell) -> Cell {
        Cell {
            first_burst: Some(self.iscsi.first_burst),
            max_burst: Some(self.iscsi.max_burst),
            max_recv_dsl: Some(self.iscsi.max_recv_dsl),
            tcp_window: self.tcp.window,
            ..base.clone()
        }
    }

    /// What the scenario sets, in one line.
    pub fn settings(&self) -> String {
        let i = &self.iscsi;
        let t = &self.tcp;
        format!(
            "iSCSI FirstBurstLength {} KiB, MaxBurstLength {} KiB, MaxRecvDataSegmentLength {} KiB (both sides); TCP delayed ACK {}, SACK {}, timestamps {}, window scaling {}, window {}, congestion control {}",
            i.first_burst >> 10,
            i.max_burst >> 10,
            i.max_recv_dsl >> 10,
            on_off(t.delayed_ack),
            on_off(t.sack),
            on_off(t.timestamps),
            on_off(t.window_scaling),
            t.window
                .map_or("autotuned".to_owned(), |w| format!("{} KiB fixed", w >> 10)),
            t.congestion.unwrap_or("the kernel's default"),
        )
    }
}

impl TcpTuning {
    /// The per-namespace sysctls (path under /proc/sys, value).
    pub fn sysctls(&self) -> Vec<(&'static str, String)> {
        let b = |v: bool| u8::from(v).to_string();
        let mut v = vec![
            ("net/ipv4/tcp_sack", b(self.sack)),
            ("net/ipv4/tcp_timestamps", b(self.timestamps)),
            ("net/ipv4/tcp_window_scaling", b(self.window_scaling)),
            ("net/ipv4/tcp_moderate_rcvbuf", b(self.window.is_none())),
        ];
        if let Some(c) = self.congestion {
            v.push(("net/ipv4/tcp_congestion_control", c.to_owned()));
        }
        v
    }

    /// `ip` commands for the namespace's loopback: up, and with delayed
    /// ACK off, `quickack` on the route to 127.0.0.1 (RTAX_QUICKACK;
    /// every socket over it ACKs at once).
    pub fn ip_commands(&self) -> Vec<Vec<String>> {
        let words = |s: &str| s.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
        let mut cmds = vec![words("link set lo up")];
        if !self.delayed_ack {
            cmds.push(words(
                "route replace local 127.0.0.1 dev lo table local proto kernel scope host src 127.0.0.1 quickack 1",
            ));
        }
        cmds
    }
}

/// What [`enter`] applied, and what it could not.
#[derive(Clone, Debug, Default)]
pub struct Applied {
    pub applied: Vec<String>,
    pub failed: Vec<String>,
}

impl Applied {
    /// The line printed for the scenario.
    pub fn line(&self, key: &str) -> String {
        if self.failed.is_empty() {
            format!(
                "{key}: applied in a network namespace of its own: {}",
                self.applied.join(", ")
            )
        } else {
            format!(
                "{key}: NOT all applied (these cells ran with the kernel's settings for what failed): failed: {}; applied: {}",
                self.failed.join("; "),
                if self.applied.is_empty() {
                    "nothing".to_owned()
                } else {
                    self.applied.join(", ")
                }
            )
        }
    }
}

/// Moves the calling thread into a new network namespace and applies
/// `tcp` there. Threads and processes it starts afterwards inherit the
/// namespace; other threads keep theirs. The namespace is made with
/// `ip netns add` (as scripts/ha-cluster makes its own), joined with
/// setns(2) and its name removed at once: it lives while this thread
/// and its sockets do. Without one (no privilege, no `ip`), nothing is
/// applied and every setting is reported as failed.
pub fn enter(key: &str, tcp: &TcpTuning) -> Applied {
    let mut a = Applied::default();
    if let Err(e) = join_new_namespace(key) {
        a.failed.push(format!(
            "a network namespace ({e}); none of the TCP settings"
        ));
        return a;
    }
    for args in tcp.ip_commands() {
        let what = format!("ip {}", args.join(" "));
        match ip(&args) {
            Ok(()) => a.applied.push(what),
            Err(e) => a.failed.push(format!("{what}: {e}")),
        }
    }
    for (path, value) in tcp.sysctls() {
        let name = path.replace('/', ".");
        // /proc/sys/net resolves in the writing thread's namespace.
        match std::fs::write(format!("/proc/sys/{path}"), &value) {
            Ok(()) => a.applied.push(format!("{name}={value}")),
            Err(e) => a.failed.push(format!("{name}={value}: {e}")),
        }
    }
    if tcp.congestion.is_none() {
        let path = "/proc/sys/net/ipv4/tcp_congestion_control";
        let kept = std::fs::read_to_string(path).unwrap_or_else(|e| format!("unknown ({e})"));
        a.applied.push(format!(
            "net.ipv4.tcp_congestion_control={} (the kernel's default, kept)",
            kept.trim()
        ));
    }
    a
}

fn ip<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Result<(), String> {
    let o = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| e.to_string())?;
    if o.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&o.stderr).trim().to_owned())
    }
}

fn join_new_namespace(key: &str) -> Result<(), String> {
    let name = format!("ironlun-tune-{}-{key}", std::process::id());
    let _ = ip(&["netns", "del", &name]);
    ip(&["netns", "add", &name]).map_err(|e| format!("ip netns add {name}: {e}"))?;
    let joined = std::fs::File::open(format!("/run/netns/{name}"))
        .map_err(|e| e.to_string())
        .and_then(|f| {
            rustix::thread::move_into_thread_name_spaces(
                std::os::fd::AsFd::as_fd(&f),
                rustix::thread::ThreadNameSpaceType::NETWORK,
            )
            .map_err(|e| format!("setns: {e}"))
        });
    // The name goes either way; a joined namespace lives on in this thread.
    let _ = ip(&["netns", "del", &name]);
    joined
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_scenario_differs_from_the_one_before_in_one_stack() {
        let [none, iscsi, both] = scenarios();
        assert_eq!(
            [none.key, iscsi.key, both.key],
            ["notweaks", "iscsi-tweaks", "tcp-iscsi-tweaks"]
        );
        // 1 -> 2: the iSCSI lengths only.
        assert_ne!(none.iscsi, iscsi.iscsi);
        assert_eq!(none.tcp, iscsi.tcp);
        // 2 -> 3: TCP only.
        assert_eq!(iscsi.iscsi, both.iscsi);
        assert_ne!(iscsi.tcp, both.tcp);
        // The study's values.
        assert_eq!(
            iscsi.iscsi,
            IscsiTuning {
                first_burst: 256 << 10,
                max_burst: 512 << 10,
                max_recv_dsl: 256 << 10
            }
        );
        assert!(!both.tcp.delayed_ack && both.tcp.timestamps && both.tcp.sack);
        assert_eq!(both.tcp.window, Some(512 << 10));
    }

    #[test]
    fn scenarios_one_and_two_are_different_cells() {
        let [none, iscsi, both] = scenarios();
        let base = Cell::default();
        let (c1, c2, c3) = (none.cell(&base), iscsi.cell(&base), both.cell(&base));
        assert_ne!(c1.connection_key(), c2.connection_key());
        assert_ne!(c2.connection_key(), c3.connection_key());
        assert_eq!(c1.offers().max_recv_data_segment_length, 64 << 10);
        assert_eq!(c2.offers().max_recv_data_segment_length, 256 << 10);
        assert_eq!(c2.offers().first_burst_length, 256 << 10);
        assert_eq!(c2.offers().max_burst_length, 512 << 10);
        assert_eq!(c1.tcp_window, None);
        assert_eq!(c3.tcp_window, Some(512 << 10));
        // The link is the base's.
        assert_eq!(c3.rtt, base.rtt);
    }

    #[test]
    fn sysctls_and_routes_follow_the_tcp_settings() {
        let [none, _, both] = scenarios();
        let get = |t: &TcpTuning, k: &str| {
            t.sysctls()
                .into_iter()
                .find(|(p, _)| p.ends_with(k))
                .map(|(_, v)| v)
                .unwrap()
        };
        assert_eq!(get(&none.tcp, "tcp_timestamps"), "0");
        assert_eq!(get(&both.tcp, "tcp_timestamps"), "1");
        assert_eq!(get(&none.tcp, "tcp_sack"), "1");
        assert_eq!(get(&none.tcp, "tcp_window_scaling"), "1");
        assert_eq!(get(&none.tcp, "tcp_moderate_rcvbuf"), "1");
        assert_eq!(get(&both.tcp, "tcp_moderate_rcvbuf"), "0");
        assert_eq!(get(&both.tcp, "tcp_congestion_control"), "reno");
        // Untuned, the congestion control is the kernel's, not set.
        assert!(!none
            .tcp
            .sysctls()
            .iter()
            .any(|(p, _)| p.ends_with("tcp_congestion_control")));
        // Delayed ACK off is a quickack route; on, the loopback only.
        assert_eq!(none.tcp.ip_commands().len(), 1);
        let cmds = both.tcp.ip_commands();
        assert!(cmds.iter().any(|c| c.join(" ").ends_with("quickack 1")));
        assert_eq!(cmds.first().unwrap().join(" "), "link set lo up");
    }

    #[test]
    fn a_setting_not_applied_is_said() {
        let a = Applied {
            applied: vec!["net.ipv4.tcp_sack=1".into()],
            failed: vec!["net.ipv4.tcp_timestamps=0: permission denied".into()],
        };
        let l = a.line("notweaks");
        assert!(l.contains("NOT all applied"), "{l}");
        assert!(l.contains("tcp_timestamps"), "{l}");
        let ok = Applied {
            applied: vec!["net.ipv4.tcp_sack=1".into()],
            failed: Vec::new(),
        };
        assert!(!ok.line("notweaks").contains("NOT"));
        let s = scenarios()[2].settings();
        assert!(
            s.contains("delayed ACK off") && s.contains("512 KiB fixed"),
            "{s}"
        );
    }
}
