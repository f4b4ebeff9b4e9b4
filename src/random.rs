//! Random ids from the system's random source, as lower-case hex: request
//! ids, form tokens, a process's instance, a health book's incarnation.

/// `bytes` random bytes as `2 * bytes` hex digits. Panics only when the
/// system has no random source, which nothing here can work without.
pub fn hex(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    getrandom::getrandom(&mut buf).expect("the system's random source");
    buf.iter().map(|b| format!("{b:02x}")).collect()
}

/// A number in `0..n` (`n` > 0), from the system's random source: for
/// jitter, where a few calls a minute don't warrant a generator.
pub fn below(n: u32) -> u32 {
    let mut buf = [0u8; 4];
    getrandom::getrandom(&mut buf).expect("the system's random source");
    u32::from_le_bytes(buf) % n
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

    #[test]
    fn numbers_stay_below_their_bound() {
        assert!((0..1000).all(|_| super::below(201) < 201));
        assert_eq!(super::below(1), 0);
    }
}
