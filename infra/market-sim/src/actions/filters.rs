//! EC2 filter matching: filters AND together, values within one filter OR, values may use the
//! `*` and `?` wildcards.

use crate::wire::error::ApiError;
use crate::wire::query::Filter;

pub fn check_names(filters: &[Filter], allowed: &[&str]) -> Result<(), ApiError> {
    for f in filters {
        let ok = allowed.contains(&f.name.as_str()) || (f.name.starts_with("tag:") && allowed.contains(&"tag:"));
        if !ok {
            return Err(ApiError::invalid_value(format!("The filter '{}' is invalid", f.name)));
        }
    }
    Ok(())
}

/// Whether `value` matches any of the filter's values.
pub fn any(f: &Filter, value: &str) -> bool {
    f.values.iter().any(|pat| glob(pat, value))
}

pub fn glob(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti) = (0, 0);
    let (mut star, mut mark) = (None, 0);
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == '*' {
        pi += 1;
    }
    pi == p.len()
}

/// `tag:KEY` / `tag-key` against a tag list; other names via `field`.
pub fn matches_all(filters: &[Filter], tags: &[(String, String)], field: impl Fn(&str) -> Option<String>) -> bool {
    filters.iter().all(|f| {
        if let Some(key) = f.name.strip_prefix("tag:") {
            tags.iter().any(|(k, v)| k == key && any(f, v))
        } else if f.name == "tag-key" {
            tags.iter().any(|(k, _)| any(f, k))
        } else {
            field(&f.name).is_some_and(|v| any(f, &v))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globbing() {
        assert!(glob("p5*", "p5.48xlarge"));
        assert!(glob("*", ""));
        assert!(glob("a?c", "abc"));
        assert!(!glob("a?c", "abbc"));
        assert!(glob("*xl*e", "p5.48xlarge"));
        assert!(!glob("p4*", "p5.48xlarge"));
        assert!(glob("exact", "exact"));
    }

    #[test]
    fn filter_semantics() {
        let f = |n: &str, v: &[&str]| Filter { name: n.into(), values: v.iter().map(|s| s.to_string()).collect() };
        let tags = vec![("team".to_string(), "ml".to_string())];
        let field = |n: &str| (n == "state").then(|| "active".to_string());
        assert!(matches_all(&[f("tag:team", &["ml", "x"]), f("state", &["active"])], &tags, field));
        assert!(!matches_all(&[f("tag:team", &["x"])], &tags, field));
        assert!(matches_all(&[f("tag-key", &["te*"])], &tags, field));
        assert!(!matches_all(&[f("state", &["scheduled"])], &tags, field));
        assert!(check_names(&[f("tag:anything", &[])], &["tag:"]).is_ok());
        assert_eq!(check_names(&[f("bogus", &[])], &["state"]).unwrap_err().code, "InvalidParameterValue");
    }
}
