//! EC2 Query request parsing: `application/x-www-form-urlencoded` pairs, with EC2's list
//! flattening (`Name.1`, `Name.2`), structures (`Filter.1.Name`, `Filter.1.Value.1`) and
//! scalar encodings (booleans `true`/`false`, ISO 8601 timestamps).

use chrono::{DateTime, TimeZone, Utc};

use super::error::ApiError;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Params {
    pairs: Vec<(String, String)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Filter {
    pub name: String,
    pub values: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TagSpec {
    pub resource_type: Option<String>,
    pub tags: Vec<(String, String)>,
}

/// Decodes one form component: `+` is a space, `%XX` a byte; invalid escapes are kept literally
/// (lenient, like most servers), and bytes are reassembled as UTF-8.
pub fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => match (hex_val(bytes[i + 1]), hex_val(bytes[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push(h << 4 | l);
                    i += 3;
                    continue;
                }
                _ => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex_val(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

impl Params {
    pub fn parse(form: &str) -> Self {
        let mut p = Self::default();
        p.extend(form);
        p
    }

    /// Adds the pairs of another form string (a GET query string plus a POST body).
    pub fn extend(&mut self, form: &str) {
        for part in form.split('&').filter(|s| !s.is_empty()) {
            let (k, v) = part.split_once('=').unwrap_or((part, ""));
            self.pairs.push((percent_decode(k), percent_decode(v)));
        }
    }

    pub fn from_pairs(pairs: &[(&str, &str)]) -> Self {
        Self { pairs: pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect() }
    }

    pub fn pairs(&self) -> &[(String, String)] {
        &self.pairs
    }

    /// The last value given for `name` (EC2 does not define duplicates; last wins).
    pub fn get(&self, name: &str) -> Option<&str> {
        self.pairs.iter().rev().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    pub fn require(&self, name: &str) -> Result<&str, ApiError> {
        match self.get(name) {
            Some(v) if !v.is_empty() => Ok(v),
            _ => Err(ApiError::missing(name)),
        }
    }

    pub fn bool(&self, name: &str) -> Result<Option<bool>, ApiError> {
        match self.get(name) {
            None => Ok(None),
            Some(v) if v.eq_ignore_ascii_case("true") => Ok(Some(true)),
            Some(v) if v.eq_ignore_ascii_case("false") => Ok(Some(false)),
            Some(v) => Err(ApiError::invalid_value(format!(
                "Value ({v}) for parameter {name} is invalid. Expected a boolean."
            ))),
        }
    }

    /// True when `DryRun=true`.
    pub fn dry_run(&self) -> Result<bool, ApiError> {
        Ok(self.bool("DryRun")?.unwrap_or(false))
    }

    pub fn int(&self, name: &str) -> Result<Option<i64>, ApiError> {
        match self.get(name) {
            None => Ok(None),
            Some(v) => v.trim().parse::<i64>().map(Some).map_err(|_| {
                ApiError::invalid_value(format!("Value ({v}) for parameter {name} is invalid. Expected an integer."))
            }),
        }
    }

    pub fn timestamp(&self, name: &str) -> Result<Option<DateTime<Utc>>, ApiError> {
        match self.get(name) {
            None => Ok(None),
            Some(v) => parse_timestamp(v).map(Some).ok_or_else(|| {
                ApiError::invalid_value(format!(
                    "Value ({v}) for parameter {name} is invalid. Expected an ISO 8601 timestamp."
                ))
            }),
        }
    }

    /// Flattened list `name.1`, `name.2`, ... in index order (gaps allowed).
    pub fn list(&self, name: &str) -> Vec<String> {
        let prefix = format!("{name}.");
        let mut items: Vec<(u32, String)> = self
            .pairs
            .iter()
            .filter_map(|(k, v)| {
                let idx = k.strip_prefix(&prefix)?;
                idx.parse::<u32>().ok().map(|i| (i, v.clone()))
            })
            .collect();
        items.sort_by_key(|(i, _)| *i);
        items.into_iter().map(|(_, v)| v).collect()
    }

    /// Indices N for which some key `name.N.<anything>` exists, sorted.
    fn struct_indices(&self, name: &str) -> Vec<u32> {
        let prefix = format!("{name}.");
        let mut idx: Vec<u32> = self
            .pairs
            .iter()
            .filter_map(|(k, _)| {
                let rest = k.strip_prefix(&prefix)?;
                let (n, _) = rest.split_once('.')?;
                n.parse().ok()
            })
            .collect();
        idx.sort_unstable();
        idx.dedup();
        idx
    }

    /// `Filter.N.Name` + `Filter.N.Value.M`.
    pub fn filters(&self) -> Vec<Filter> {
        self.struct_indices("Filter")
            .into_iter()
            .filter_map(|i| {
                let name = self.get(&format!("Filter.{i}.Name"))?.to_string();
                Some(Filter { name, values: self.list(&format!("Filter.{i}.Value")) })
            })
            .collect()
    }

    /// `TagSpecification.N.ResourceType` + `TagSpecification.N.Tag.M.Key`/`.Value`.
    pub fn tag_specs(&self) -> Vec<TagSpec> {
        self.struct_indices("TagSpecification")
            .into_iter()
            .map(|i| {
                let base = format!("TagSpecification.{i}");
                let tags = self
                    .struct_indices(&format!("{base}.Tag"))
                    .into_iter()
                    .filter_map(|j| {
                        let key = self.get(&format!("{base}.Tag.{j}.Key"))?.to_string();
                        let value = self.get(&format!("{base}.Tag.{j}.Value")).unwrap_or("").to_string();
                        Some((key, value))
                    })
                    .collect();
                TagSpec { resource_type: self.get(&format!("{base}.ResourceType")).map(str::to_string), tags }
            })
            .collect()
    }
}

/// ISO 8601 / RFC 3339 (`2026-12-01T00:00:00Z`, with or without fractions or offset), or epoch
/// seconds, which some clients send for timestamps.
pub fn parse_timestamp(v: &str) -> Option<DateTime<Utc>> {
    let v = v.trim();
    if let Ok(t) = DateTime::parse_from_rfc3339(v) {
        return Some(t.with_timezone(&Utc));
    }
    // Tolerate a missing zone designator, read as UTC.
    if let Ok(t) = chrono::NaiveDateTime::parse_from_str(v, "%Y-%m-%dT%H:%M:%S%.f") {
        return Some(Utc.from_utc_datetime(&t));
    }
    if let Ok(secs) = v.parse::<f64>() {
        let ms = (secs * 1000.0).round() as i64;
        return Utc.timestamp_millis_opt(ms).single();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_form_components() {
        assert_eq!(percent_decode("a+b%20c%3D%26"), "a b c=&");
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("%zz"), "%zz");
        assert_eq!(percent_decode("%E2%9C%93"), "\u{2713}");
        assert_eq!(percent_decode("Linux%2FUNIX"), "Linux/UNIX");
    }

    #[test]
    fn parses_lists_filters_and_tags() {
        let p = Params::parse(
            "Action=DescribeCapacityReservations&Version=2016-11-15&CapacityReservationId.2=cr-b&CapacityReservationId.1=cr-a\
             &Filter.1.Name=tag%3Aowner&Filter.1.Value.1=team+a&Filter.1.Value.2=x&Filter.2.Name=state&Filter.2.Value.1=active\
             &TagSpecification.1.ResourceType=capacity-reservation&TagSpecification.1.Tag.1.Key=k1&TagSpecification.1.Tag.1.Value=v1\
             &TagSpecification.1.Tag.2.Key=k2&TagSpecification.1.Tag.2.Value=",
        );
        assert_eq!(p.get("Action"), Some("DescribeCapacityReservations"));
        assert_eq!(p.list("CapacityReservationId"), vec!["cr-a", "cr-b"]);
        let f = p.filters();
        assert_eq!(f.len(), 2);
        assert_eq!(f[0].name, "tag:owner");
        assert_eq!(f[0].values, vec!["team a", "x"]);
        assert_eq!(f[1].values, vec!["active"]);
        let t = p.tag_specs();
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].resource_type.as_deref(), Some("capacity-reservation"));
        assert_eq!(t[0].tags, vec![("k1".into(), "v1".into()), ("k2".into(), "".into())]);
    }

    #[test]
    fn parses_scalars() {
        let p =
            Params::parse("DryRun=true&N=24&Bad=x&T=2026-12-01T00%3A00%3A00Z&T2=2026-12-01T00:00:00.500Z&E=1796083200");
        assert_eq!(p.dry_run(), Ok(true));
        assert_eq!(p.int("N").unwrap(), Some(24));
        assert!(p.int("Bad").is_err());
        assert!(p.bool("Bad").is_err());
        assert_eq!(p.int("Missing").unwrap(), None);
        assert_eq!(p.timestamp("T").unwrap().unwrap().to_rfc3339(), "2026-12-01T00:00:00+00:00");
        assert_eq!(p.timestamp("T2").unwrap().unwrap().timestamp_millis() % 1000, 500);
        assert!(p.timestamp("E").unwrap().is_some());
        assert!(p.timestamp("Bad").is_err());
        assert_eq!(p.require("Missing").unwrap_err().code, "MissingParameter");
    }
}
