//! The outbox's keys: what each (thread, key) pair is sent or run once under. Exactly-once
//! rests on two writers of one thing building the same key and two things never sharing one, so
//! the key's grammar is held here, in one type, rather than spelt by each writer:
//!
//! ```text
//! key     = action | notice
//! action  = "action-" rest                    a rule's hand-off order, its records and messages
//! notice  = name [ "@workloads"                the workloads topic's copy of a milestone
//!                | "@events" [ "@" account ] ] capblock's event, and a member account's copy
//! name    = one or more characters, no "@", not starting "action-"
//! account = 12 digits
//! ```
//!
//! An action's `rest` is opaque (an Auto Scaling group's name may hold an `@`): action keys carry
//! no channel. A key is at most [`MAX_KEY_BYTES`] long. A key read back from the store is parsed
//! ([`OutboxKey::parse`]); one that breaks the grammar is named by the error, never guessed at.

use std::fmt;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The longest key: DynamoDB's 1,024-byte sort key, less the item's `NOTICE#` prefix.
pub const MAX_KEY_BYTES: usize = 1024 - "NOTICE#".len();

const ACTION: &str = "action-";
const WORKLOADS: &str = "@workloads";
const EVENTS: &str = "@events";
const ACCOUNT_DIGITS: usize = 12;

/// One outbox key, of one kind by its grammar. Stored (and serialized) as its text.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct OutboxKey {
    text: String,
    /// Always what `classify` finds in `text`: set by the constructors and `parse` only.
    tag: Tag,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Tag {
    Notice,
    Workloads,
    Events,
    ConsumerEvents,
    Action,
}

