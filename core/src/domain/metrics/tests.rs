use super::*;
use chrono::TimeZone;
use rust_decimal_macros::dec;

fn at() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, 1, 10, 0, 0).unwrap()
}

fn region(s: &str) -> Region {
    s.parse().unwrap()
}

/// One document per set of dimension values; each names its metrics with their units and
/// carries Stack, its dimensions and its values at the root, at the batch's time.
#[test]
fn documents_group_metrics_by_dimension_values() {
    let mut b = Batch::new("prod", at());
    b.questions(&region("us-east-1"), Questions { asked: 4, answered: 3, throttled: 1, carried_over: 1, allowed: 8 });
    b.price(&region("us-east-1"), &"p5.48xlarge".parse().unwrap(), dec!(2.75));
    let docs = b.documents();
    assert_eq!(docs.len(), 2);
    let q = docs.iter().find(|d| d.get("QuestionsAsked").is_some()).unwrap();
    assert_eq!(q["_aws"]["Timestamp"], at().timestamp_millis());
    let directive = &q["_aws"]["CloudWatchMetrics"][0];
    assert_eq!(directive["Namespace"], "capblock");
    assert_eq!(directive["Dimensions"], json!([["Stack", "Region"]]));
    let names: Vec<&str> =
        directive["Metrics"].as_array().unwrap().iter().map(|m| m["Name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        ["QuestionsAsked", "QuestionsAnswered", "QuestionsThrottled", "QuestionsCarriedOver", "DescribeBudgetUsed"]
    );
    assert_eq!(q["Stack"], "prod");
    assert_eq!(q["Region"], "us-east-1");
    assert_eq!(q["QuestionsThrottled"], 1.0);
    assert_eq!(q["DescribeBudgetUsed"], 50.0);
    let p = docs.iter().find(|d| d.get("PricePerAcceleratorHour").is_some()).unwrap();
    assert_eq!(p["InstanceType"], "p5.48xlarge");
    assert_eq!(p["PricePerAcceleratorHour"], 2.75);
    assert_eq!(p["_aws"]["CloudWatchMetrics"][0]["Metrics"][0]["Unit"], "None");
}

/// Every line is one JSON object (a log event), and each metric is named once per document
/// even when measured twice (the last value wins).
#[test]
fn lines_are_single_json_objects_and_names_are_unique() {
    let mut b = Batch::new("s", at());
    b.blocks("active", 1);
    b.blocks("active", 2);
    b.error("scan-offerings", "capblock.BadInput");
    for line in b.lines() {
        assert!(!line.contains('\n'), "{line}");
        let v: Value = serde_json::from_str(&line).unwrap();
        assert!(v.is_object());
    }
    let docs = b.documents();
    let blocks = docs.iter().find(|d| d.get("Blocks").is_some()).unwrap();
    assert_eq!(blocks["Blocks"], 2.0);
    assert_eq!(blocks["_aws"]["CloudWatchMetrics"][0]["Metrics"].as_array().unwrap().len(), 1);
    let errors = docs.iter().find(|d| d.get("Errors").is_some()).unwrap();
    assert_eq!(errors["_aws"]["CloudWatchMetrics"][0]["Dimensions"], json!([["Stack", "Function", "Kind"]]));
}

/// What EMF cannot carry is left out rather than written as an invalid document: no budget
/// usage without an allowance, no empty dimension value.
#[test]
fn what_emf_cannot_carry_is_left_out() {
    let mut b = Batch::new("s", at());
    b.questions(&region("us-west-2"), Questions::default());
    b.budget("", dec!(1), dec!(1), dec!(1));
    let docs = b.documents();
    assert_eq!(docs.len(), 1);
    assert!(docs[0].get("DescribeBudgetUsed").is_none());
    assert!(Batch::new("s", at()).is_empty());
}

/// Deadlines ahead are positive hours, passed ones negative (a block late to pay shows so).
#[test]
fn hours_are_counted_from_the_batch_time() {
    let mut b = Batch::new("s", at());
    b.hours_to_payment_deadline(at() + chrono::Duration::minutes(90));
    b.hours_to_termination(at() - chrono::Duration::hours(2));
    let d = &b.documents()[0];
    assert_eq!(d["HoursToPaymentDeadline"], 1.5);
    assert_eq!(d["HoursToTermination"], -2.0);
    assert_eq!(d["_aws"]["CloudWatchMetrics"][0]["Dimensions"], json!([["Stack"]]));
}

/// The catalogue names each metric once, each with Stack implied and at most 29 more dimensions.
#[test]
fn the_catalogue_is_consistent() {
    let mut names: Vec<&str> = ALL.iter().map(|m| m.name).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), ALL.len());
    assert!(ALL.iter().all(|m| m.dimensions.len() < 30 && !m.dimensions.contains(&STACK)));
}
