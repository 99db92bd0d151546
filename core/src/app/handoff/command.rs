//! The Run Command orders: the command sent once to each of the block's instances, and its
//! follow-up, the results collected once every instance has finished it.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};

use super::{ActionRunner, Tried, record};
use crate::domain::handoff::{self, Invocation, Order, Planned};
use crate::domain::ids::Region;
use crate::domain::message_kind::MessageKind;
use crate::ports::{ActionError, Outbox, SentCommand, StoreError};

/// The steps a send is recorded under: its instances before SendCommand, its command id after.
const SENDING: &str = "sending-";
const SENT: &str = "sent-";

impl ActionRunner<'_> {
    /// Reports the command's results once no instance is still running it.
    pub(super) async fn command_result(
        &self,
        p: &Planned,
        commands: &BTreeMap<String, String>,
    ) -> Result<Tried, ActionError> {
        let region = p.target.block.region.clone();
        let mut results = BTreeMap::new();
        for (instance, command_id) in commands {
            results.insert(instance.clone(), self.commands.invocation(&region, command_id, instance).await?);
        }
        match handoff::command_summary(&results) {
            None => {
                let running = results.iter().filter(|(_, r)| **r == Invocation::Running).count();
                Ok(Tried::NotYet(format!("{running} instance(s) still running it")))
            }
            Some(summary) => Ok(Tried::Reported(handoff::announce_command_result(p, &summary.ran, &summary.failed))),
        }
    }

    /// Sends the command to the block's running instances that do not have it yet: those its
    /// own recorded commands reached. Each send is recorded twice: `sending-<n>` (the instances)
    /// before SendCommand and `sent-<n>` (the command id) after it. A command found by its mark
    /// (`Commands::sent`) is taken as capblock's only for a send whose answer was lost (marked
    /// sending, never recorded sent), and only to the instances that send was for: anyone allowed
    /// to send commands can send one with the same mark, and must not suppress capblock's.
    pub(super) async fn send_command<O: Outbox + ?Sized>(
        &self,
        outbox: &O,
        p: &Planned,
        region: &Region,
        document: &str,
        comment: &str,
        now: DateTime<Utc>,
    ) -> Result<Tried, ActionError> {
        let fail =
            |operation: &'static str, message: String| ActionError { operation, region: region.to_string(), message };
        let store = |e: StoreError| fail("the table", e.to_string());
        let thread = &p.target.block.reservation_id;
        let instances =
            self.instances.instances_in(region, thread).await.map_err(|e| fail("DescribeInstances", e.to_string()))?;
        if instances.is_empty() {
            return Ok(Tried::Done("No instance runs in the block: nothing to send.".into()));
        }
        let (mut by_instance, n) = self.sent_before(outbox, p, region, (document, comment), now).await?;
        let rest: Vec<String> = instances.iter().filter(|i| !by_instance.contains_key(*i)).cloned().collect();
        let already = instances.len() - rest.len();
        if !rest.is_empty() {
            if !outbox
                .put_record(&record(thread, p.key.then(format!("{SENDING}{n}")), &rest, now))
                .await
                .map_err(store)?
            {
                return Err(fail("the table", format!("another run is sending {} (send {n})", p.key)));
            }
            let id = self.commands.send(region, document, &rest, comment).await?;
            let own = SentCommand { command_id: id.clone(), instance_ids: rest.clone() };
            outbox.put_record(&record(thread, p.key.then(format!("{SENT}{n}")), &own, now)).await.map_err(store)?;
            for i in &rest {
                by_instance.insert(i.clone(), id.clone());
            }
        }
        let commands: BTreeMap<String, String> =
            by_instance.into_iter().filter(|(i, _)| instances.contains(i)).collect();
        let ids: BTreeSet<&String> = commands.values().collect();
        let what = format!(
            "Sent to {} instance(s) ({} had it already): command {}.",
            rest.len(),
            already,
            ids.into_iter().map(String::as_str).collect::<Vec<_>>().join(", ")
        );
        let next = Planned {
            key: p.key.then(MessageKind::ActionResult.key()),
            target: p.target.clone(),
            order: Order::CommandResult { document: document.to_string(), commands },
            dry_run: false,
        };
        Ok(Tried::Then(what, Box::new(next)))
    }

    /// What capblock sent the block's instances before, as the command each has by instance:
    /// the sends recorded `sent-<n>`, and each send marked `sending-<n>` but never recorded whose
    /// command SSM lists by its mark, the document and comment (recorded sent now). With the
    /// number of sends marked, which numbers the next.
    async fn sent_before<O: Outbox + ?Sized>(
        &self,
        outbox: &O,
        p: &Planned,
        region: &Region,
        (document, comment): (&str, &str),
        now: DateTime<Utc>,
    ) -> Result<(BTreeMap<String, String>, usize), ActionError> {
        let fail =
            |operation: &'static str, message: String| ActionError { operation, region: region.to_string(), message };
        let store = |e: StoreError| fail("the table", e.to_string());
        let thread = &p.target.block.reservation_id;
        let records = outbox.records(thread, &p.key.prefix("sen")).await.map_err(store)?;
        let read = |step: &str| -> BTreeMap<String, String> {
            records
                .iter()
                .filter_map(|r| Some((r.milestone.after(&p.key, step)?.to_string(), r.message.body.clone())))
                .collect()
        };
        let (marked, recorded) = (read(SENDING), read(SENT));
        let mut by_instance: BTreeMap<String, String> = BTreeMap::new();
        for body in recorded.values() {
            let own: SentCommand = serde_json::from_str(body).map_err(|e| fail("the table", e.to_string()))?;
            for i in own.instance_ids {
                by_instance.entry(i).or_insert_with(|| own.command_id.clone());
            }
        }
        for (n, body) in marked.iter().filter(|(n, _)| !recorded.contains_key(*n)) {
            let to: Vec<String> = serde_json::from_str(body).map_err(|e| fail("the table", e.to_string()))?;
            let found = self.commands.sent(region, document, comment, &to).await?;
            let Some(own) = found.into_iter().find(|c| c.instance_ids.iter().all(|i| to.contains(i))) else {
                // SSM never had it: `send_command` sends the instances it anew, under a new number.
                continue;
            };
            outbox.put_record(&record(thread, p.key.then(format!("{SENT}{n}")), &own, now)).await.map_err(store)?;
            for i in own.instance_ids {
                by_instance.entry(i).or_insert_with(|| own.command_id.clone());
            }
        }
        Ok((by_instance, marked.len()))
    }
}
