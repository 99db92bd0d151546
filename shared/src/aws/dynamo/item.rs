//! Small helpers to build and read DynamoDB items. Domain records are kept whole as a JSON
//! `data` attribute; the attributes that keys, indexes and conditions need sit beside it.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use rust_decimal::Decimal;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::ports::StoreError;

pub type Item = HashMap<String, AttributeValue>;

pub fn s(v: impl Into<String>) -> AttributeValue {
    AttributeValue::S(v.into())
}

pub fn n(v: impl ToString) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

pub fn json<T: Serialize>(v: &T) -> AttributeValue {
    AttributeValue::S(serde_json::to_string(v).expect("domain records serialize"))
}

pub fn key(pk: impl Into<String>, sk: impl Into<String>) -> Item {
    HashMap::from([("pk".to_string(), s(pk)), ("sk".to_string(), s(sk))])
}

fn key_name(item: &Item) -> String {
    let get = |k: &str| item.get(k).and_then(|v| v.as_s().ok()).map(String::as_str).unwrap_or("?");
    format!("{}/{}", get("pk"), get("sk"))
}

pub fn data<T: DeserializeOwned>(item: &Item) -> Result<T, StoreError> {
    let text = item
        .get("data")
        .and_then(|v| v.as_s().ok())
        .ok_or_else(|| StoreError::Corrupt { key: key_name(item), message: "no data attribute".into() })?;
    serde_json::from_str(text).map_err(|e| StoreError::Corrupt { key: key_name(item), message: e.to_string() })
}

pub fn get_s<'a>(item: &'a Item, name: &str) -> Option<&'a str> {
    item.get(name).and_then(|v| v.as_s().ok()).map(String::as_str)
}

/// A string set's members; none when the attribute is absent (DynamoDB stores no empty set).
pub fn get_ss<'a>(item: &'a Item, name: &str) -> impl Iterator<Item = String> + 'a {
    item.get(name).and_then(|v| v.as_ss().ok()).into_iter().flatten().cloned()
}

pub fn get_decimal(item: &Item, name: &str) -> Result<Option<Decimal>, StoreError> {
    match item.get(name).and_then(|v| v.as_n().ok()) {
        None => Ok(None),
        Some(t) => Decimal::from_str_exact(t)
            .or_else(|_| Decimal::from_scientific(t))
            .map(Some)
            .map_err(|e| StoreError::Corrupt { key: key_name(item), message: format!("{name}: {e}") }),
    }
}

pub fn get_u64(item: &Item, name: &str) -> Result<Option<u64>, StoreError> {
    match item.get(name).and_then(|v| v.as_n().ok()) {
        None => Ok(None),
        Some(t) => t
            .parse()
            .map(Some)
            .map_err(|e| StoreError::Corrupt { key: key_name(item), message: format!("{name}: {e}") }),
    }
}
