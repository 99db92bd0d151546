use super::*;

/// `gap` for a rule of UltraServers (the kind whose blocks can join a group).
fn ultra_gap(group: &str, l: &GroupLaunch, t: Option<&LaunchTarget>, e: Option<&str>) -> Option<String> {
    gap(group, l, t, e, true)
}

fn template() -> GroupLaunch {
    GroupLaunch::Template(TemplateRef { id: None, name: Some("trainers".into()), version: Some("$Latest".into()) })
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
    let config = ultra_gap("trainers", &GroupLaunch::Configuration("old".into()), None, g).unwrap();
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
    assert!(ultra_gap("trainers", &GroupLaunch::Unknown, None, g).is_some());
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
