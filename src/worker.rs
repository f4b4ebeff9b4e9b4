//! Which serving worker the current thread is. The gateway serves clients
//! on `server.workers` threads, each with an event loop of its own
//! (`pipeline::listen::Workers`); a request stays on its worker from
//! accept to answer. Agent connections are pooled per worker
//! (`client::agent`), so an exchange is driven by the thread whose request
//! needs it rather than handed to another thread and back. A leaf: it
//! knows nothing of either side.

use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

thread_local! {
    static INDEX: Cell<usize> = const { Cell::new(0) };
}

/// The serving worker this thread is, from 1; 0 on every other thread
/// (background tasks, tests).
pub fn current() -> usize {
    INDEX.with(Cell::get)
}

/// Marks this thread as serving worker `index` (from 1).
pub fn enter(index: usize) {
    INDEX.with(|i| i.set(index));
}

/// Workers when `server.workers` is not set: one per CPU the process may
/// use.
pub fn default_count() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// How many per-worker slots a per-worker structure should have: the
/// default worker count plus one for the threads that are no worker. A
/// gateway configured with more workers than that shares slots (modulo),
/// which is correct, only less local.
pub fn slots() -> usize {
    // Asked per exchange; the CPU count costs system calls to find.
    static SLOTS: OnceLock<usize> = OnceLock::new();
    *SLOTS.get_or_init(|| default_count() + 1)
}

/// The calling thread's slot among [`slots`].
pub fn current_slot() -> usize {
    slot(slots())
}

/// This thread's slot among `slots` (see [`slots`]).
pub fn slot(slots: usize) -> usize {
    current() % slots.max(1)
}

/// Client connections each worker holds (open ones, and ones handed to it
/// and not yet taken), by slot.
fn load() -> &'static [AtomicUsize] {
    static LOAD: OnceLock<Box<[AtomicUsize]>> = OnceLock::new();
    LOAD.get_or_init(|| (0..slots()).map(|_| AtomicUsize::new(0)).collect())
}

/// One client connection counted against a worker's load until dropped.
#[derive(Debug)]
pub struct Held(usize);

impl Held {
    /// Counts a connection against the calling thread's worker.
    pub fn here() -> Held {
        Held::on(current())
    }

    /// Counts a connection against worker `index`.
    pub fn on(index: usize) -> Held {
        let slot = index % slots();
        load()[slot].fetch_add(1, Ordering::Relaxed);
        Held(slot)
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        load()[self.0].fetch_sub(1, Ordering::Relaxed);
    }
}

/// Which of workers `1..=workers` should take a new connection: the one
/// holding the fewest, the calling worker when it is among them (so most
/// connections stay where they were accepted).
pub fn least_loaded(workers: usize) -> usize {
    let load = load();
    let held = |index: usize| load[index % load.len()].load(Ordering::Relaxed);
    let here = current();
    let mut best = here;
    let mut fewest = if here == 0 { usize::MAX } else { held(here) };
    for index in 1..=workers {
        if held(index) < fewest {
            best = index;
            fewest = held(index);
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_are_no_worker_until_they_enter() {
        std::thread::spawn(|| {
            assert_eq!(current(), 0);
            enter(3);
            assert_eq!(current(), 3);
            assert_eq!(slot(2), 1);
        })
        .join()
        .unwrap();
        assert_eq!(current(), 0);
    }

    #[test]
    fn a_new_connection_goes_to_the_worker_holding_fewest_and_stays_on_a_tie() {
        // Workers beyond the CPU count share slots; use two that exist.
        std::thread::spawn(|| {
            enter(1);
            let workers = 2.min(slots() - 1);
            assert_eq!(least_loaded(workers), 1, "a tie stays here");
            let first = Held::here();
            if workers == 2 {
                assert_eq!(least_loaded(workers), 2);
                let second = Held::on(2);
                assert_eq!(least_loaded(workers), 1);
                drop(second);
            }
            drop(first);
            assert_eq!(least_loaded(workers), 1);
        })
        .join()
        .unwrap();
    }
}
