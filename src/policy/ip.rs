//! `<remote>`: Jolokia's `NetworkChecker` (HEAD semantics: every entry of
//! the chain must be allowed) and `IpChecker`, without ever resolving a
//! host name.

use std::collections::HashSet;
use std::net::{Ipv4Addr, Ipv6Addr};

use super::Decision;

const MASKS: [u8; 8] = [0x00, 0x80, 0xc0, 0xe0, 0xf0, 0xf8, 0xfc, 0xfe];

/// An address as `java.net.InetAddress.getByName` sees a literal: an
/// IPv4-mapped IPv6 address becomes IPv4.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Addr {
    V4([u8; 4]),
    V6([u8; 16]),
}

impl Addr {
    fn bytes(&self) -> &[u8] {
        match self {
            Addr::V4(b) => b,
            Addr::V6(b) => b,
        }
    }
}

/// Jolokia's `IpChecker.matches(expected, toCheck)`: is `to_check` equal
/// to `expected`, or inside it when `expected` is a subnet (`/bits`, or
/// `/a.b.c.d` for IPv4)? `Err` where Jolokia throws (malformed input).
///
/// Differences: literals only (Jolokia would resolve a host name in the
/// IPv6 branch), and an address never matches a subnet of the other
/// family (Jolokia compares raw bytes and can match, or throw).
pub fn matches(expected: &str, to_check: &str) -> Result<bool, String> {
    let ipv6 = (to_check.starts_with('[') && to_check.ends_with(']')) || to_check.contains(':');
    if ipv6 || expected.contains(':') {
        return Ok(expected.contains(':') && matches_ipv6(expected, to_check)?);
    }
    let bad_spec = || format!("Invalid IP address specification {expected}");
    match expected.split_once('/') {
        None => {
            int_tuple(expected)?;
            int_tuple(to_check)?;
            Ok(expected == to_check)
        }
        Some((address, mask)) => {
            let check = int_tuple(to_check)?;
            let pattern = int_tuple(address)?;
            let mask = if mask.encode_utf16().count() <= 2 {
                let bits = java_parse_int(mask)
                    .filter(|b| (0..=32).contains(b))
                    .ok_or_else(|| format!("Invalid netmask specification {mask}"))?;
                let m = if bits == 0 {
                    0
                } else {
                    u32::MAX << (32 - bits)
                };
                m.to_be_bytes().map(u32::from)
            } else {
                int_tuple(mask).map_err(|_| bad_spec())?
            };
            Ok((0..4).all(|i| pattern[i] & mask[i] == check[i] & mask[i]))
        }
    }
}

fn matches_ipv6(expected: &str, to_check: &str) -> Result<bool, String> {
    let bad_spec = || format!("Invalid IP address specification {expected}");
    match expected.split_once('/') {
        None => {
            let e = inet_literal(expected).map_err(|_| bad_spec())?;
            let c = inet_literal(to_check)?;
            Ok(e == c)
        }
        Some((address, prefix)) => {
            let prefix = java_parse_int(prefix)
                .filter(|p| (0..=128).contains(p))
                .ok_or_else(bad_spec)? as usize;
            let e = inet_literal(address).map_err(|_| bad_spec())?;
            let c = inet_literal(to_check)?;
            let (e, c) = (e.bytes(), c.bytes());
            if e.len() != c.len() {
                return Ok(false);
            }
            let (div, rem) = (prefix / 8, prefix % 8);
            let too_long = || format!("Prefix /{prefix} is longer than the address in {expected}");
            for i in 0..div {
                if i >= e.len() {
                    return Err(too_long());
                }
                if e[i] != c[i] {
                    return Ok(false);
                }
            }
            if rem == 0 {
                return Ok(true);
            }
            if div >= e.len() {
                return Err(too_long());
            }
            Ok(e[div] & MASKS[rem] == c[div] & MASKS[rem])
        }
    }
}

/// `IpChecker.convertToIntTuple`: exactly four dot-separated ints 0..=255
/// (Java's `split("\\.")` drops trailing empty parts, `parseInt` takes a sign).
fn int_tuple(address: &str) -> Result<[u32; 4], String> {
    let bad = || format!("Invalid IP address {address}");
    let mut parts: Vec<&str> = address.split('.').collect();
    while parts.last() == Some(&"") {
        parts.pop();
    }
    if parts.len() != 4 {
        return Err(bad());
    }
    let mut out = [0u32; 4];
    for (slot, part) in out.iter_mut().zip(parts) {
        *slot = java_parse_int(part)
            .filter(|v| (0..=255).contains(v))
            .ok_or_else(bad)? as u32;
    }
    Ok(out)
}

/// `Integer.parseInt` for ASCII digits: optional sign, then digits, in range.
fn java_parse_int(s: &str) -> Option<i64> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let v: i64 = s.parse().ok()?;
    (i64::from(i32::MIN)..=i64::from(i32::MAX))
        .contains(&v)
        .then_some(v)
}

