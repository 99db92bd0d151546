//! A function checks its own role for `capblock preflight`: every action of the ports it
//! declares, tried without effect, in each region the rules watch where the action is regional.
//! The operator's credentials cannot show this (they are not the role's); only the function,
//! running as its role, can.

use crate::domain::permissions::{PermissionsAsk, Probed, RoleCheck};
use crate::ports::PermissionProbe;

/// Tries each of `actions` (the function's, from its ports) as `ask` says, in order: regional
/// actions once per asked region, the others once.
pub async fn check_role(
    function: &str,
    actions: &[&str],
    ask: &PermissionsAsk,
    probe: &dyn PermissionProbe,
) -> RoleCheck {
    let mut probes = Vec::new();
    for &action in actions {
        let regions: Vec<Option<&crate::domain::permissions::RegionAsk>> =
            if probe.regional(action) { ask.asks.iter().map(Some).collect() } else { vec![None] };
        for a in regions {
            let started = std::time::Instant::now();
            let access = probe.try_action(action, a.map(|a| &a.region), a.map(|a| &a.instance_type)).await;
            tracing::debug!(event = "role_action_tried", action, region = ?a.map(|a| a.region.as_str()), ms = started.elapsed().as_millis() as u64, access = ?access, "tried");
            probes.push(Probed { action: action.to_string(), region: a.map(|a| a.region.clone()), access });
        }
    }
    RoleCheck { function: function.to_string(), probes }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use async_trait::async_trait;

    use super::*;
    use crate::domain::names::{InstanceType, Region};
    use crate::domain::permissions::{Access, RegionAsk};

    /// Records each try; denies the purchase in us-west-2.
    struct Recorder(Mutex<Vec<(String, Option<String>)>>);

    #[async_trait]
    impl PermissionProbe for Recorder {
        async fn try_action(&self, action: &str, region: Option<&Region>, _: Option<&InstanceType>) -> Access {
            self.0.lock().unwrap().push((action.to_string(), region.map(|r| r.to_string())));
            match (action, region.map(|r| r.as_str())) {
                ("ec2:PurchaseCapacityBlock", Some("us-west-2")) => Access::Denied { message: "no".into() },
                _ => Access::Allowed,
            }
        }
        fn regional(&self, action: &str) -> bool {
            action.starts_with("ec2:")
        }
    }

    #[tokio::test]
    async fn regional_actions_are_tried_in_every_asked_region_the_others_once() {
        let ask = PermissionsAsk::new(
            ["us-east-1", "us-west-2"]
                .iter()
                .map(|r| RegionAsk { region: r.parse().unwrap(), instance_type: "p5.48xlarge".parse().unwrap() })
                .collect(),
        );
        let probe = Recorder(Mutex::new(Vec::new()));
        let check =
            check_role("scan-offerings", &["ec2:PurchaseCapacityBlock", "dynamodb:GetItem"], &ask, &probe).await;
        let tried = probe.0.lock().unwrap().clone();
        assert_eq!(
            tried,
            vec![
                ("ec2:PurchaseCapacityBlock".to_string(), Some("us-east-1".to_string())),
                ("ec2:PurchaseCapacityBlock".to_string(), Some("us-west-2".to_string())),
                ("dynamodb:GetItem".to_string(), None),
            ]
        );
        assert_eq!(check.function, "scan-offerings");
        assert!(matches!(check.probes[1].access, Access::Denied { .. }));
    }
}
