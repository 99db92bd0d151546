//! The `capblock:*` tags capblock puts on what it buys. They are how a reservation is tied back
//! to its rule and purchase intent after a crash (reconcile finds blocks by tag), and how one
//! stack tells its blocks from another's in the same account.

/// The tag that ties a reservation to the intent that bought it.
pub const INTENT_TAG: &str = "capblock:intent";
/// The rule that bought the reservation.
pub const RULE_TAG: &str = "capblock:rule";
/// The stack (deployment) that bought it: a tracker adopts only its own stack's blocks as ours.
pub const STACK_TAG: &str = "capblock:stack";

/// The tag EC2 puts on a Capacity Block reservation with the instances it was bought for (the
/// EC2 user guide): before the block starts, its counts show 0 and this holds the count.
pub const REQUESTED_QUANTITY_TAG: &str = "aws:ec2capacityreservation:incrementalRequestedQuantity";