/// What a key is for, with its parts (borrowed from the key).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind<'a> {
    /// A Slack notice (or a record) under a milestone's name.
    Notice(&'a str),
    /// The workloads topic's notice of the milestone `name`.
    Workloads(&'a str),
    /// capblock's event for the milestone or step `name`, on its own bus.
    Events(&'a str),
    /// The copy of that event for a member account's default bus.
    ConsumerEvents { name: &'a str, account: &'a str },
    /// A hand-off order, or a record or message of one: the text after `action-`.
    Action(&'a str),
}

/// Why a text is not an outbox key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyProblem {
    #[error("a key is never empty")]
    Empty,
    #[error("the name before the {channel:?} channel is empty")]
    EmptyName { channel: &'static str },
    #[error("a name may not hold '@' (only its channel follows one): {name:?}")]
    AtInName { name: String },
    #[error("{name:?} starts with \"action-\": action keys are built as actions")]
    ActionName { name: String },
    #[error("{channel:?} is no channel (\"@workloads\", \"@events\" or \"@events@<account>\")")]
    UnknownChannel { channel: String },
    #[error("{account:?} is not a 12-digit account")]
    BadAccount { account: String },
    #[error("only an event key (\"<name>@events\") has account copies")]
    NotAnEvent,
    #[error("{bytes} bytes is longer than the {MAX_KEY_BYTES} a key may be")]
    TooLong { bytes: usize },
}

/// A text that is not an outbox key, named with what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("outbox key {key:?}: {problem}")]
pub struct OutboxKeyError {
    pub key: String,
    pub problem: KeyProblem,
}

impl OutboxKey {
    /// Reads a key back (from the store): the kind its grammar says, or what is wrong with it.
    pub fn parse(text: &str) -> Result<OutboxKey, OutboxKeyError> {
        let fail = |problem| OutboxKeyError { key: text.to_string(), problem };
        let tag = classify(text).map_err(fail)?;
        if text.len() > MAX_KEY_BYTES {
            return Err(fail(KeyProblem::TooLong { bytes: text.len() }));
        }
        Ok(OutboxKey { text: text.to_string(), tag })
    }

    /// The key of a Slack notice (or a record) under the milestone `name`.
    pub fn notice(name: impl Into<String>) -> Result<OutboxKey, OutboxKeyError> {
        let name = name.into();
        OutboxKey::with_channel(name, "", Tag::Notice)
    }

    /// The key of the workloads topic's notice of the milestone `name`: `<name>@workloads`.
    pub fn workloads(name: impl Into<String>) -> Result<OutboxKey, OutboxKeyError> {
        OutboxKey::with_channel(name.into(), WORKLOADS, Tag::Workloads)
    }

    /// The key of capblock's event for the milestone or step `name`: `<name>@events`.
    pub fn events(name: impl Into<String>) -> Result<OutboxKey, OutboxKeyError> {
        OutboxKey::with_channel(name.into(), EVENTS, Tag::Events)
    }

    fn with_channel(name: String, channel: &'static str, tag: Tag) -> Result<OutboxKey, OutboxKeyError> {
        let text = format!("{name}{channel}");
        let fail = |problem| OutboxKeyError { key: text.clone(), problem };
        check_name(&name, channel).map_err(fail)?;
        if text.len() > MAX_KEY_BYTES {
            return Err(fail(KeyProblem::TooLong { bytes: text.len() }));
        }
        Ok(OutboxKey { text, tag })
    }

    /// This event's copy for `account`'s default bus: `<name>@events@<account>`.
    pub fn for_account(&self, account: &str) -> Result<OutboxKey, OutboxKeyError> {
        let text = format!("{}@{account}", self.text);
        let fail = |problem| OutboxKeyError { key: text.clone(), problem };
        if self.tag != Tag::Events {
            return Err(fail(KeyProblem::NotAnEvent));
        }
        check_account(account).map_err(fail)?;
        if text.len() > MAX_KEY_BYTES {
            return Err(fail(KeyProblem::TooLong { bytes: text.len() }));
        }
        Ok(OutboxKey { text, tag: Tag::ConsumerEvents })
    }

    /// The key of a hand-off order: `action-<rest>`. Never fails: a rest that would make the key
    /// too long is replaced by its SHA-256 (the names in it are shortened before, so no key
    /// built today is).
    pub fn action(rest: impl Into<String>) -> OutboxKey {
        let rest = rest.into();
        let text = format!("{ACTION}{rest}");
        if text.len() <= MAX_KEY_BYTES {
            return OutboxKey { text, tag: Tag::Action };
        }
        let digest = Sha256::digest(rest.as_bytes());
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        OutboxKey { text: format!("{ACTION}sha256-{hex}"), tag: Tag::Action }
    }

    /// The key of what follows this action (its record, its message, its next order):
    /// `action-<rest>-<step>`.
    pub fn then(&self, step: impl fmt::Display) -> OutboxKey {
        OutboxKey::action(format!("{}-{step}", self.action_rest()))
    }

    /// The prefix every `then(step)` key of this action starts with, for a prefix query:
    /// `action-<rest>-<step>`.
    pub fn prefix(&self, step: &str) -> String {
        format!("{}-{step}", self.text)
    }

    /// What follows `<base>-<step>` in this key, when this key is one of `base`'s `step`
    /// records (`sending-<n>`, `ram-arn-<n>`): the record's own part, read back.
    pub fn after(&self, base: &OutboxKey, step: &str) -> Option<&str> {
        self.text.strip_prefix(base.text.as_str())?.strip_prefix('-')?.strip_prefix(step)
    }

    /// The text after `action-` of an action key; a notice key's whole text otherwise.
    fn action_rest(&self) -> &str {
        self.text.strip_prefix(ACTION).unwrap_or(&self.text)
    }

    /// What the key is for, and its parts.
    pub fn kind(&self) -> KeyKind<'_> {
        let t = self.text.as_str();
        let cut = |n: usize| &t[..t.len() - n];
        match self.tag {
            Tag::Notice => KeyKind::Notice(t),
            Tag::Workloads => KeyKind::Workloads(cut(WORKLOADS.len())),
            Tag::Events => KeyKind::Events(cut(EVENTS.len())),
            Tag::ConsumerEvents => {
                let split = t.len() - ACCOUNT_DIGITS;
                KeyKind::ConsumerEvents { name: &t[..split - 1 - EVENTS.len()], account: &t[split..] }
            }
            Tag::Action => KeyKind::Action(self.action_rest()),
        }
    }

    /// The key as the store holds it.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

/// The kind `text`'s grammar gives it (the length is checked apart).
fn classify(text: &str) -> Result<Tag, KeyProblem> {
    if text.is_empty() {
        return Err(KeyProblem::Empty);
    }
    if text.starts_with(ACTION) {
        return Ok(Tag::Action);
    }
    let Some(at) = text.find('@') else {
        check_name(text, "")?;
        return Ok(Tag::Notice);
    };
    let (name, channel) = text.split_at(at);
    let tag = match channel {
        WORKLOADS => Tag::Workloads,
        EVENTS => Tag::Events,
        _ => match channel.strip_prefix(EVENTS).and_then(|a| a.strip_prefix('@')) {
            Some(account) => {
                check_account(account)?;
                Tag::ConsumerEvents
            }
            None => return Err(KeyProblem::UnknownChannel { channel: channel.to_string() }),
        },
    };
    check_name(name, if tag == Tag::Workloads { WORKLOADS } else { EVENTS })?;
    Ok(tag)
}

fn check_name(name: &str, channel: &'static str) -> Result<(), KeyProblem> {
    if name.is_empty() {
        return Err(if channel.is_empty() { KeyProblem::Empty } else { KeyProblem::EmptyName { channel } });
    }
    if name.contains('@') {
        return Err(KeyProblem::AtInName { name: name.to_string() });
    }
    if name.starts_with(ACTION) {
        return Err(KeyProblem::ActionName { name: name.to_string() });
    }
    Ok(())
}

fn check_account(account: &str) -> Result<(), KeyProblem> {
    if account.len() == ACCOUNT_DIGITS && account.bytes().all(|b| b.is_ascii_digit()) {
        Ok(())
    } else {
        Err(KeyProblem::BadAccount { account: account.to_string() })
    }
}

impl fmt::Display for OutboxKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl From<OutboxKey> for String {
    fn from(k: OutboxKey) -> String {
        k.text
    }
}

impl TryFrom<String> for OutboxKey {
    type Error = OutboxKeyError;
    fn try_from(text: String) -> Result<OutboxKey, OutboxKeyError> {
        OutboxKey::parse(&text)
    }
}

/// Read as the text it is (a prefix match, a log line), never built from one: see `parse`.
impl std::ops::Deref for OutboxKey {
    type Target = str;
    fn deref(&self) -> &str {
        &self.text
    }
}

impl PartialEq<str> for OutboxKey {
    fn eq(&self, other: &str) -> bool {
        self.text == other
    }
}

impl PartialEq<String> for OutboxKey {
    fn eq(&self, other: &String) -> bool {
        self.text == *other
    }
}

impl PartialEq<&str> for OutboxKey {
    fn eq(&self, other: &&str) -> bool {
        self.text == *other
    }
}

#[cfg(test)]
mod tests;
