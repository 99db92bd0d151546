//! Segmented offerings and ten-type questions (README, "Segmented offerings"): what each
//! reading answers, and a segmented purchase's reservations.

use super::dispatch;
use super::test_support::{values, world_of};
use crate::wire::error::ApiError;
use crate::wire::query::Params;
use crate::world::World;

const DESCRIBE: &str = "DescribeCapacityBlockOfferings";

/// us-east-1 sells p5.48xlarge one block at a time, and one segmented offering a day: 2 p5 in
/// us-east-1a and 1 p5en in us-east-1b.
fn world(behaviour: &str) -> World {
    let market = "[[market]]\nregion = \"us-east-1\"\ninstance_type = \"p5.48xlarge\"\n\
        azs = [\"us-east-1a\"]\nstart_days = [2]\n\
        price = [ { from = \"2026-11-01T00:00:00Z\", usd_per_accelerator_hour = \"6.00\" } ]\n\
        [[market]]\nregion = \"us-east-1\"\ninstance_type = \"p5.48xlarge\"\nstart_days = [1]\n\
        segments = [ { instance_type = \"p5.48xlarge\", az = \"us-east-1a\", count = 2 },\n\
                     { instance_type = \"p5en.48xlarge\", az = \"us-east-1b\", count = 1 } ]\n\
        price = [ { from = \"2026-11-01T00:00:00Z\", usd_per_accelerator_hour = \"5.00\" } ]";
    world_of(&format!("describe_limit = false\nsame_day_offerings = false\n{behaviour}"), market)
}

fn describe(w: &mut World, pairs: &[(&str, &str)]) -> Result<String, ApiError> {
    let mut all = vec![("CapacityDurationHours", "24")];
    all.extend_from_slice(pairs);
    dispatch(w, "us-east-1", DESCRIBE, &Params::from_pairs(&all)).map(|o| o.body)
}

const BOTH: &[(&str, &str)] =
    &[("InstanceTypePreferences.1", "p5.48xlarge"), ("InstanceTypePreferences.2", "p5en.48xlarge")];

#[test]
fn a_preference_list_is_answered_segmented_offerings_of_its_types_in_the_models_shape() {
    let mut w = world("");
    let body = describe(&mut w, BOTH).unwrap();
    assert_eq!(values(&body, "capacityBlockOfferingId").len(), 2, "the segmented offering and the plain one");
    let set = body
        .split("<capacityBlockOfferingSegmentSet>")
        .nth(1)
        .expect("a segment set")
        .split("</capacityBlockOfferingSegmentSet>")
        .next()
        .unwrap();
    assert_eq!(values(set, "instanceType"), ["p5.48xlarge", "p5en.48xlarge"]);
    assert_eq!(values(set, "availabilityZone"), ["us-east-1a", "us-east-1b"]);
    assert_eq!(values(set, "instanceCount"), ["2", "1"]);
    // 5.00 x 8 GPUs x 24 h per instance: 960 each, the offering's fee their sum.
    assert_eq!(values(set, "upfrontFee"), ["1920.00", "960.00"]);
    assert!(body.contains("<upfrontFee>2880.00</upfrontFee>"), "{body}");
    // A list naming only one segment's type does not take the offering.
    let one = describe(&mut w, &[("InstanceTypePreferences.1", "p5.48xlarge")]).unwrap();
    assert!(!one.contains("capacityBlockOfferingSegmentSet"), "{one}");
    assert_eq!(values(&one, "capacityBlockOfferingId").len(), 1);
}

#[test]
fn a_one_type_question_gets_segmented_offerings_only_under_first_segment() {
    let legacy = [("InstanceType", "p5.48xlarge")];
    let never = describe(&mut world(""), &legacy).unwrap();
    assert!(!never.contains("capacityBlockOfferingSegmentSet"), "{never}");
    let first = describe(&mut world("segmented_for_one_type = \"first_segment\""), &legacy).unwrap();
    assert!(first.contains("capacityBlockOfferingSegmentSet"), "{first}");
    // Its top level is the first segment's (2 p5 in us-east-1a) with the whole fee.
    assert!(first.contains("<upfrontFee>2880.00</upfrontFee>"), "{first}");
    let other =
        describe(&mut world("segmented_for_one_type = \"first_segment\""), &[("InstanceType", "p5en.48xlarge")])
            .unwrap();
    assert!(!other.contains("capacityBlockOfferingSegmentSet"), "only the first segment's type: {other}");
}

#[test]
fn preference_lists_are_refused_as_the_model_bounds_them() {
    let mut w = world("");
    let both = [("InstanceType", "p5.48xlarge"), ("InstanceTypePreferences.1", "p5.48xlarge")];
    assert_eq!(describe(&mut w, &both).unwrap_err().code, "InvalidParameterCombination");
    let eleven: Vec<(String, String)> =
        (1..=11).map(|i| (format!("InstanceTypePreferences.{i}"), "p5.48xlarge".to_string())).collect();
    let pairs: Vec<(&str, &str)> = eleven.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let e = describe(&mut w, &pairs).unwrap_err();
    assert_eq!(e.code, "InvalidParameterValue");
    assert!(e.message.contains("at most 10"), "{}", e.message);
    assert_eq!(describe(&mut w, &pairs[..10]).map(|b| b.is_empty()), Ok(false), "ten are taken");
    let unknown = describe(&mut w, &[("InstanceTypePreferences.1", "p9.huge")]).unwrap_err();
    assert_eq!(unknown.code, "InvalidParameterValue");
    let e = describe(&mut world("instance_type_preferences = \"unknown\""), BOTH).unwrap_err();
    assert_eq!((e.status, e.code.as_str()), (400, "UnknownParameter"));
}

#[test]
fn a_segmented_purchase_makes_one_tagged_reservation_per_segment() {
    let mut w = world("");
    let body = describe(&mut w, BOTH).unwrap();
    let id = body
        .split("<item>")
        .find(|i| i.contains("capacityBlockOfferingSegmentSet"))
        .map(|i| values(i, "capacityBlockOfferingId")[0].clone())
        .expect("the segmented offering");
    let p = Params::from_pairs(&[
        ("CapacityBlockOfferingId", &id),
        ("InstancePlatform", "Linux/UNIX"),
        ("TagSpecification.1.ResourceType", "capacity-reservation"),
        ("TagSpecification.1.Tag.1.Key", "capblock:intent"),
        ("TagSpecification.1.Tag.1.Value", "i-1"),
    ]);
    let out = dispatch(&mut w, "us-east-1", "PurchaseCapacityBlock", &p).unwrap().body;
    let set = out.split("<capacityReservationSet>").nth(1).expect("the reservation set");
    assert_eq!(values(set, "instanceType"), ["p5.48xlarge", "p5en.48xlarge"]);
    assert_eq!(values(set, "availabilityZone"), ["us-east-1a", "us-east-1b"]);
    assert_eq!(w.reservations.iter().map(|r| r.instance_count).collect::<Vec<_>>(), [2, 1]);
    assert!(w.reservations.iter().all(|r| r.tags == [("capblock:intent".to_string(), "i-1".to_string())]));
    let fees: Vec<String> = w.reservations.iter().map(|r| r.upfront_fee.to_string()).collect();
    assert_eq!(fees, ["1920.00", "960.00"]);
}
