//! People's requests (`REQUEST#<requester>` / `REQUEST#<id>`, listed through their own index,
//! gsi2 `REQUESTS`) and the decisions on them (`REQUESTDECISION#<id>` / `DECISION`).
//!
//! A request item's partition key is its requester's `aws:userid`, which the requesters'
//! managed policy (`template.yaml`, `RequesterPolicy`) holds them to with
//! `dynamodb:LeadingKeys`: a requester writes their own items and no other's. IAM cannot hold
//! an attribute's value, only its name (`dynamodb:Attributes`), so requesters write no gsi1
//! attribute (they could put any item into any gsi1 listing: a forged rule, an outbox notice)
//! and their requests are listed through gsi2, which only request items carry and whose every
//! item is checked against its key (`domain::request::check_item`). Their cancel is an
//! attribute of its own (`cancelled_at`), set by one conditional update, so the filed `data`
//! stays as filed. A decision is written once by an approver or the scan, never by a requester
//! (their policy allows no other partition key), and its `consumed_by` is set by the purchase
//! that consumes it (`Ledger::reserve`, `consume_request`).

use super::*;
use crate::domain::ids::RequestKey;
use crate::domain::request::{Request, RequestDecision, RequestVerdict};
use crate::ports::{RequestStore, StoredRequest};

const REQUESTS: &str = "REQUESTS";
/// The requests' own index: only request items carry its attributes.
pub const REQUEST_INDEX: &str = "gsi2";

pub(super) fn request_pk(requester: &str) -> String {
    format!("REQUEST#{requester}")
}

pub(super) fn decision_key(id: &str) -> Item {
    key(format!("REQUESTDECISION#{id}"), "DECISION")
}

/// The item's request, with the key it was read under and its cancel (an attribute of its own).
fn stored_request(item: &Item) -> Result<StoredRequest, StoreError> {
    let mut request: Request = data(item)?;
    let keyed = |name: &str, prefix: &str| get_s(item, name).and_then(|v| v.strip_prefix(prefix)).map(str::to_string);
    let (Some(keyed_requester), Some(keyed_id)) = (keyed("pk", "REQUEST#"), keyed("sk", "REQUEST#")) else {
        return Err(StoreError::Corrupt {
            key: format!("request {}", request.id),
            message: "not a request key".into(),
        });
    };
    if let Some(at) = get_s(item, "cancelled_at") {
        let at = DateTime::parse_from_rfc3339(at).map_err(|e| StoreError::Corrupt {
            key: format!("request {keyed_id}"),
            message: format!("cancelled_at: {e}"),
        })?;
        request.cancelled_at = Some(at.with_timezone(&Utc));
    }
    Ok(StoredRequest { request, keyed_requester, keyed_id })
}

#[async_trait]
impl RequestStore for DynamoStore {
    async fn file_request(&self, request: &Request) -> Result<(), StoreError> {
        let mut item = key(request_pk(&request.requester), format!("REQUEST#{}", request.id));
        item.insert("data".into(), json(&Request { cancelled_at: None, ..request.clone() }));
        item.insert("gsi2pk".into(), s(REQUESTS));
        item.insert("gsi2sk".into(), s(&request.id));
        match self.put_new(item, &format!("request {}", request.id)).await? {
            true => Ok(()),
            false => Err(StoreError::Conflict(format!("request {} exists", request.id))),
        }
    }

