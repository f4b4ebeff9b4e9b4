//! Which Pod addresses an entry may reach (`allowed_networks`). A Pod's
//! `status.podIP` is whatever was written into its status, so it is
//! judged like any other input: pure, the gateway's own addresses handed
//! in by the composition root, and [`interface_addresses`] the one edge
//! that asks the system.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use ipnet::IpNet;

/// Refused unless `allowed_networks` lists them: this machine (loopback)
/// and link-local, where cloud metadata services answer
/// (169.254.169.254).
pub const REFUSED_BY_DEFAULT: [(&str, &str); 4] = [
    ("127.0.0.0/8", "a loopback address"),
    ("::1/128", "a loopback address"),
    ("169.254.0.0/16", "a link-local address"),
    ("fe80::/10", "a link-local address"),
];

/// One network as `allowed_networks` takes it: `10.0.0.0/8`, or one
/// address (`10.0.0.5`, a network of one).
pub fn parse_network(text: &str) -> Result<IpNet, String> {
    let text = text.trim();
    text.parse::<IpNet>()
        .map(|net| net.trunc())
        .or_else(|_| text.parse::<IpAddr>().map(IpNet::from))
        .map_err(|_| {
            format!("\"{text}\" is not a network (a CIDR such as \"10.0.0.0/8\", or one address)")
        })
}

/// Whether a Pod at `ip` may be a target. With `allowed` networks: only
/// in one of them (listing a network allows even loopback there).
/// Without: anywhere but [`REFUSED_BY_DEFAULT`] and `gateway`, the
/// gateway's own addresses. `Err`: why not, for the log line.
pub fn admit(ip: IpAddr, allowed: Option<&[IpNet]>, gateway: &[IpAddr]) -> Result<(), String> {
    // `::ffff:127.0.0.1` is 127.0.0.1 to the socket that connects to it.
    let canonical = ip.to_canonical();
    if let Some(allowed) = allowed {
        return if allowed.iter().any(|net| net.contains(&canonical)) {
            Ok(())
        } else {
            Err(format!("status.podIP {ip} is not in allowed_networks"))
        };
    }
    let unless = "(refused unless allowed_networks lists it)";
    for (net, what) in REFUSED_BY_DEFAULT {
        let net: IpNet = net.parse().expect("a network");
        if net.contains(&canonical) {
            return Err(format!("status.podIP {ip} is {what} {unless}"));
        }
    }
    if gateway.iter().any(|own| own.to_canonical() == canonical) {
        return Err(format!(
            "status.podIP {ip} is one of the gateway's own addresses {unless}"
        ));
    }
    Ok(())
}

/// The addresses the gateway listens on, from its listeners' configured
/// addresses: each one's IP, and for one on every address (`0.0.0.0`,
/// `[::]`) the machine's own (`interfaces`, asked only then).
pub fn gateway_addresses(
    listeners: &[SocketAddr],
    interfaces: impl FnOnce() -> Vec<IpAddr>,
) -> Vec<IpAddr> {
    let mut own: Vec<IpAddr> = listeners
        .iter()
        .map(|l| l.ip())
        .filter(|ip| !ip.is_unspecified())
        .collect();
    if listeners.iter().any(|l| l.ip().is_unspecified()) {
        own.extend(interfaces());
    }
    own.sort();
    own.dedup();
    own
}

