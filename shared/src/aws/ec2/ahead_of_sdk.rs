//! EC2's fields of 2026-11-17 that aws-sdk-ec2 does not have yet, read and sent around the
//! SDK's own client: DescribeCapacityBlockOfferings' `InstanceTypePreferences` (up to 10
//! instance types a question), an offering's `CapacityBlockOfferingSegments` and
//! PurchaseCapacityBlock's `CapacityReservations` (one reservation per segment).
//!
//! Why: aws-sdk-ec2 (1.274, the newest crate) predates them; its serializer cannot send the
//! preferences and its deserializer drops the segments and the reservation list it does not
//! know. Without them capblock would price a segmented offering on its top-level fields (one
//! segment at the whole fee) and learn its other reservations only by tag. So an interceptor
//! on the operation (`AheadOfSdk`) adds the preferences to the serialized query before the
//! request is signed and keeps the raw answer's body, which `offering_segments` and
//! `reservation_ids` read with the SDK's own XML decoder (aws-smithy-xml) in the wire names of
//! EC2's query protocol (`capacityBlockOfferingSegmentSet`, `capacityReservationSet`, an `item`
//! per member). Everything else still goes through the SDK: its signing, retries, endpoint and
//! typed answer.
//!
//! This module goes when the SDK has the fields: then the preferences are set on the fluent
//! builder and the segments and reservations are read from the typed output, as every other
//! field is.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::interceptors::context::{
    AfterDeserializationInterceptorContextRef, BeforeTransmitInterceptorContextMut,
};
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::body::SdkBody;
use aws_smithy_types::config_bag::ConfigBag;
use aws_smithy_xml::decode::{Document, ScopedDecoder, try_data};

use crate::domain::offering::RawSegment;

/// Query parameters the SDK cannot serialize, added to its request, and the raw body of the
/// answer, kept for what the SDK cannot deserialize. One per call (`customize().interceptor`).
#[derive(Debug, Clone, Default)]
pub(super) struct AheadOfSdk {
    extra: Vec<(String, String)>,
    body: Arc<Mutex<Option<String>>>,
}

impl AheadOfSdk {
    /// Adds `InstanceTypePreferences.N` (from 1) for each of `types`.
    pub(super) fn with_preferences(types: &[&str]) -> Self {
        let extra =
            types.iter().enumerate().map(|(i, t)| (format!("InstanceTypePreferences.{}", i + 1), t.to_string()));
        Self { extra: extra.collect(), body: Arc::default() }
    }

