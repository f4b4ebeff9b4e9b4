//! Random ids from the system's random source, as lower-case hex: request
//! ids, form tokens, a process's instance, a health book's incarnation.

/// `bytes` random bytes as `2 * bytes` hex digits. Panics only when the
/// system has no random source, which nothing here can work without.
pub fn hex(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    getrandom::getrandom(&mut buf).expect("the system's random source");
    buf.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn ids_are_hex_of_the_length_asked_and_differ() {
        let (a, b) = (super::hex(8), super::hex(8));
        assert_eq!(a.len(), 16);
        assert!(a
            .chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
        assert_ne!(a, b);
    }
}
