//! An agent's exchange slots (`max_in_flight`), aware of the serving
//! workers ([`crate::worker`]). A slot freed on one worker goes to a
//! waiter on the same worker when that keeps the slots evenly spread
//! among the workers waiting for them: handing it to another worker costs
//! a cross-thread wake-up (a futex and an idle thread's start) per
//! exchange, which made two workers run at 0.7 of one shared runtime's
//! rate when an agent's slots were the limit. Waiters on one worker are
//! served first come, first served; a worker holding fewer slots than
//! another with waiters gets the next one freed anywhere, so none starves.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use futures::task::AtomicWaker;

/// At most `n` holders at once; see the module.
/// Workers whose slot counts are kept apart.
const TRACKED: usize = 8;

#[derive(Debug)]
pub(crate) struct Slots {
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    free: usize,
    /// Slots held, by worker slot ([`crate::worker::current_slot`]) modulo
    /// [`TRACKED`]: inline, so a fleet of 100,000 targets allocates
    /// nothing for it. Workers beyond that share counts, which only makes
    /// the spread coarser.
    held: [u32; TRACKED],
    /// Oldest first. Never holds a waiter while a slot is free: a freed
    /// slot goes straight to a waiter.
    waiting: VecDeque<Arc<Waiter>>,
}

#[derive(Debug)]
struct Waiter {
    worker: usize,
    granted: AtomicBool,
    waker: AtomicWaker,
}

/// A slot, given back when dropped.
#[derive(Debug)]
pub(crate) struct Slot<'a> {
    slots: &'a Slots,
    worker: usize,
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.slots.give_back(self.worker);
    }
}

impl Slots {
    pub(crate) fn new(n: usize) -> Slots {
        Slots {
            state: Mutex::new(State {
                free: n,
                held: [0; TRACKED],
                waiting: VecDeque::new(),
            }),
        }
    }

    /// Waits for a slot. Dropping the future gives up its place (or the
    /// slot it was just given).
    pub(crate) fn acquire(&self) -> Acquire<'_> {
        Acquire {
            slots: self,
            worker: crate::worker::current_slot(),
            waiter: None,
        }
    }

    /// Slots nobody holds.
    #[cfg(test)]
    fn available(&self) -> usize {
        self.state.lock().expect("slots lock").free
    }

    fn give_back(&self, worker: usize) {
        let woken = {
            let mut state = self.state.lock().expect("slots lock");
            *state.held_by(worker) -= 1;
            match state.next_waiter(worker) {
                Some(at) => {
                    let waiter = state.waiting.remove(at).expect("waiter index");
                    *state.held_by(waiter.worker) += 1;
                    waiter.granted.store(true, Ordering::Release);
                    Some(waiter)
                }
                None => {
                    state.free += 1;
                    None
                }
            }
        };
        if let Some(waiter) = woken {
            waiter.waker.wake();
        }
    }
}

impl State {
    fn held_by(&mut self, worker: usize) -> &mut u32 {
        &mut self.held[worker % TRACKED]
    }

    /// The waiter a slot freed on `freed_on` goes to: the oldest waiter of
    /// the worker holding fewest slots among those waiting, `freed_on`
    /// itself on a tie.
    fn next_waiter(&self, freed_on: usize) -> Option<usize> {
        let mut best: Option<(usize, (u32, bool))> = None;
        for (at, waiter) in self.waiting.iter().enumerate() {
            let rank = (
                self.held[waiter.worker % TRACKED],
                waiter.worker != freed_on,
            );
            if best.is_none_or(|(_, best_rank)| rank < best_rank) {
                best = Some((at, rank));
            }
        }
        best.map(|(at, _)| at)
    }
}

/// The future of [`Slots::acquire`].
pub(crate) struct Acquire<'a> {
    slots: &'a Slots,
    worker: usize,
    waiter: Option<Arc<Waiter>>,
}

impl<'a> Future for Acquire<'a> {
    type Output = Slot<'a>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Slot<'a>> {
        let (slots, worker) = (self.slots, self.worker);
        let granted = || Poll::Ready(Slot { slots, worker });
        match &self.waiter {
            None => {
                let mut state = slots.state.lock().expect("slots lock");
                if state.free > 0 {
                    state.free -= 1;
                    *state.held_by(worker) += 1;
                    return granted();
                }
                let waiter = Arc::new(Waiter {
                    worker,
                    granted: AtomicBool::new(false),
                    waker: AtomicWaker::new(),
                });
                waiter.waker.register(cx.waker());
                state.waiting.push_back(waiter.clone());
                drop(state);
                self.waiter = Some(waiter);
                Poll::Pending
            }
            Some(waiter) => {
                waiter.waker.register(cx.waker());
                if waiter.granted.load(Ordering::Acquire) {
                    self.waiter = None;
                    granted()
                } else {
                    Poll::Pending
                }
            }
        }
    }
}