    /// The answer's body as EC2 sent it, once the SDK has read it (`None` before, or when the
    /// call never got an answer).
    pub(super) fn body(&self) -> Option<String> {
        self.body.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl Intercept for AheadOfSdk {
    fn name(&self) -> &'static str {
        "AheadOfSdk"
    }

    /// Before the retry loop, so every attempt signs the request with the added parameters.
    fn modify_before_retry_loop(
        &self,
        context: &mut BeforeTransmitInterceptorContextMut<'_>,
        _: &RuntimeComponents,
        _: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if self.extra.is_empty() {
            return Ok(());
        }
        let request = context.request_mut();
        let sent = request.body().bytes().ok_or("the SDK's EC2 request body is a stream, not a query")?;
        let body = with_params(sent, &self.extra);
        let length = body.len().to_string();
        *request.body_mut() = SdkBody::from(body);
        request.headers_mut().insert("content-length", length);
        Ok(())
    }

    fn read_after_deserialization(
        &self,
        context: &AfterDeserializationInterceptorContextRef<'_>,
        _: &RuntimeComponents,
        _: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let text = context.response().body().bytes().map(|b| String::from_utf8_lossy(b).into_owned());
        *self.body.lock().unwrap_or_else(|e| e.into_inner()) = text;
        Ok(())
    }
}

/// A form-encoded query with `extra` appended, each name and value percent-encoded.
fn with_params(sent: &[u8], extra: &[(String, String)]) -> Vec<u8> {
    let mut body = sent.to_vec();
    for (k, v) in extra {
        if !body.is_empty() {
            body.push(b'&');
        }
        body.extend(encode(k).bytes());
        body.push(b'=');
        body.extend(encode(v).bytes());
    }
    body
}

/// Percent-encoding of a query component: unreserved characters (RFC 3986) as they are.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Each offering's segments in a DescribeCapacityBlockOfferings answer, by offering id
/// (offerings without segments are left out). An answer that is not XML reads as none: the
/// SDK, which read it first, has already refused it.
pub(super) fn offering_segments(body: &str) -> HashMap<String, Vec<RawSegment>> {
    let mut out = HashMap::new();
    let mut doc = Document::new(body);
    let Ok(mut root) = doc.root_element() else { return out };
    while let Some(mut set) = root.next_tag() {
        if !set.start_el().matches("capacityBlockOfferingSet") {
            continue;
        }
        while let Some(mut item) = set.next_tag() {
            let (mut id, mut segments) = (None, Vec::new());
            while let Some(mut field) = item.next_tag() {
                if field.start_el().matches("capacityBlockOfferingId") {
                    id = try_data(&mut field).ok().map(|s| s.into_owned());
                } else if field.start_el().matches("capacityBlockOfferingSegmentSet") {
                    while let Some(mut seg) = field.next_tag() {
                        segments.push(segment(&mut seg));
                    }
                }
            }
            if let Some(id) = id.filter(|_| !segments.is_empty()) {
                out.insert(id, segments);
            }
        }
    }
    out
}

/// One `capacityBlockOfferingSegmentSet` item, field by field (`Offering::parse` judges it).
fn segment(item: &mut ScopedDecoder<'_, '_>) -> RawSegment {
    let mut s = RawSegment::default();
    while let Some(mut field) = item.next_tag() {
        let name = field.start_el().local().to_string();
        let Ok(text) = try_data(&mut field).map(|t| t.into_owned()) else { continue };
        let time = || chrono::DateTime::parse_from_rfc3339(&text).ok().map(|t| t.with_timezone(&chrono::Utc));
        match name.as_str() {
            "instanceType" => s.instance_type = Some(text),
            "availabilityZone" => s.availability_zone = Some(text),
            "instanceCount" => s.instance_count = text.trim().parse().ok(),
            "startDate" => s.start_date = time(),
            "endDate" => s.end_date = time(),
            "upfrontFee" => s.upfront_fee = Some(text),
            "currencyCode" => s.currency_code = Some(text),
            "zoneType" => s.zone_type = Some(text),
            _ => {}
        }
    }
    s
}

/// The ids of every reservation in a PurchaseCapacityBlock answer's `capacityReservationSet`,
/// in order.
pub(super) fn reservation_ids(body: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut doc = Document::new(body);
    let Ok(mut root) = doc.root_element() else { return out };
    while let Some(mut set) = root.next_tag() {
        if !set.start_el().matches("capacityReservationSet") {
            continue;
        }
        while let Some(mut item) = set.next_tag() {
            while let Some(mut field) = item.next_tag() {
                if field.start_el().matches("capacityReservationId")
                    && let Ok(id) = try_data(&mut field)
                {
                    out.push(id.into_owned());
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const OFFERINGS: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<DescribeCapacityBlockOfferingsResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">
  <requestId>r-1</requestId>
  <capacityBlockOfferingSet>
    <item>
      <capacityBlockOfferingId>cb-plain</capacityBlockOfferingId>
      <instanceType>p5.48xlarge</instanceType>
    </item>
    <item>
      <capacityBlockOfferingId>cb-segmented</capacityBlockOfferingId>
      <instanceType>p5.48xlarge</instanceType>
      <capacityBlockOfferingSegmentSet>
        <item>
          <instanceType>p5.48xlarge</instanceType><availabilityZone>us-east-1a</availabilityZone>
          <instanceCount>2</instanceCount><startDate>2026-12-03T11:30:00.000Z</startDate>
          <endDate>2026-12-04T11:30:00.000Z</endDate><upfrontFee>960.00</upfrontFee>
          <currencyCode>USD</currencyCode><zoneType>availability-zone</zoneType>
        </item>
        <item>
          <instanceType>p5en.48xlarge</instanceType><availabilityZone>us-east-1b</availabilityZone>
          <instanceCount>1</instanceCount><upfrontFee>480.00</upfrontFee>
        </item>
      </capacityBlockOfferingSegmentSet>
      <upfrontFee>1440.00</upfrontFee>
    </item>
  </capacityBlockOfferingSet>
</DescribeCapacityBlockOfferingsResponse>"#;

    #[test]
    fn segments_are_read_by_offering_from_the_raw_answer() {
        let all = offering_segments(OFFERINGS);
        assert_eq!(all.len(), 1, "the plain offering has none");
        let segs = &all["cb-segmented"];
        assert_eq!(segs.len(), 2);
        assert_eq!(segs[0].instance_type.as_deref(), Some("p5.48xlarge"));
        assert_eq!(segs[0].instance_count, Some(2));
        assert_eq!(segs[0].start_date, Some("2026-12-03T11:30:00Z".parse().unwrap()));
        assert_eq!(segs[0].zone_type.as_deref(), Some("availability-zone"));
        assert_eq!(
            (segs[1].availability_zone.as_deref(), segs[1].upfront_fee.as_deref(), segs[1].end_date),
            (Some("us-east-1b"), Some("480.00"), None)
        );
        assert!(offering_segments("not xml").is_empty());
    }

    #[test]
    fn every_reservation_of_a_purchase_is_read() {
        let body = "<PurchaseCapacityBlockResponse><capacityReservation><capacityReservationId>cr-1\
            </capacityReservationId></capacityReservation><capacityReservationSet><item>\
            <capacityReservationId>cr-1</capacityReservationId><tagSet><item><key>k</key></item></tagSet>\
            </item><item><capacityReservationId>cr-2</capacityReservationId></item>\
            </capacityReservationSet></PurchaseCapacityBlockResponse>";
        assert_eq!(reservation_ids(body), ["cr-1", "cr-2"]);
    }

    #[test]
    fn preferences_are_appended_to_the_query_encoded() {
        let ahead = AheadOfSdk::with_preferences(&["p5.48xlarge", "a b"]);
        let body = with_params(b"Action=DescribeCapacityBlockOfferings", &ahead.extra);
        assert_eq!(
            String::from_utf8(body).unwrap(),
            "Action=DescribeCapacityBlockOfferings&InstanceTypePreferences.1=p5.48xlarge&InstanceTypePreferences.2=a%20b"
        );
    }
}
