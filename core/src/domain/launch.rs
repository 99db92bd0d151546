//! Whether an Auto Scaling group a rule scales really launches into the rule's blocks. Scaling a
//! group up buys nothing by itself: its instances land in a Capacity Block only when its launch
//! template asks for the Capacity Block market (`InstanceMarketOptions.MarketType` =
//! `capacity-block`) and targets the block, or, for every block of the rule, the rule's capacity
//! reservation group (`CapacityReservationTarget.CapacityReservationResourceGroupArn`). A launch
//! configuration can do neither. `capblock rules validate --check-aws` warns of each gap.
//!
//! Since 2026 the group itself can say it too (Auto Scaling user guide, "Target Capacity
//! Reservations from your Auto Scaling group" and "Use distribution segments"): its own
//! `CapacityReservationSpecification` may name the target (reservation ids or resource group
//! ARNs), which then stands for the template's, and "to consume Capacity Blocks", a market type
//! on the template, or "a Capacity Reservation Resource Group as a target on your Auto Scaling
//! group, together with distribution segments" (`MixedInstancesPolicy.InstancesDistribution.
//! DistributionSegments`, whose `TargetCapacityTypes` include `capacity-block`). So a group of
//! the second kind lands in the rule's blocks with a template of no market type.
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

/// What DescribeAutoScalingGroups says of a group's launches: its template or configuration,
/// and its own Capacity Reservation settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupSetup {
    pub launch: GroupLaunch,
    pub capacity: GroupCapacity,
}

impl From<GroupLaunch> for GroupSetup {
    /// A group with no Capacity Reservation settings of its own.
    fn from(launch: GroupLaunch) -> Self {
        GroupSetup { launch, capacity: GroupCapacity::default() }
    }
}

/// A group's own `CapacityReservationSpecification` and distribution segments (empty: none).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupCapacity {
    /// `capacity-reservations-only`, `capacity-reservations-first`, `none` or `default`.
    pub preference: Option<String>,
    pub reservation_ids: Vec<String>,
    pub group_arns: Vec<String>,
    /// Every distribution segment's `TargetCapacityTypes`, in order (`capacity-block`,
    /// `on-demand-capacity-reservation`, `interruptible-capacity-reservation`, `on-demand`).
    pub segment_types: Vec<String>,
}

impl GroupCapacity {
    /// The group names its own target, which Auto Scaling launches into instead of the
    /// template's.
    fn names_target(&self) -> bool {
        !self.reservation_ids.is_empty() || !self.group_arns.is_empty()
    }

    /// Its distribution segments ask for Capacity Blocks.
    fn segments_take_blocks(&self) -> bool {
        self.segment_types.iter().any(|t| t == "capacity-block")
    }
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
    setup: &GroupSetup,
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
    let template = match &setup.launch {
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
    let capacity = &setup.capacity;
    let mut wrong = Vec::new();
    if capacity.preference.as_deref() == Some("none") {
        wrong.push("the group's CapacityReservationPreference is none".to_string());
    }
    let market = target.market_type.as_deref() == Some("capacity-block");
    if !market && !capacity.segments_take_blocks() {
        let segments = if capacity.segment_types.is_empty() {
            String::new()
        } else {
            format!(" and the group's distribution segments target {} only", capacity.segment_types.join(", "))
        };
        wrong.push(format!(
            "its InstanceMarketOptions MarketType is {}, not capacity-block{segments}",
            target.market_type.as_deref().map_or("not set".to_string(), |m| format!("{m:?}"))
        ));
    }
    wrong.extend(target_gap(capacity, target, market, expected_group, ultraserver, &aim));
    (!wrong.is_empty()).then(|| format!("group {group:?}'s launch template {}: {}", template.label(), wrong.join("; ")))
}

/// What is wrong with the reservation the group's launches target: the group's own target when
/// it names one, else its template's. Distribution segments without the template's market
/// type reach Capacity Blocks only through a resource group the group itself targets.
fn target_gap(
    capacity: &GroupCapacity,
    template: &LaunchTarget,
    market: bool,
    expected_group: Option<&str>,
    ultraserver: bool,
    aim: &str,
) -> Option<String> {
    if !market && capacity.segments_take_blocks() && capacity.group_arns.is_empty() {
        return Some(format!(
            "its distribution segments reach Capacity Blocks only through a resource group the Auto Scaling group \
             itself targets (CapacityReservationSpecification); it should {aim}"
        ));
    }
    let (arns, ids, whose) = if capacity.names_target() {
        (capacity.group_arns.as_slice(), capacity.reservation_ids.as_slice(), "the group's CapacityReservationTarget")
    } else {
        (template.reservation_group_arn.as_slice(), template.reservation_id.as_slice(), "it")
    };
    let arn_is_rules =
        |arn: &String| expected_group.is_some_and(|g| arn.rsplit('/').next().is_some_and(|name| names_match(g, name)));
    match (arns.first(), ids.first(), expected_group) {
        _ if arns.iter().any(arn_is_rules) => None,
        (Some(arn), _, _) => Some(format!("{whose} targets the group {arn}; it should {aim}")),
        // A rule of instances without a group: the block's id (kept current per block).
        (None, Some(_), None) if !ultraserver => None,
        (None, Some(id), _) => Some(format!(
            "{whose} targets reservation {id} only, so the rule's next block goes unused; it should {aim}"
        )),
        (None, None, _) => Some(format!("{whose} targets no capacity reservation; it should {aim}")),
    }
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
