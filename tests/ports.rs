//! Loopback ports for servers a test starts that take their port on the
//! command line (PostgreSQL, HAProxy, Prometheus, the reference server).
//!
//! A port found by binding `127.0.0.1:0` comes from the kernel's ephemeral
//! range, the range every outgoing connection and every other `:0` bind
//! draws from too: between the check and the server's own bind another
//! test took one (PostgreSQL failed with "Address already in use" in CI).
//! These ports lie below that range, so nothing the kernel hands out can
//! take them, and each is handed out once per process.

use std::net::TcpListener;
use std::sync::atomic::{AtomicU32, Ordering};

/// Below the first port the kernel hands out (32768 unless the machine says
/// otherwise), above the well-known ones.
fn range() -> (u32, u32) {
    let ephemeral_start = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|text| text.split_whitespace().next()?.parse::<u32>().ok())
        .unwrap_or(32_768);
    let last = ephemeral_start.max(2_048);
    (last / 2, last)
}

static HANDED_OUT: AtomicU32 = AtomicU32::new(0);

/// A loopback port nothing listens on, which no other call in this process
/// returns. Processes start at different places in the range (by their
/// id), so a bench and a test running side by side rarely meet; when they
/// do, the bind check sees it.
pub fn unused_port() -> u16 {
    let (first, last) = range();
    let span = last - first;
    let start = std::process::id().wrapping_mul(7_919) % span;
    for _ in 0..span {
        let n = HANDED_OUT.fetch_add(1, Ordering::Relaxed);
        let port = u16::try_from(first + (start + n) % span).unwrap();
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no unused loopback port in {first}..{last}");
}

#[test]
fn ports_handed_out_are_unused_distinct_and_below_the_ephemeral_range() {
    let (_, last) = range();
    let ports: Vec<u16> = (0..50).map(|_| unused_port()).collect();
    let distinct: std::collections::BTreeSet<u16> = ports.iter().copied().collect();
    assert_eq!(distinct.len(), ports.len(), "{ports:?}");
    for port in ports {
        assert!(u32::from(port) < last, "{port}");
        TcpListener::bind(("127.0.0.1", port)).unwrap();
    }
}
