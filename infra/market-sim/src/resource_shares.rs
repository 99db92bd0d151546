//! RAM resource shares and their associations, per region. An association's status is computed
//! lazily from the simulated clock, like a reservation's state: nothing is stored per tick, so
//! moving the clock either way is always consistent.

use chrono::{DateTime, Duration, Utc};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AssociationType {
    Resource,
    Principal,
}

impl AssociationType {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Resource => "RESOURCE",
            Self::Principal => "PRINCIPAL",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Association {
    pub kind: AssociationType,
    /// The resource ARN, or the principal as given (account id, organization or OU ARN).
    pub entity: String,
    pub created: DateTime<Utc>,
    /// Why the association was refused (it goes FAILED with this message once RAM is done
    /// with it), under `ram_refusal = "failed_association"`.
    pub refusal: Option<String>,
    /// A principal outside the organization.
    pub external: bool,
    /// When a DeleteResourceShare or DisassociateResourceShare asked for it to go.
    pub removed: Option<DateTime<Utc>>,
    /// The Capacity Block's reservation, for a resource association: its end ends the sharing.
    pub reservation_id: Option<String>,
}

/// What GetResourceShareAssociations shows of an association at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shown {
    pub status: &'static str,
    pub message: Option<String>,
    pub updated: DateTime<Utc>,
}

/// The statusMessage of a resource association whose Capacity Block ended (a reading).
pub const BLOCK_ENDED: &str = "The Capacity Block ended: it is no longer shared.";

impl Association {
    /// The status at `now`. RAM takes `delay` to associate or disassociate (ASSOCIATING,
    /// DISASSOCIATING meanwhile); a refused association goes FAILED when it would have been
    /// associated; a Capacity Block that `ended` (at that time, if it has) is DISASSOCIATED.
    pub fn shown(&self, now: DateTime<Utc>, delay: Duration, ended: Option<DateTime<Utc>>) -> Shown {
        let ready = self.created + delay;
        let show =
            |status, message: Option<&str>, updated| Shown { status, message: message.map(str::to_string), updated };
        let failed = || show("FAILED", self.refusal.as_deref(), ready);
        if let Some(t) = self.removed.filter(|t| *t <= now) {
            return match () {
                // Never associated: removing it leaves it as RAM left it.
                () if self.refusal.is_some() && t >= ready => failed(),
                () if now < t + delay => show("DISASSOCIATING", None, t),
                () => show("DISASSOCIATED", None, t + delay),
            };
        }
        if now < ready {
            return show("ASSOCIATING", None, self.created);
        }
        if self.refusal.is_some() {
            return failed();
        }
        match ended.filter(|e| *e <= now) {
            Some(e) => show("DISASSOCIATED", Some(BLOCK_ENDED), e.max(ready)),
            None => show("ASSOCIATED", None, ready),
        }
    }

    /// Associated, or on its way to be: what a new association of the same entity would repeat.
    pub fn in_force(&self, now: DateTime<Utc>) -> bool {
        self.refusal.is_none() && self.removed.is_none_or(|t| t > now)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ResourceShare {
    pub arn: String,
    pub name: String,
    pub region: String,
    pub owner: String,
    pub allow_external_principals: bool,
    pub tags: Vec<(String, String)>,
    pub created: DateTime<Utc>,
    pub updated: DateTime<Utc>,
    pub deleted: Option<DateTime<Utc>>,
    /// In the order they were asked for.
    pub associations: Vec<Association>,
}

impl ResourceShare {
    /// ACTIVE, or DELETED from the DeleteResourceShare on.
    pub fn status(&self, now: DateTime<Utc>) -> &'static str {
        if self.deleted.is_some_and(|t| t <= now) { "DELETED" } else { "ACTIVE" }
    }

    /// The share's associations in force of one kind.
    pub fn in_force(&self, kind: AssociationType, now: DateTime<Utc>) -> impl Iterator<Item = &Association> {
        self.associations.iter().filter(move |a| a.kind == kind && a.in_force(now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn t0() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 12, 1, 0, 0, 0).unwrap()
    }

    fn assoc(refusal: Option<&str>) -> Association {
        Association {
            kind: AssociationType::Resource,
            entity: "arn:aws:ec2:us-east-1:111122223333:capacity-reservation/cr-1".into(),
            created: t0(),
            refusal: refusal.map(str::to_string),
            external: false,
            removed: None,
            reservation_id: Some("cr-1".into()),
        }
    }

    fn at(a: &Association, secs: i64, delay: i64, ended: Option<i64>) -> (&'static str, Option<String>, i64) {
        let s = a.shown(
            t0() + Duration::seconds(secs),
            Duration::seconds(delay),
            ended.map(|e| t0() + Duration::seconds(e)),
        );
        (s.status, s.message, (s.updated - t0()).num_seconds())
    }

    #[test]
    fn associating_then_associated_after_the_delay() {
        let a = assoc(None);
        assert_eq!(at(&a, 0, 10, None), ("ASSOCIATING", None, 0));
        assert_eq!(at(&a, 9, 10, None), ("ASSOCIATING", None, 0));
        assert_eq!(at(&a, 10, 10, None), ("ASSOCIATED", None, 10));
        assert_eq!(at(&a, 0, 0, None), ("ASSOCIATED", None, 0), "no delay: associated at once");
        assert!(a.in_force(t0()));
    }

    #[test]
    fn a_refusal_fails_when_it_would_have_been_associated() {
        let a = assoc(Some("no"));
        assert_eq!(at(&a, 5, 10, None), ("ASSOCIATING", None, 0));
        assert_eq!(at(&a, 10, 10, None), ("FAILED", Some("no".into()), 10));
        assert!(!a.in_force(t0()));
        let mut gone = a.clone();
        gone.removed = Some(t0() + Duration::seconds(20));
        assert_eq!(at(&gone, 30, 10, None), ("FAILED", Some("no".into()), 10), "removing a failure leaves it");
    }

    #[test]
    fn removal_disassociates_after_the_delay_and_an_ended_block_disassociates() {
        let mut a = assoc(None);
        a.removed = Some(t0() + Duration::seconds(100));
        assert_eq!(at(&a, 50, 10, None), ("ASSOCIATED", None, 10), "before the removal (a clock moved back)");
        assert_eq!(at(&a, 100, 10, None), ("DISASSOCIATING", None, 100));
        assert_eq!(at(&a, 110, 10, None), ("DISASSOCIATED", None, 110));
        assert!(!a.in_force(t0() + Duration::seconds(100)));
        assert!(a.in_force(t0() + Duration::seconds(99)));
        let a = assoc(None);
        assert_eq!(at(&a, 50, 10, Some(60)), ("ASSOCIATED", None, 10));
        assert_eq!(at(&a, 60, 10, Some(60)), ("DISASSOCIATED", Some(BLOCK_ENDED.into()), 60));
        assert_eq!(at(&a, 5, 10, Some(2)), ("ASSOCIATING", None, 0));
        assert_eq!(at(&a, 10, 10, Some(2)), ("DISASSOCIATED", Some(BLOCK_ENDED.into()), 10));
    }
}
