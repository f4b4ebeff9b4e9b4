//! Step 5, authorize: may this principal run this item on this target?
//! A denied item is answered at its index with status 403 and never
//! reaches an agent.

use crate::protocol::{ProtocolError, Request};

use super::authenticate::Principal;
use super::route::Destination;

/// Decides one item. No restrictor policy is configured yet, so every item
/// that parsed and routed is allowed.
pub fn authorize(
    _principal: &Principal,
    _request: &Request,
    _destination: &Destination,
) -> Result<(), ProtocolError> {
    Ok(())
}
