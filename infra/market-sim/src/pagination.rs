//! NextToken/MaxResults paging. Tokens are opaque to clients but simple here: the offset plus a
//! fingerprint of the request, so a token replayed with different filters is rejected the way
//! EC2 rejects it.

use crate::rng::stable_hash;
use crate::wire::error::ApiError;
use crate::wire::query::Params;

pub const DEFAULT_PAGE: usize = 1000;

/// Hash of every parameter except the paging ones, order-independent.
pub fn fingerprint(action: &str, region: &str, params: &Params) -> u64 {
    let mut v: Vec<String> = params
        .pairs()
        .iter()
        .filter(|(k, _)| k != "NextToken" && k != "MaxResults")
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    v.sort();
    stable_hash(&format!("{action}|{region}|{}", v.join("&")))
}

/// Validates MaxResults against `[min, max]` (the model's bounds).
pub fn page_size(params: &Params, min: i64, max: i64) -> Result<usize, ApiError> {
    match params.int("MaxResults")? {
        None => Ok(DEFAULT_PAGE.min(max as usize)),
        Some(n) if (min..=max).contains(&n) => Ok(n as usize),
        Some(n) => Err(ApiError::invalid_value(format!(
            "Value ({n}) for parameter MaxResults is invalid. Expected a value between {min} and {max}."
        ))),
    }
}

pub fn paginate<T: Clone>(
    items: &[T],
    size: usize,
    token: Option<&str>,
    fp: u64,
) -> Result<(Vec<T>, Option<String>), ApiError> {
    let offset = match token.filter(|t| !t.is_empty()) {
        None => 0,
        Some(t) => decode(t, fp).filter(|&o| o <= items.len()).ok_or_else(|| {
            ApiError::client("InvalidPaginationToken", format!("The pagination token {t} is invalid or expired."))
        })?,
    };
    let end = (offset + size).min(items.len());
    let next = (end < items.len()).then(|| encode(end, fp));
    Ok((items[offset..end].to_vec(), next))
}

fn encode(offset: usize, fp: u64) -> String {
    format!("p{offset}x{fp:016x}")
}

fn decode(t: &str, fp: u64) -> Option<usize> {
    let (off, f) = t.strip_prefix('p')?.split_once('x')?;
    (u64::from_str_radix(f, 16).ok()? == fp).then_some(())?;
    off.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_through_everything_once() {
        let items: Vec<u32> = (0..7).collect();
        let mut seen = vec![];
        let mut token = None;
        loop {
            let (page, next) = paginate(&items, 3, token.as_deref(), 42).unwrap();
            assert!(page.len() <= 3);
            seen.extend(page);
            match next {
                Some(t) => token = Some(t),
                None => break,
            }
        }
        assert_eq!(seen, items);
    }

    #[test]
    fn rejects_foreign_or_garbage_tokens() {
        let items: Vec<u32> = (0..7).collect();
        let (_, next) = paginate(&items, 3, None, 42).unwrap();
        let t = next.unwrap();
        assert_eq!(paginate(&items, 3, Some(&t), 43).unwrap_err().code, "InvalidPaginationToken");
        assert!(paginate(&items, 3, Some("nope"), 42).is_err());
        assert!(paginate(&items, 3, Some("p99x000000000000002a"), 42).is_err());
        // Exact fit: no token.
        assert_eq!(paginate(&items, 7, None, 42).unwrap().1, None);
        assert!(paginate::<u32>(&[], 3, None, 42).unwrap().0.is_empty());
    }

    #[test]
    fn max_results_bounds() {
        let p = Params::parse("MaxResults=0");
        assert_eq!(page_size(&p, 1, 1000).unwrap_err().code, "InvalidParameterValue");
        assert!(page_size(&Params::parse("MaxResults=1001"), 1, 1000).is_err());
        assert_eq!(page_size(&Params::parse("MaxResults=1000"), 1, 1000).unwrap(), 1000);
        assert_eq!(page_size(&Params::parse(""), 1, 1000).unwrap(), 1000);
    }
}
