//! What a person's request says in its own Slack thread (the thread is the request's id), one
//! message per step, naming the requester by their Slack handle when they gave one.

use crate::domain::message_kind::MessageKind;
use crate::domain::request::Request;
use crate::domain::slack::SlackMessage;

use super::when;

/// The message of `kind` (a `Request*` kind) for `request`; `detail` is the step's own fact:
/// who approved, why it was rejected or refused, the block bought, the cheapest offering seen.
pub fn request_step(kind: MessageKind, request: &Request, detail: &str) -> SlackMessage {
    let t = &request.terms;
    let who = t.slack.clone().unwrap_or_else(|| request.requester.clone());
    let what = format!(
        "{} x {} for {} day(s) in {}, starting {} to ending {}, at most {} per accelerator-hour (at most {} in all), team {}",
        t.instance_count,
        t.instance_types.iter().map(|i| i.to_string()).collect::<Vec<_>>().join(" or "),
        t.days,
        t.regions.iter().map(|r| r.to_string()).collect::<Vec<_>>().join(", "),
        when(t.earliest_start),
        when(t.latest_end),
        t.max_price_per_accelerator_hour,
        t.max_fee(),
        t.team
    );
    let id = &request.id;
    let (title, next) = match kind {
        MessageKind::RequestFiled => (
            format!("{who} asks for capacity: {}", t.reason),
            format!("`capblock requests approve {id}` or `capblock requests reject {id}`."),
        ),
        MessageKind::RequestApproved => (
            format!("{who}'s request {id} is approved"),
            "capblock buys the first block in the window under the cap.".to_string(),
        ),
        MessageKind::RequestRejected => (
            format!("{who}'s request {id} is rejected"),
            "File a new request with other terms if it still matters.".to_string(),
        ),
        MessageKind::RequestCancelled => {
            (format!("{who} cancelled request {id}"), "Nothing will be bought for it.".to_string())
        }
        MessageKind::RequestBought => {
            (format!("{who}'s request {id} is bought"), "The block's own messages follow in its thread.".to_string())
        }
        MessageKind::RequestExpired => (
            format!("{who}'s request {id} expired unbought"),
            "File it again with a later window or a higher cap.".to_string(),
        ),
        _ => (
            format!("Request {id} is refused"),
            "Nothing is bought for it; file it again with `capblock request`.".to_string(),
        ),
    };
    SlackMessage {
        id: kind.message_id(id, None),
        title,
        description: format!("{what}.\n{detail}"),
        next_steps: vec![next],
        keywords: vec!["capblock".into(), "request".into(), id.clone(), t.team.clone()],
        thread_id: id.clone(),
        summary: format!("request {id}: {}", kind.key()),
        event_type: kind.event_type().into(),
        related_resources: vec![],
    }
}
