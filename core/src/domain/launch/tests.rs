use super::*;

/// `gap` for a rule of UltraServers (the kind whose blocks can join a group).
fn ultra_gap(group: &str, l: &GroupSetup, t: Option<&LaunchTarget>, e: Option<&str>) -> Option<String> {
    gap(group, l, t, e, true)
}

fn template() -> GroupSetup {
    GroupLaunch::Template(TemplateRef { id: None, name: Some("trainers".into()), version: Some("$Latest".into()) })
        .into()
}

fn target(market: Option<&str>, group: Option<&str>, id: Option<&str>) -> LaunchTarget {
    LaunchTarget {
        market_type: market.map(str::to_string),
        reservation_group_arn: group.map(|g| format!("arn:aws:resource-groups:us-west-2:123456789012:group/{g}")),
        reservation_id: id.map(str::to_string),
    }
}

#[test]
fn a_template_for_capacity_blocks_targeting_the_rules_group_lands() {
    let t = target(Some("capacity-block"), Some("capblock-prod-p5"), None);
    assert_eq!(ultra_gap("trainers", &template(), Some(&t), Some("capblock-prod-p5")), None);
}

#[test]
fn each_gap_is_named_with_what_to_do() {
    let g = Some("capblock-prod-p5");
    let config = ultra_gap("trainers", &GroupLaunch::Configuration("old".into()).into(), None, g).unwrap();
    assert!(
        config.contains("launch configuration \"old\"") && config.contains("MarketType=capacity-block"),
        "{config}"
    );
    let on_demand = ultra_gap("trainers", &template(), Some(&target(None, Some("capblock-prod-p5"), None)), g).unwrap();
    assert!(on_demand.contains("MarketType is not set, not capacity-block"), "{on_demand}");
    let other =
        ultra_gap("trainers", &template(), Some(&target(Some("capacity-block"), Some("someone-else"), None)), g)
            .unwrap();
    assert!(other.contains("group/someone-else") && other.contains("`capblock-prod-p5`"), "{other}");
    let one = ultra_gap("trainers", &template(), Some(&target(Some("capacity-block"), None, Some("cr-1"))), g).unwrap();
    assert!(one.contains("reservation cr-1 only"), "{one}");
    let none = ultra_gap("trainers", &template(), Some(&target(Some("capacity-block"), None, None)), None).unwrap();
    assert!(
        none.contains("targets no capacity reservation") && none.contains("add a `reservation_group` action"),
        "{none}"
    );
    let missing = ultra_gap("trainers", &template(), None, g).unwrap();
    assert!(missing.contains("EC2 does not know launch template trainers (version $Latest)"), "{missing}");
    assert!(ultra_gap("trainers", &GroupLaunch::Unknown.into(), None, g).is_some());
}

#[test]
fn a_stack_not_known_matches_any_stacks_group_of_the_rule() {
    let t = target(Some("capacity-block"), Some("capblock-prod-p5"), None);
    assert_eq!(ultra_gap("trainers", &template(), Some(&t), Some("capblock-*-p5")), None);
    let other_rule = target(Some("capacity-block"), Some("capblock-prod-p5e"), None);
    assert!(ultra_gap("trainers", &template(), Some(&other_rule), Some("capblock-*-p5")).is_some());
}

#[test]
fn a_rule_of_instances_lands_by_the_blocks_id_or_by_the_group_it_keeps() {
    // Without a reservation group: the block's id, and nothing else.
    let by_id = target(Some("capacity-block"), None, Some("cr-1"));
    assert_eq!(gap("trainers", &template(), Some(&by_id), None, false), None);
    let grouped = target(Some("capacity-block"), Some("capblock-prod-p5"), None);
    let by_group = gap("trainers", &template(), Some(&grouped), None, false).unwrap();
    assert!(by_group.contains("target the current block's id"), "{by_group}");
    let none = gap("trainers", &template(), Some(&target(Some("capacity-block"), None, None)), None, false).unwrap();
    assert!(none.contains("target the current block's id"), "{none}");
    // With one: the rule's group (instance Capacity Blocks join groups); a block's id alone
    // leaves the rule's next block unused, and another group is the wrong one.
    assert_eq!(gap("trainers", &template(), Some(&grouped), Some("capblock-*-p5"), false), None);
    let stale = gap("trainers", &template(), Some(&by_id), Some("capblock-*-p5"), false).unwrap();
    assert!(stale.contains("targets reservation cr-1 only") && stale.contains("`capblock-*-p5`"), "{stale}");
    let other = target(Some("capacity-block"), Some("capblock-prod-a100"), None);
    assert!(gap("trainers", &template(), Some(&other), Some("capblock-*-p5"), false).is_some());
}

