//! AWS's clock: the `Date` header EC2 answers with. A person's purchase from the CLI is
//! stamped with it (`cli` `purchase_now`), never with the machine's own clock.

use chrono::{DateTime, Utc};

/// AWS's clock, as EC2 tells it: the `Date` header of an answer to a cheap, unlimited call
/// (DescribeCapacityReservations, one result), in the client's region. A person's purchase from
/// the CLI is stamped with it, never with the machine's own clock, which may be off by any
/// amount (an hour ahead freed a purchase in flight; 20 minutes behind had the next scan
/// reject a `sent_at` in the past and buy again). Any answer carries the header, a refusal
/// included; none, or one that cannot be read, is an error.
pub async fn aws_now(sdk: &aws_config::SdkConfig) -> Result<DateTime<Utc>, String> {
    let ec2 = aws_sdk_ec2::Client::new(sdk);
    let seen = DateHeader::default();
    let answer = ec2.describe_capacity_reservations().max_results(5).customize().interceptor(seen.clone()).send().await;
    let header = seen.0.lock().unwrap_or_else(|e| e.into_inner()).clone();
    match (header, answer) {
        (Some(date), _) => http_date(&date).ok_or_else(|| format!("EC2's Date header {date:?} is not an HTTP date")),
        (None, Err(e)) => Err(format!("EC2 did not answer: {}", aws_sdk_ec2::error::DisplayErrorContext(e))),
        (None, Ok(_)) => Err("EC2's answer carried no Date header".into()),
    }
}

/// An HTTP `Date` (IMF-fixdate, RFC 9110: `Tue, 01 Dec 2026 00:00:00 GMT`).
fn http_date(text: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc2822(text.trim()).ok().map(|t| t.with_timezone(&Utc))
}

/// Keeps the `Date` header of the last answer an operation received.
#[derive(Debug, Clone, Default)]
struct DateHeader(std::sync::Arc<std::sync::Mutex<Option<String>>>);

impl aws_smithy_runtime_api::client::interceptors::Intercept for DateHeader {
    fn name(&self) -> &'static str {
        "DateHeader"
    }

    fn read_after_transmit(
        &self,
        context: &aws_smithy_runtime_api::client::interceptors::context::BeforeDeserializationInterceptorContextRef<'_>,
        _: &aws_smithy_runtime_api::client::runtime_components::RuntimeComponents,
        _: &mut aws_smithy_types::config_bag::ConfigBag,
    ) -> Result<(), aws_smithy_runtime_api::box_error::BoxError> {
        if let Some(date) = context.response().headers().get("date") {
            *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(date.to_string());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aws_dates_are_read_as_http_sends_them() {
        assert_eq!(http_date("Tue, 01 Dec 2026 00:00:00 GMT"), Some("2026-12-01T00:00:00Z".parse().unwrap()));
        assert_eq!(http_date(" Thu, 03 Dec 2026 10:30:05 GMT "), Some("2026-12-03T10:30:05Z".parse().unwrap()));
        assert_eq!(http_date("2026-12-01T00:00:00Z"), None);
    }
}
