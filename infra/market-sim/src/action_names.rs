//! The names of the EC2 actions this simulator implements: a leaf, so that the scenario's
//! settings (which name actions, as `iam_denials` does) need not import the actions themselves.

/// The actions this simulator implements, all others answer InvalidAction.
pub const ACTIONS: &[&str] = &[
    "DescribeCapacityBlockOfferings",
    "PurchaseCapacityBlock",
    "DescribeCapacityReservations",
    "DescribeCapacityBlockExtensionOfferings",
    "PurchaseCapacityBlockExtension",
    "DescribeInstanceTypes",
    "DescribeInstances",
    "GetCapacityReservationUsage",
    "DescribeCapacityBlocks",
    "DescribeCapacityBlockStatus",
    "DescribeCapacityBlockExtensionHistory",
    "CreateLaunchTemplate",
    "CreateLaunchTemplateVersion",
    "DescribeLaunchTemplateVersions",
];
