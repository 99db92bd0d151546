//! Whether an Auto Scaling group a rule scales really launches into the rule's blocks. Scaling a
//! group up buys nothing by itself: its instances land in a Capacity Block only when its launch
//! template asks for the Capacity Block market (`InstanceMarketOptions.MarketType` =
//! `capacity-block`) and targets the block, or, for every block of the rule, the rule's capacity
//! reservation group (`CapacityReservationTarget.CapacityReservationResourceGroupArn`). A launch
//! configuration can do neither. `capblock rules validate --check-aws` warns of each gap.
//!
//! Pure: the caller passes what Auto Scaling and EC2 said.

/// How an Auto Scaling group launches its instances (DescribeAutoScalingGroups).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupLaunch {
    /// A launch template (its id or name, and the version the group uses; None: `$Default`).
    Template(TemplateRef),
    /// A launch configuration (by name): never a Capacity Block.
    Configuration(String),
    /// Neither (a group whose launch settings Auto Scaling did not show).
    Unknown,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateRef {
    pub id: Option<String>,
    pub name: Option<String>,
    pub version: Option<String>,
}

impl TemplateRef {
    /// The template as a person names it.
    pub fn label(&self) -> String {
        let who = self.name.clone().or_else(|| self.id.clone()).unwrap_or_else(|| "?".into());
        format!("{who} (version {})", self.version.as_deref().unwrap_or("$Default"))
    }
}

/// What one launch template version asks for (DescribeLaunchTemplateVersions' launch data).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LaunchTarget {
    pub market_type: Option<String>,
    pub reservation_id: Option<String>,
    pub reservation_group_arn: Option<String>,
}

/// What is wrong with how group `group` launches, for a rule of UltraServers (`ultraserver`)
/// or of instances, whose reservation group is `expected_group` (None: the rule keeps none);
/// None when its instances land in the rule's blocks. `target`: the template version's launch
/// data (None: EC2 does not know the version). A rule that keeps a group lands by it (the
/// block's id goes stale with the next block); a rule of instances without one by the block's
/// id (kept current per block); a rule of UltraServers needs its group.
pub fn gap(
    group: &str,
    launch: &GroupLaunch,
    target: Option<&LaunchTarget>,
    expected_group: Option<&str>,
    ultraserver: bool,
) -> Option<String> {
    let aim = match (ultraserver, expected_group) {
        (_, Some(g)) => format!("target the rule's capacity reservation group `{g}`"),
        (false, None) => "target the current block's id (CapacityReservationId; `publish_parameter` gives it to a \
                          launch script), or add a `reservation_group` action and target that group"
            .to_string(),
        (true, None) => "target the rule's capacity reservation group (add a `reservation_group` action)".to_string(),
    };
    let template = match launch {
        GroupLaunch::Configuration(name) => {
            return Some(format!(
                "group {group:?} launches from launch configuration {name:?}, which cannot launch into a Capacity \
                 Block: give it a launch template with InstanceMarketOptions MarketType=capacity-block that will {aim}"
            ));
        }
        GroupLaunch::Unknown => {
            return Some(format!(
                "Auto Scaling shows no launch template for group {group:?}: its instances may not land in the block"
            ));
        }
        GroupLaunch::Template(t) => t,
    };
    let Some(target) = target else {
        return Some(format!("EC2 does not know launch template {} of group {group:?}", template.label()));
    };
    let mut wrong = Vec::new();
    if target.market_type.as_deref() != Some("capacity-block") {
        wrong.push(format!(
            "its InstanceMarketOptions MarketType is {}, not capacity-block",
            target.market_type.as_deref().map_or("not set".to_string(), |m| format!("{m:?}"))
        ));
    }
    match (&target.reservation_group_arn, &target.reservation_id, expected_group) {
        (Some(arn), _, Some(g)) if arn.rsplit('/').next().is_some_and(|name| names_match(g, name)) => {}
        (Some(arn), _, _) => wrong.push(format!("it targets the group {arn}; it should {aim}")),
        // A rule of instances without a group: the block's id (kept current per block).
        (None, Some(_), None) if !ultraserver => {}
        (None, Some(id), _) => wrong
            .push(format!("it targets reservation {id} only, so the rule's next block goes unused; it should {aim}")),
        (None, None, _) => wrong.push(format!("it targets no capacity reservation; it should {aim}")),
    }
    (!wrong.is_empty()).then(|| format!("group {group:?}'s launch template {}: {}", template.label(), wrong.join("; ")))
}

/// Whether group name `name` is `expected`, where `expected` may hold one `*` (the stack's name
/// when the command does not know it: `capblock-*-<rule>`).
fn names_match(expected: &str, name: &str) -> bool {
    match expected.split_once('*') {
        Some((head, tail)) => name.len() > head.len() + tail.len() && name.starts_with(head) && name.ends_with(tail),
        None => expected == name,
    }
}

#[cfg(test)]
mod tests;