impl Drop for Acquire<'_> {
    fn drop(&mut self) {
        let Some(waiter) = self.waiter.take() else {
            return;
        };
        let mut state = self.slots.state.lock().expect("slots lock");
        if waiter.granted.load(Ordering::Acquire) {
            // Given a slot as it gave up: pass it on.
            drop(state);
            self.slots.give_back(self.worker);
        } else if let Some(at) = state.waiting.iter().position(|w| Arc::ptr_eq(w, &waiter)) {
            state.waiting.remove(at);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::FutureExt;

    /// Polls `f` once on a no-op waker.
    fn poll_once<F: Future + Unpin>(f: &mut F) -> Poll<F::Output> {
        let waker = futures::task::noop_waker();
        f.poll_unpin(&mut Context::from_waker(&waker))
    }

    /// A slot taken at once on worker slot `worker`; panics if none is
    /// free.
    fn take(slots: &Slots, worker: usize) -> Slot<'_> {
        match poll_once(&mut acquire_on(slots, worker)) {
            Poll::Ready(slot) => slot,
            Poll::Pending => panic!("no free slot"),
        }
    }

    /// An acquire on worker slot `worker` that found no free slot and now
    /// waits in line.
    fn queued(slots: &Slots, worker: usize) -> Acquire<'_> {
        let mut waiting = acquire_on(slots, worker);
        assert!(poll_once(&mut waiting).is_pending(), "a slot was free");
        waiting
    }

    /// An acquire as if made on worker slot `worker`.
    fn acquire_on(slots: &Slots, worker: usize) -> Acquire<'_> {
        Acquire {
            slots,
            worker,
            waiter: None,
        }
    }

    #[test]
    fn at_most_n_hold_and_a_freed_slot_goes_to_the_oldest_waiter() {
        let slots = Slots::new(1);
        let first = poll_once(&mut acquire_on(&slots, 1)).map(|s| s.worker);
        assert!(matches!(first, Poll::Ready(1)));
        // `first` was dropped above: the slot is free again.
        assert_eq!(slots.available(), 1);
        let held = take(&slots, 1);
        let mut b = queued(&slots, 1);
        let mut c = queued(&slots, 1);
        drop(held);
        assert!(poll_once(&mut c).is_pending(), "b came first");
        assert!(poll_once(&mut b).is_ready());
        assert_eq!(slots.available(), 0);
    }

    #[test]
    fn a_freed_slot_stays_on_its_worker_while_the_workers_hold_equally() {
        let slots = Slots::new(2);
        let on1 = take(&slots, 1);
        let on2 = take(&slots, 2);
        let mut waits_on2 = queued(&slots, 2);
        let mut waits_on1 = queued(&slots, 1);
        // Worker 2's waiter is older, but a slot freed on worker 1 stays
        // there: both workers hold one.
        drop(on1);
        assert!(poll_once(&mut waits_on2).is_pending());
        assert!(matches!(
            poll_once(&mut waits_on1),
            Poll::Ready(Slot { worker: 1, .. })
        ));
        drop(on2);
        assert!(matches!(
            poll_once(&mut waits_on2),
            Poll::Ready(Slot { worker: 2, .. })
        ));
    }

    #[test]
    fn a_worker_holding_fewer_gets_the_next_slot_so_none_starves() {
        let slots = Slots::new(2);
        let a = take(&slots, 1);
        let b = take(&slots, 1);
        let mut local = queued(&slots, 1);
        let mut remote = queued(&slots, 2);
        // Worker 1 holds both: the slot it frees goes to worker 2.
        drop(a);
        assert!(poll_once(&mut local).is_pending());
        let Poll::Ready(on2) = poll_once(&mut remote) else {
            panic!("worker 2 holds none")
        };
        drop(b);
        assert!(poll_once(&mut local).is_ready());
        drop(on2);
    }

    #[test]
    fn a_waiter_that_gives_up_leaves_no_slot_behind() {
        let slots = Slots::new(1);
        let held = take(&slots, 1);
        let gives_up = queued(&slots, 1);
        let mut waits = queued(&slots, 1);
        drop(gives_up);
        drop(held);
        let Poll::Ready(slot) = poll_once(&mut waits) else {
            panic!("the next in line")
        };
        // Given a slot and dropped before it looked: the slot is passed on.
        let granted_then_dropped = queued(&slots, 2);
        drop(slot);
        drop(granted_then_dropped);
        assert_eq!(slots.available(), 1);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn many_tasks_never_hold_more_than_n() {
        let slots = Arc::new(Slots::new(3));
        let holding = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let tasks: Vec<_> = (0..32)
            .map(|_| {
                let (slots, holding) = (slots.clone(), holding.clone());
                tokio::spawn(async move {
                    for _ in 0..50 {
                        let _slot = slots.acquire().await;
                        let now = holding.fetch_add(1, Ordering::SeqCst) + 1;
                        assert!(now <= 3, "{now} hold a slot");
                        tokio::task::yield_now().await;
                        holding.fetch_sub(1, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
        assert_eq!(slots.available(), 3);
    }
}
