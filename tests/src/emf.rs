//! A checker for CloudWatch embedded metric format documents, written from the specification
//! (docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch_Embedded_Metric_Format_Specification.html),
//! independently of capblock's builder (`domain::metrics`): a misreading cannot hide on both sides.

use serde_json::Value;

/// The units CloudWatch accepts (StandardUnit).
const UNITS: &[&str] = &[
    "Seconds",
    "Microseconds",
    "Milliseconds",
    "Bytes",
    "Kilobytes",
    "Megabytes",
    "Gigabytes",
    "Terabytes",
    "Bits",
    "Kilobits",
    "Megabits",
    "Gigabits",
    "Terabits",
    "Percent",
    "Count",
    "Bytes/Second",
    "Kilobytes/Second",
    "Megabytes/Second",
    "Gigabytes/Second",
    "Terabytes/Second",
    "Bits/Second",
    "Kilobits/Second",
    "Megabits/Second",
    "Gigabits/Second",
    "Terabits/Second",
    "Count/Second",
    "None",
];

/// Checks one log line; returns the (namespace, metric name) pairs it defines.
pub fn validate(line: &str) -> Result<Vec<(String, String)>, String> {
    // The log event must be one JSON object, nothing before or after it.
    let root: Value = serde_json::from_str(line).map_err(|e| format!("not one JSON value: {e}"))?;
    let root = root.as_object().ok_or("the root is not an object")?;
    if line.len() > 256 * 1024 {
        return Err(format!("{} bytes: past the 256 KB log event limit", line.len()));
    }
    let aws = root.get("_aws").and_then(Value::as_object).ok_or("no _aws metadata object")?;
    let ts = aws.get("Timestamp").ok_or("_aws.Timestamp is missing")?;
    if !(ts.is_u64() || ts.is_i64()) {
        return Err(format!("_aws.Timestamp {ts} is not an integer number of milliseconds"));
    }
    let directives =
        aws.get("CloudWatchMetrics").and_then(Value::as_array).ok_or("_aws.CloudWatchMetrics is not an array")?;
    let mut defined = Vec::new();
    for d in directives {
        let d = d.as_object().ok_or("a MetricDirective is not an object")?;
        let ns = d.get("Namespace").and_then(Value::as_str).ok_or("Namespace is not a string")?;
        if ns.is_empty() || ns.len() > 255 {
            return Err(format!("Namespace {ns:?} must be 1-255 characters"));
        }
        let sets = d.get("Dimensions").and_then(Value::as_array).ok_or("Dimensions is not an array")?;
        for set in sets {
            let set = set.as_array().ok_or("a DimensionSet is not an array")?;
            if set.len() > 30 {
                return Err(format!("a DimensionSet holds {} dimensions, at most 30", set.len()));
            }
            for key in set {
                let key = key.as_str().ok_or("a dimension key is not a string")?;
                match root.get(key) {
                    Some(Value::String(v)) if !v.is_empty() && v.len() <= 1024 => {}
                    Some(v) => return Err(format!("dimension {key}: {v} is not a string of 1-1024 characters")),
                    None => return Err(format!("dimension {key} has no member at the root")),
                }
            }
        }
        let metrics = d.get("Metrics").and_then(Value::as_array).ok_or("Metrics is not an array")?;
        if metrics.len() > 100 {
            return Err(format!("{} metrics in one directive, at most 100", metrics.len()));
        }
        for m in metrics {
            let m = m.as_object().ok_or("a MetricDefinition is not an object")?;
            let name = m.get("Name").and_then(Value::as_str).ok_or("a MetricDefinition has no Name")?;
            if name.is_empty() || name.len() > 1024 {
                return Err(format!("metric name {name:?} must be 1-1024 characters"));
            }
            if let Some(unit) = m.get("Unit") {
                let unit = unit.as_str().ok_or("Unit is not a string")?;
                if !UNITS.contains(&unit) {
                    return Err(format!("{name}: unit {unit:?} is not a CloudWatch unit"));
                }
            }
            if let Some(r) = m.get("StorageResolution")
                && !(r == 1 || r == 60)
            {
                return Err(format!("{name}: StorageResolution {r} is neither 1 nor 60"));
            }
            match root.get(name) {
                Some(Value::Number(_)) => {}
                Some(Value::Array(values)) if values.len() <= 100 && values.iter().all(Value::is_number) => {}
                Some(v) => {
                    return Err(format!("metric {name}: {v} is not a number or an array of at most 100 numbers"));
                }
                None => return Err(format!("metric {name} has no value at the root")),
            }
            defined.push((ns.to_string(), name.to_string()));
        }
    }
    Ok(defined)
}