/// An IP literal as `InetAddress.getByName` parses it, never resolving:
/// `[v6]`, `v6` (optionally `%<numeric scope>`, dropped), dotted IPv4.
fn inet_literal(s: &str) -> Result<Addr, String> {
    let bad = || format!("\"{s}\" is not an IP address literal (host names are never resolved)");
    if let Some(inner) = s.strip_prefix('[') {
        let inner = inner
            .strip_suffix(']')
            .filter(|i| i.contains(':'))
            .ok_or_else(bad)?;
        return ipv6_literal(inner).ok_or_else(bad);
    }
    if s.contains(':') {
        return ipv6_literal(s).ok_or_else(bad);
    }
    s.parse::<Ipv4Addr>()
        .map(|a| Addr::V4(a.octets()))
        .map_err(|_| bad())
}

fn ipv6_literal(s: &str) -> Option<Addr> {
    let address = match s.split_once('%') {
        Some((address, scope))
            if !scope.is_empty() && scope.bytes().all(|b| b.is_ascii_digit()) =>
        {
            address
        }
        Some(_) => return None,
        None => s,
    };
    let ip: Ipv6Addr = address.parse().ok()?;
    Some(match ip.to_ipv4_mapped() {
        Some(v4) => Addr::V4(v4.octets()),
        None => Addr::V6(ip.octets()),
    })
}

/// `^[\d.]+$`
fn ip4_chars(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit() || b == b'.')
}

/// `^[\da-fA-F:]+$`
fn ip6_chars(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_hexdigit() || b == b':')
}

/// `^[\d.]+/[\d.]+$` or `^[\da-fA-F:]+/[\d.]+$`
fn is_subnet_spec(s: &str) -> bool {
    match s.split_once('/') {
        Some((address, mask)) => (ip4_chars(address) || ip6_chars(address)) && ip4_chars(mask),
        None => false,
    }
}

/// A compiled `<remote>` section.
#[derive(Debug, Clone, Default)]
pub(crate) struct Remote {
    /// Host names and IPv4 literals, lower-cased, compared as strings.
    hosts: HashSet<String>,
    /// IPv6 literals, compared as addresses, with the entry as written.
    ipv6: Vec<([u8; 16], String)>,
    /// Subnets (validated at load time), as `IpChecker` takes them.
    subnets: Vec<String>,
}

impl Remote {
    /// Adds one `<host>` entry (its text content).
    pub fn add_host(&mut self, text: &str) -> Result<(), String> {
        let mut host = super::xml::java_trim(text).to_lowercase();
        if host.starts_with('[') && host.ends_with(']') && host.len() >= 2 {
            host = host[1..host.len() - 1].to_string();
        }
        if is_subnet_spec(&host) {
            let invalid = |why: String| format!("Invalid <host> subnet \"{host}\": {why}");
            if host.contains(':') {
                let (address, _) = host.split_once('/').unwrap_or((&host, ""));
                match inet_literal(address) {
                    Ok(Addr::V6(_)) => {}
                    Ok(Addr::V4(_)) => {
                        return Err(invalid("an IPv4-mapped subnet can never match".into()))
                    }
                    Err(e) => return Err(invalid(e)),
                }
                matches(&host, "::").map_err(invalid)?;
            } else {
                matches(&host, "0.0.0.0").map_err(invalid)?;
            }
            self.subnets.push(host);
        } else if host.contains(':') {
            match inet_literal(&host) {
                Ok(Addr::V6(bytes)) => self.ipv6.push((bytes, host)),
                Ok(Addr::V4(_)) => {
                    return Err(format!(
                        "Invalid IPv6 address \"{host}\": an IPv4-mapped address (Jolokia fails to load it)"
                    ))
                }
                Err(_) => return Err(format!("Invalid IPv6 address \"{host}\"")),
            }
        } else {
            if ip4_chars(&host) {
                int_tuple(&host).map_err(|_| format!("Invalid IPv4 address \"{host}\""))?;
            }
            self.hosts.insert(host);
        }
        Ok(())
    }

    /// HEAD `NetworkChecker.check`: every entry must be allowed; an empty
    /// chain is not.
    pub fn check(&self, chain: &[&str]) -> Decision {
        if chain.is_empty() {
            return Decision::deny("<remote> is present but the client address is unknown");
        }
        let mut why = Vec::with_capacity(chain.len());
        for addr in chain {
            match self.allowed_by(addr) {
                Ok(rule) => why.push(rule),
                Err(rule) => return Decision::deny(rule),
            }
        }
        if why.len() == 1 {
            Decision::allow(why.pop().unwrap_or_default())
        } else {
            Decision::allow(format!(
                "<remote> allows every address of the chain ({})",
                why.join("; ")
            ))
        }
    }

