//! Replicas sharing the fleet's background work (issue 57): who owns a
//! duty. The pure part lives here: every replica computes a duty's owner
//! on its own, from the same live members, and they agree without asking
//! each other. Membership itself comes from an engine users already run
//! (Kubernetes Leases, PostgreSQL), never from a home-made consensus.

pub mod rendezvous;