/// The template and the group with Capacity Reservation settings of its own.
fn with_capacity(preference: &str, group_arns: &[&str], ids: &[&str], segments: &[&str]) -> GroupSetup {
    let arn = |g: &&str| format!("arn:aws:resource-groups:us-west-2:123456789012:group/{g}");
    GroupSetup {
        capacity: GroupCapacity {
            preference: Some(preference.into()),
            reservation_ids: ids.iter().map(|i| i.to_string()).collect(),
            group_arns: group_arns.iter().map(arn).collect(),
            segment_types: segments.iter().map(|t| t.to_string()).collect(),
        },
        ..template()
    }
}

#[test]
fn a_group_targeting_the_rules_group_with_a_capacity_block_segment_lands_without_a_market_type() {
    let plain = target(None, None, None);
    let g = Some("capblock-prod-p5");
    let segments =
        with_capacity("capacity-reservations-first", &["capblock-prod-p5"], &[], &["capacity-block", "on-demand"]);
    assert_eq!(ultra_gap("trainers", &segments, Some(&plain), g), None);
    // Segments that name no Capacity Blocks launch nothing into the block.
    let odcr =
        with_capacity("capacity-reservations-only", &["capblock-prod-p5"], &[], &["on-demand-capacity-reservation"]);
    let why = ultra_gap("trainers", &odcr, Some(&plain), g).unwrap();
    assert!(why.contains("distribution segments target on-demand-capacity-reservation only"), "{why}");
    // Segments reach blocks through a resource group the Auto Scaling group itself targets.
    let no_target = with_capacity("capacity-reservations-only", &[], &[], &["capacity-block"]);
    let why = ultra_gap("trainers", &no_target, Some(&target(None, Some("capblock-prod-p5"), None)), g).unwrap();
    assert!(why.contains("only through a resource group the Auto Scaling group itself targets"), "{why}");
    let by_id = with_capacity("capacity-reservations-only", &[], &["cr-1"], &["capacity-block"]);
    assert!(gap("trainers", &by_id, Some(&plain), None, false).is_some(), "segments need a resource group");
    // A preference of none launches into no reservation at all.
    let none = with_capacity("none", &["capblock-prod-p5"], &[], &["capacity-block"]);
    assert!(ultra_gap("trainers", &none, Some(&plain), g).unwrap().contains("CapacityReservationPreference is none"));
}

#[test]
fn the_groups_own_target_stands_for_the_templates() {
    let g = Some("capblock-prod-p5");
    // The template asks for the Capacity Block market and targets another group; the Auto
    // Scaling group's own target is the rule's: it lands.
    let market = target(Some("capacity-block"), Some("someone-else"), None);
    let own = with_capacity("capacity-reservations-only", &["capblock-prod-p5"], &[], &[]);
    assert_eq!(ultra_gap("trainers", &own, Some(&market), g), None);
    // And the other way round: the group's own target is another group's.
    let rules = target(Some("capacity-block"), Some("capblock-prod-p5"), None);
    let other = with_capacity("capacity-reservations-only", &["someone-else"], &[], &[]);
    let why = ultra_gap("trainers", &other, Some(&rules), g).unwrap();
    assert!(
        why.contains("the group's CapacityReservationTarget targets the group") && why.contains("someone-else"),
        "{why}"
    );
}