    fn allowed_by(&self, addr: &str) -> Result<String, String> {
        let no_match = || {
            format!("<remote> has no <host> matching \"{addr}\" (host names are compared literally, never resolved)")
        };
        // 1. host names and IPv4 literals, as strings
        if self.hosts.contains(addr) {
            return Ok(format!("<remote> <host> {addr}"));
        }
        // 2. IPv6 addresses, as addresses (scope dropped)
        let literal = inet_literal(addr).map_err(|_| no_match())?;
        let bare = match addr.split_once('%') {
            Some((bare, _)) if !addr.starts_with('[') => bare,
            _ => addr,
        };
        if let Addr::V6(bytes) = literal {
            if let Some((_, written)) = self.ipv6.iter().find(|(b, _)| *b == bytes) {
                return Ok(format!("<remote> <host> {written} ({addr})"));
            }
        }
        // 3. subnets, for plain IPv4/IPv6 literals
        if !self.subnets.is_empty() && (ip4_chars(bare) || ip6_chars(bare)) {
            let mut hit = None;
            for subnet in &self.subnets {
                match matches(subnet, bare) {
                    Ok(true) => hit = hit.or(Some(subnet)),
                    Ok(false) => {}
                    Err(e) => {
                        return Err(format!(
                            "<remote> cannot check \"{addr}\" against <host> {subnet}: {e}"
                        ))
                    }
                }
            }
            if let Some(subnet) = hit {
                return Ok(format!("<remote> <host> {subnet} ({addr})"));
            }
        }
        Err(no_match())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv4_subnets_and_masks() {
        assert_eq!(matches("10.0.0.1/16", "10.0.15.16"), Ok(true));
        assert_eq!(matches("10.0.0.1/24", "10.0.15.16"), Ok(false));
        assert_eq!(matches("10.0.0.1/255.255.0.0", "10.0.15.16"), Ok(true));
        assert_eq!(matches("10.0.0.1/0", "99.1.1.1"), Ok(true));
        assert_eq!(matches("10.0.0.1/32", "10.0.0.1"), Ok(true));
        assert_eq!(matches("10.0.0.1/08", "10.9.9.9"), Ok(true));
        // plain addresses are compared as strings once both are valid
        assert_eq!(matches("10.0.0.1", "10.0.0.01"), Ok(false));
        assert_eq!(matches("10.0.0.1", "10.0.0.1."), Ok(false));
        assert!(matches("10.0.0.1/", "10.0.0.1").is_err());
        assert!(matches("10.0.0.1/33", "10.0.0.1").is_err());
        // v4 expected, v6 checked (and back): no match
        assert_eq!(matches("10.0.0.1/8", "::1"), Ok(false));
    }

    #[test]
    fn ipv6_prefixes() {
        assert_eq!(matches("2001:db8::/32", "2001:db8:ffff::1"), Ok(true));
        assert_eq!(matches("2001:db8::/33", "2001:db8:8000::1"), Ok(false));
        assert_eq!(matches("2001:db8::/0", "::1"), Ok(true));
        assert_eq!(matches("::1", "0:0:0:0:0:0:0:1"), Ok(true));
        assert_eq!(matches("[::1]", "[::1]"), Ok(true));
        assert_eq!(matches("fe80::1", "fe80::1%3"), Ok(true));
        // IPv4 never matches an IPv6 subnet (Jolokia compares raw bytes)
        assert_eq!(matches("2001:db8::/32", "32.1.13.184"), Ok(false));
        assert!(matches("2001:db8::1", "localhost").is_err());
        assert!(matches("2001:db8::/x", "::1").is_err());
    }

    fn remote(hosts: &[&str]) -> Remote {
        let mut r = Remote::default();
        for h in hosts {
            r.add_host(h).unwrap();
        }
        r
    }

    #[test]
    fn remote_chain_rules() {
        let r = remote(&["Planck", "10.0.0.0/8", "[::1]", "127.0.0.1", "fe80::1"]);
        assert!(r.check(&["planck"]).allowed);
        assert!(!r.check(&["PLANCK"]).allowed);
        assert!(r.check(&["10.200.3.4"]).allowed);
        assert!(r.check(&["::1"]).allowed);
        assert!(r.check(&["[0:0:0:0:0:0:0:1]"]).allowed);
        assert!(r.check(&["fe80::1%2"]).allowed);
        assert!(!r.check(&["fe80::1%eth0"]).allowed);
        assert!(!r.check(&["::ffff:10.1.2.3"]).allowed);
        assert!(!r.check(&["localhost"]).allowed);
        assert!(!r.check(&["10.1"]).allowed);
        assert!(r.check(&["127.0.0.1", "10.1.1.1"]).allowed);
        assert!(!r.check(&["127.0.0.1", "11.1.1.1"]).allowed);
        assert!(!r.check(&[]).allowed);
        let d = r.check(&["8.8.8.8"]);
        assert!(d.rule.contains("8.8.8.8"), "{}", d.rule);
    }

    #[test]
    fn bad_host_entries_fail_to_load() {
        for bad in [
            "10.0.0.1/33",
            "10.0.0.1/255.255.255.255.255",
            "10.0.0.256",
            "1.2.3",
            "2001:db8::/129",
            "2001:db8::/1.2",
            "2001:db8:0:0:0:0:0:1:8",
            "::ffff:1.2.3.4",
            "fe80::1%eth0",
        ] {
            assert!(Remote::default().add_host(bad).is_err(), "{bad}");
        }
    }
}
