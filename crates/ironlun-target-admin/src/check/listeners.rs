//! The addresses the daemon listens on: portals (`listen`), the
//! statistics endpoint (`stats`) and the HTTP management API
//! (`admin_http`). Two of them on one address cannot both bind (an
//! error); an address something already listens on is a warning only,
//! since that something is often the daemon whose configuration is
//! being checked. Nothing is bound: what listens is read from
//! `/proc/net/tcp` and `/proc/net/tcp6`.

use std::io::Read;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use super::Finding;
use ironlun_target_config::Config;

/// The most of one `/proc/net/tcp*` file read (every socket of the
/// namespace is in it, about 150 bytes each); past it, what listens is
/// not known and nothing is said.
const PROC_NET_LIMIT: u64 = 16 << 20;

/// A TCP socket in LISTEN state, as `/proc/net/tcp` writes it.
const TCP_LISTEN: &str = "0A";

pub(super) fn check(cfg: &Config, out: &mut Vec<Finding>) {
    let all = listeners(cfg);
    let dual = dual_stack();
    for (i, (key, a)) in all.iter().enumerate() {
        for (other_key, b) in all.iter().skip(i + 1) {
            if clash(*a, *b, dual) {
                out.push(Finding::error(
                    format!("{key} {a}"),
                    two_on_one(*a, other_key, *b, dual),
                ));
            }
        }
    }
    let Some(listening) = listening_now() else {
        return;
    };
    for (key, a) in &all {
        if let Some(l) = listening.iter().find(|l| clash(*a, **l, dual)) {
            out.push(Finding::warning(
                format!("{key} {a}"),
                format!("something listens on {l} already (the daemon of this configuration, if it runs): a daemon started now could not listen there"),
            ));
        }
    }
}

/// Every address the daemon would listen on, with the key that names it.
fn listeners(cfg: &Config) -> Vec<(&'static str, SocketAddr)> {
    let mut all: Vec<(&'static str, SocketAddr)> =
        cfg.listen.iter().map(|a| ("listen", *a)).collect();
    if let Some(s) = cfg.stats {
        all.push(("stats", s));
    }
    if let Some(h) = &cfg.admin_http {
        all.push(("admin_http", h.addr));
    }
    all
}

/// Why listening on `a` and on `b` (of `other_key`) clash.
fn two_on_one(a: SocketAddr, other_key: &str, b: SocketAddr, dual: bool) -> String {
    const FAILS: &str = "two listeners on one address (the second would fail: address in use)";
    if a.ip().to_canonical() == b.ip().to_canonical() {
        return format!("{other_key} is {b} too: {FAILS}");
    }
    let (wild, other) = if covers(a.ip(), b.ip().to_canonical(), dual) {
        (a, b)
    } else {
        (b, a)
    };
    if wild.is_ipv6() && other.ip().to_canonical().is_ipv4() {
        return format!("{other_key} {b} is on the same port, and {wild} takes IPv4 connections too (net.ipv6.bindv6only is 0): {FAILS}; list {wild} alone for every address");
    }
    format!("{other_key} {b} is on the same port, and {wild} takes every address: {FAILS}")
}

/// Whether listening on `a` and on `b` conflict: the same port (not 0,
/// which the kernel chooses) and the same address, or one of them the
/// wildcard of the other's family; an IPv6 wildcard takes IPv4 too when
/// sockets are `dual` stack (net.ipv6.bindv6only = 0, Linux's default,
/// which the daemon keeps).
pub(crate) fn clash(a: SocketAddr, b: SocketAddr, dual: bool) -> bool {
    if a.port() != b.port() || a.port() == 0 {
        return false;
    }
    let (x, y) = (a.ip().to_canonical(), b.ip().to_canonical());
    x == y || covers(a.ip(), y, dual) || covers(b.ip(), x, dual)
}

/// Whether a socket bound to `wild` takes connections to `other`.
fn covers(wild: IpAddr, other: IpAddr, dual: bool) -> bool {
    match wild {
        IpAddr::V4(w) => w.is_unspecified() && other.is_ipv4(),
        IpAddr::V6(w) => w.is_unspecified() && (other.is_ipv6() || dual),
    }
}

/// Whether an IPv6 socket takes IPv4 too (net.ipv6.bindv6only is 0, or
/// cannot be read: the kernel's default).
fn dual_stack() -> bool {
    std::fs::read_to_string("/proc/sys/net/ipv6/bindv6only").map_or(true, |s| s.trim() == "0")
}

/// Addresses TCP sockets listen on now, in this network namespace;
/// `None` when that cannot be read.
fn listening_now() -> Option<Vec<SocketAddr>> {
    let mut all = Vec::new();
    for (file, v6) in [("/proc/net/tcp", false), ("/proc/net/tcp6", true)] {
        let mut text = String::new();
        let f = std::fs::File::open(file).ok()?;
        f.take(PROC_NET_LIMIT + 1).read_to_string(&mut text).ok()?;
        if text.len() as u64 > PROC_NET_LIMIT {
            return None;
        }
        all.extend(listening_in(&text, v6));
    }
    Some(all)
}

/// The local addresses of the LISTEN sockets in `/proc/net/tcp` (or,
/// `v6`, tcp6) text: `0100007F:0CBC` is 127.0.0.1:3260 (the address is
/// the kernel's 32-bit words in this machine's byte order, in hex).
pub(crate) fn listening_in(text: &str, v6: bool) -> Vec<SocketAddr> {
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let mut f = line.split_whitespace().skip(1);
            let local = f.next()?;
            if f.nth(1)? != TCP_LISTEN {
                return None;
            }
            let (ip, port) = local.split_once(':')?;
            let port = u16::from_str_radix(port, 16).ok()?;
            let ip = if v6 { ipv6(ip)? } else { IpAddr::V4(ipv4(ip)?) };
            Some(SocketAddr::new(ip, port))
        })
        .collect()
}

