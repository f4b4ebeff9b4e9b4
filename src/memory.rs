//! Gives freed memory back to the system after a one-off peak, such as
//! reading the configuration of 100,000 targets. The allocator (mimalloc)
//! keeps freed pages and purges them lazily, on later allocation activity
//! that an idle gateway doesn't have; without this, an idle gateway holds
//! the peak of its last load or reload.

/// `mi_option_purge_delay` in mimalloc 3's option list.
const PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Purges every freed page now. Harmless when mimalloc is not the global
/// allocator (tests): it then holds nothing to purge.
pub fn release_freed() {
    // SAFETY: mimalloc's option and collect calls take no pointers; the
    // option is set back right after.
    unsafe {
        let delay = libmimalloc_sys::mi_option_get(PURGE_DELAY);
        libmimalloc_sys::mi_option_set(PURGE_DELAY, 0);
        libmimalloc_sys::mi_collect(true);
        libmimalloc_sys::mi_option_set(PURGE_DELAY, delay);
    }
}