    async fn cancel_request(&self, requester: &str, id: &str, at: DateTime<Utc>) -> Result<(), StoreError> {
        let out = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(key(request_pk(requester), format!("REQUEST#{id}"))))
            .update_expression("SET cancelled_at = :at")
            .condition_expression("attribute_exists(pk) AND attribute_not_exists(cancelled_at)")
            .expression_attribute_values(":at", s(at.to_rfc3339()))
            .send()
            .await;
        match out {
            Ok(_) => Ok(()),
            Err(e) => match store_err(&format!("request {id}"), e) {
                // Absent or cancelled: tell the two apart for the person.
                StoreError::Conflict(what) => {
                    match self.get(key(request_pk(requester), format!("REQUEST#{id}"))).await? {
                        None => Err(StoreError::NotFound { what: format!("request {id} of {requester}") }),
                        Some(_) => Err(StoreError::Conflict(format!("{what} is cancelled already"))),
                    }
                }
                other => Err(other),
            },
        }
    }

    async fn requests(&self) -> Result<Vec<StoredRequest>, StoreError> {
        let q = self
            .client
            .query()
            .table_name(&self.table)
            .index_name(REQUEST_INDEX)
            .key_condition_expression("gsi2pk = :pk")
            .expression_attribute_values(":pk", s(REQUESTS));
        let items = Self::all_items(q, "requests").await?;
        Ok(self.decode_each(&items, "requests", stored_request))
    }

    /// Her own partition, strongly read, asking only for the attributes her policy names (its
    /// `dynamodb:Attributes` condition holds for a projection of them).
    async fn requests_of(&self, requester: &str) -> Result<Vec<StoredRequest>, StoreError> {
        let q = self
            .client
            .query()
            .table_name(&self.table)
            .consistent_read(true)
            .key_condition_expression("pk = :pk AND begins_with(sk, :sk)")
            .projection_expression("pk, sk, #data, cancelled_at")
            .expression_attribute_names("#data", "data")
            .expression_attribute_values(":pk", s(request_pk(requester)))
            .expression_attribute_values(":sk", s("REQUEST#"));
        let items = Self::all_items(q, "requests").await?;
        Ok(self.decode_each(&items, "requests", stored_request))
    }

    async fn decide_request(&self, decision: &RequestDecision) -> Result<(), StoreError> {
        let mut item = decision_key(&decision.request_id);
        item.insert("data".into(), json(&RequestDecision { consumed_by: None, ..decision.clone() }));
        let verdict = match decision.verdict {
            RequestVerdict::Approved => "approved",
            RequestVerdict::Rejected { .. } => "rejected",
        };
        item.insert("verdict".into(), s(verdict));
        match self.put_new(item, &format!("decision on request {}", decision.request_id)).await? {
            true => Ok(()),
            false => Err(StoreError::Conflict(format!("request {} is decided already", decision.request_id))),
        }
    }

    async fn decision(&self, id: &str) -> Result<Option<RequestDecision>, StoreError> {
        let Some(item) = self.get(decision_key(id)).await? else { return Ok(None) };
        let mut d: RequestDecision = data(&item)?;
        d.consumed_by = get_s(&item, "consumed_by").map(str::to_string);
        // The verdict a purchase's condition reads must be the one the data says.
        let said = matches!(d.verdict, RequestVerdict::Approved);
        if said != (get_s(&item, "verdict") == Some("approved")) || d.request_id != id {
            return Err(StoreError::Corrupt {
                key: format!("decision on request {id}"),
                message: "verdict or id differs from its data".into(),
            });
        }
        Ok(Some(d))
    }
}

impl DynamoStore {
    /// The reservation's step that consumes request `id`'s approval: the decision must exist,
    /// be an approval and be unconsumed; it is marked `consumed_by` the intent.
    pub(super) fn consume_request(&self, intent: &Intent, id: &str) -> TransactWriteItem {
        tx_update(
            self.update(decision_key(id), "SET consumed_by = :iid")
                .condition_expression(
                    "attribute_exists(pk) AND verdict = :approved AND attribute_not_exists(consumed_by)",
                )
                .expression_attribute_values(":iid", s(&intent.id))
                .expression_attribute_values(":approved", s("approved")),
        )
    }

    /// The reservation's check that the request it buys for is still filed and not cancelled:
    /// the request item itself, read in the same transaction, so a requester's cancel that
    /// lands between the scan's read and the reservation stops the purchase.
    pub(super) fn request_still_open(&self, k: &RequestKey) -> TransactWriteItem {
        TransactWriteItem::builder()
            .condition_check(
                aws_sdk_dynamodb::types::ConditionCheck::builder()
                    .table_name(&self.table)
                    .set_key(Some(key(request_pk(&k.requester), format!("REQUEST#{}", k.id))))
                    .condition_expression("attribute_exists(pk) AND attribute_not_exists(cancelled_at)")
                    .build()
                    .expect("table, key and condition are set"),
            )
            .build()
    }

    /// The give-back's step that un-consumes request `id`'s approval, consumed by `intent`.
    pub(super) fn give_request_back(&self, intent: &Intent, id: &str) -> TransactWriteItem {
        tx_update(
            self.update(decision_key(id), "REMOVE consumed_by")
                .condition_expression("consumed_by = :iid")
                .expression_attribute_values(":iid", s(&intent.id)),
        )
    }
}