/// The addresses of this machine's network interfaces (getifaddrs(3)).
pub fn interface_addresses() -> Result<Vec<IpAddr>, String> {
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: on success getifaddrs points `list` at a linked list that
    // stays valid until freeifaddrs, called below once it has been read.
    if unsafe { libc::getifaddrs(&mut list) } != 0 {
        return Err(format!("getifaddrs: {}", std::io::Error::last_os_error()));
    }
    let mut addresses = Vec::new();
    let mut cursor = list;
    while !cursor.is_null() {
        // SAFETY: `cursor` is an entry of the list getifaddrs made; its
        // `ifa_addr`, when not null, is a sockaddr of the family it names.
        unsafe {
            let entry = &*cursor;
            let addr = entry.ifa_addr;
            if !addr.is_null() {
                match i32::from((*addr).sa_family) {
                    libc::AF_INET => {
                        let sin = &*(addr as *const libc::sockaddr_in);
                        addresses.push(IpAddr::V4(Ipv4Addr::from(u32::from_be(
                            sin.sin_addr.s_addr,
                        ))));
                    }
                    libc::AF_INET6 => {
                        let sin6 = &*(addr as *const libc::sockaddr_in6);
                        addresses.push(IpAddr::V6(Ipv6Addr::from(sin6.sin6_addr.s6_addr)));
                    }
                    _ => {}
                }
            }
            cursor = entry.ifa_next;
        }
    }
    // SAFETY: `list` came from getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(list) };
    Ok(addresses)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    fn nets(texts: &[&str]) -> Vec<IpNet> {
        texts.iter().map(|t| parse_network(t).unwrap()).collect()
    }

    #[test]
    fn by_default_this_machine_link_local_and_the_gateway_are_refused() {
        let gateway = [ip("10.0.0.9")];
        for (pod, why) in [
            ("127.0.0.1", "a loopback address"),
            ("127.1.0.5", "a loopback address"),
            ("::1", "a loopback address"),
            ("::ffff:127.0.0.1", "a loopback address"),
            ("169.254.169.254", "a link-local address"),
            ("::ffff:169.254.169.254", "a link-local address"),
            ("fe80::1", "a link-local address"),
            ("10.0.0.9", "the gateway's own addresses"),
            ("::ffff:10.0.0.9", "the gateway's own addresses"),
        ] {
            let err = admit(ip(pod), None, &gateway).unwrap_err();
            assert!(err.contains(why), "{pod}: {err}");
            assert!(err.starts_with("status.podIP "), "{err}");
            assert!(err.contains("unless allowed_networks lists it"), "{err}");
        }
        for pod in ["10.0.0.8", "192.168.1.1", "fd00::7", "100.64.0.1"] {
            admit(ip(pod), None, &gateway).unwrap_or_else(|e| panic!("{pod}: {e}"));
        }
    }

    #[test]
    fn listed_networks_are_the_only_ones_and_allow_what_they_list() {
        let allowed = nets(&["127.0.0.0/24", "10.1.0.0/16", "fd00::/8", "192.168.0.7"]);
        let gateway = [ip("127.0.0.1"), ip("10.1.0.1")];
        for pod in [
            "127.0.0.11",
            "127.0.0.1",
            "::ffff:127.0.0.12",
            "10.1.200.3",
            "10.1.0.1",
            "fd00::7",
            "192.168.0.7",
        ] {
            admit(ip(pod), Some(&allowed), &gateway).unwrap_or_else(|e| panic!("{pod}: {e}"));
        }
        for pod in [
            "127.1.0.5",
            "10.2.0.1",
            "169.254.169.254",
            "::1",
            "fe80::1",
            "192.168.0.8",
        ] {
            let err = admit(ip(pod), Some(&allowed), &gateway).unwrap_err();
            assert_eq!(
                err,
                format!("status.podIP {pod} is not in allowed_networks")
            );
        }
        // An empty list allows nothing (the check refuses it in a file).
        assert!(admit(ip("10.1.0.2"), Some(&[]), &[]).is_err());
    }

    #[test]
    fn networks_parse_as_cidrs_or_single_addresses() {
        assert_eq!(
            parse_network("10.0.0.0/8").unwrap().to_string(),
            "10.0.0.0/8"
        );
        // Host bits are dropped: 10.1.2.3/8 is the network 10.0.0.0/8.
        assert_eq!(
            parse_network(" 10.1.2.3/8 ").unwrap().to_string(),
            "10.0.0.0/8"
        );
        assert_eq!(
            parse_network("10.0.0.5").unwrap().to_string(),
            "10.0.0.5/32"
        );
        assert_eq!(parse_network("fd00::/8").unwrap().to_string(), "fd00::/8");
        for bad in [
            "10.0.0.0/33",
            "10.0.0",
            "pods",
            "",
            "10.0.0.0/8,10.1.0.0/16",
        ] {
            let err = parse_network(bad).unwrap_err();
            assert!(err.contains("is not a network"), "{bad}: {err}");
        }
    }

    #[test]
    fn the_gateways_addresses_are_its_listeners_or_the_machines() {
        let listeners: Vec<SocketAddr> = vec![
            "10.0.0.9:8080".parse().unwrap(),
            "127.0.0.1:9090".parse().unwrap(),
        ];
        let asked = std::cell::Cell::new(false);
        let own = gateway_addresses(&listeners, || {
            asked.set(true);
            vec![]
        });
        assert_eq!(own, [ip("10.0.0.9"), ip("127.0.0.1")]);
        assert!(!asked.get(), "no listener on every address: no need to ask");
        let listeners: Vec<SocketAddr> = vec![
            "0.0.0.0:8080".parse().unwrap(),
            "10.0.0.9:9090".parse().unwrap(),
        ];
        let own = gateway_addresses(&listeners, || vec![ip("10.0.0.9"), ip("10.0.0.10")]);
        assert_eq!(own, [ip("10.0.0.9"), ip("10.0.0.10")]);
    }

    #[test]
    fn the_machines_interfaces_include_loopback() {
        let addresses = interface_addresses().unwrap();
        assert!(addresses.contains(&ip("127.0.0.1")), "{addresses:?}");
    }
}