/// The lines of `text` that are EMF documents (log lines with `_aws` metadata).
pub fn documents(text: &str) -> Vec<&str> {
    text.lines().filter(|l| l.trim_start().starts_with('{') && l.contains("\"_aws\"")).collect()
}

/// The metric names template.yaml's dashboard names (`MetricName="X"` in its SEARCH expressions).
pub fn dashboard_metrics(template: &str) -> std::collections::BTreeSet<String> {
    const KEY: &str = "MetricName=\\\"";
    template
        .match_indices(KEY)
        .filter_map(|(i, _)| {
            let rest = &template[i + KEY.len()..];
            let end = rest.find(|c: char| !c.is_ascii_alphanumeric())?;
            Some(rest[..end].to_string())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The dashboard names only metrics capblock's catalogue defines (and so emits through the
    /// typed `Batch` methods), and shows every one of them.
    #[test]
    fn the_dashboard_names_exactly_the_catalogue() {
        let template = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../template.yaml")).unwrap();
        let named = dashboard_metrics(&template);
        let catalogue: std::collections::BTreeSet<String> =
            capblock_shared::domain::metrics::ALL.iter().map(|m| m.name.to_string()).collect();
        assert!(!named.is_empty(), "no MetricName in the dashboard body");
        assert_eq!(named, catalogue, "dashboard (left) and domain::metrics::ALL (right) differ");
    }

    /// What the builder writes passes this checker.
    #[test]
    fn the_builders_documents_are_valid_emf() {
        use capblock_shared::domain::metrics::{Batch, Questions};
        let at = chrono::DateTime::from_timestamp(1_796_083_200, 0).unwrap();
        let mut b = Batch::new("capblock", at);
        b.price(&"us-east-1".parse().unwrap(), &"p5.48xlarge".parse().unwrap(), rust_decimal::Decimal::new(275, 2));
        b.ultraserver_price(&"us-east-1".parse().unwrap(), "u-trn2x64", rust_decimal::Decimal::new(2, 0));
        b.threshold("r", rust_decimal::Decimal::new(3, 0));
        b.questions(
            &"us-east-1".parse().unwrap(),
            Questions { asked: 2, answered: 1, throttled: 1, carried_over: 1, allowed: 4 },
        );
        b.coverage(
            &"us-east-1".parse().unwrap(),
            capblock_shared::domain::metrics::CoverageFigures {
                questions: 64,
                cycle_secs: 260,
                median_age_secs: 130,
                pace_ms: 4200,
                contended: 1,
            },
        );
        b.blocks("active", 1);
        b.budget("account", rust_decimal::Decimal::ONE, rust_decimal::Decimal::ZERO, rust_decimal::Decimal::TEN);
        b.hours_to_payment_deadline(at);
        b.hours_to_termination(at);
        b.block_use(
            "cr-0123456789abcdef0",
            3,
            Some(rust_decimal::Decimal::new(28800, 2)),
            Some(rust_decimal::Decimal::new(9479, 2)),
            1,
        );
        b.error("scan-offerings", "capblock.BadInput");
        let mut names = std::collections::BTreeSet::new();
        for line in b.lines() {
            for (ns, name) in validate(&line).unwrap_or_else(|e| panic!("{line}: {e}")) {
                assert_eq!(ns, "capblock");
                names.insert(name);
            }
        }
        assert_eq!(names.len(), capblock_shared::domain::metrics::ALL.len());
    }

    #[test]
    fn accepts_the_specifications_example_and_names_what_is_wrong() {
        let good = r#"{"_aws":{"Timestamp":1574109732004,"CloudWatchMetrics":[{"Namespace":"lambda-function-metrics","Dimensions":[["functionVersion"]],"Metrics":[{"Name":"time","Unit":"Milliseconds","StorageResolution":60}]}]},"functionVersion":"$LATEST","time":100,"requestId":"989ffbf8"}"#;
        assert_eq!(validate(good).unwrap(), vec![("lambda-function-metrics".into(), "time".into())]);
        for (bad, why) in [
            (good.replace("\"time\":100", "\"time\":\"100\""), "not a number"),
            (good.replace("\"functionVersion\":\"$LATEST\",", ""), "no member"),
            (good.replace("Milliseconds", "Hours"), "not a CloudWatch unit"),
            (good.replace("1574109732004", "\"now\""), "Timestamp"),
            (good.replace("\"StorageResolution\":60", "\"StorageResolution\":5"), "StorageResolution"),
            (format!("{good} trailing"), "not one JSON value"),
        ] {
            let e = validate(&bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }
}