fn word(hex: &str) -> Option<[u8; 4]> {
    Some(u32::from_str_radix(hex, 16).ok()?.to_ne_bytes())
}

fn ipv4(hex: &str) -> Option<Ipv4Addr> {
    if hex.len() != 8 {
        return None;
    }
    word(hex).map(Ipv4Addr::from)
}

fn ipv6(hex: &str) -> Option<IpAddr> {
    if hex.len() != 32 {
        return None;
    }
    let mut bytes = [0u8; 16];
    for (i, chunk) in bytes.chunks_mut(4).enumerate() {
        chunk.copy_from_slice(&word(hex.get(i * 8..i * 8 + 8)?)?);
    }
    Some(IpAddr::V6(Ipv6Addr::from(bytes)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn listeners_clash_on_one_address_or_a_wildcard_of_theirs() {
        let clashes = [
            ("127.0.0.1:3260", "127.0.0.1:3260", true),
            ("0.0.0.0:3260", "127.0.0.1:3260", true),
            ("[::]:3260", "[::1]:3260", true),
            ("[::ffff:127.0.0.1]:3260", "127.0.0.1:3260", true),
        ];
        for (x, y, dual) in clashes {
            assert!(clash(a(x), a(y), dual), "{x} {y}");
            assert!(clash(a(y), a(x), dual), "{y} {x}");
        }
        // [::] takes IPv4 too only on dual-stack sockets.
        assert!(clash(a("[::]:3260"), a("0.0.0.0:3260"), true));
        assert!(clash(a("127.0.0.1:3260"), a("[::]:3260"), true));
        assert!(!clash(a("[::]:3260"), a("0.0.0.0:3260"), false));
        let apart = [
            ("127.0.0.1:3260", "127.0.0.1:3261"),
            ("127.0.0.1:3260", "127.0.0.2:3260"),
            ("0.0.0.0:3260", "[::1]:3260"),
            ("127.0.0.1:0", "127.0.0.1:0"),
            ("[::1]:3260", "127.0.0.1:3260"),
        ];
        for (x, y) in apart {
            assert!(!clash(a(x), a(y), true), "{x} {y}");
        }
    }

    #[test]
    fn proc_net_tcp_gives_the_listening_addresses() {
        let lo = u32::from_ne_bytes([127, 0, 0, 1]);
        let any = 0u32;
        let tcp = format!(
            "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
             \x20  0: {lo:08X}:0CBC 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0 100 0 0 10 0\n\
             \x20  1: {any:08X}:2382 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 2 1 0 100 0 0 10 0\n\
             \x20  2: {lo:08X}:9C40 {lo:08X}:0CBC 01 00000000:00000000 00:00000000 00000000     0        0 3 1 0 100 0 0 10 0\n\
             junk\n"
        );
        assert_eq!(
            listening_in(&tcp, false),
            [a("127.0.0.1:3260"), a("0.0.0.0:9090")]
        );
        let one = u32::from_ne_bytes([0, 0, 0, 1]);
        let tcp6 = format!(
            "  sl  local_address                         remote_address                        st\n\
             \x20  0: 000000000000000000000000{one:08X}:0CBC 00000000000000000000000000000000:0000 0A 0\n\
             \x20  1: 00000000000000000000000000000000:0CBD 00000000000000000000000000000000:0000 0A 0\n"
        );
        assert_eq!(listening_in(&tcp6, true), [a("[::1]:3260"), a("[::]:3261")]);
    }

    /// What this process listens on shows up as the kernel has it.
    #[test]
    fn a_socket_of_this_process_is_seen_listening() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let now = listening_now().expect("/proc/net/tcp is readable");
        assert!(now.contains(&addr), "{addr} in {now:?}");
        drop(l);
    }
}
