//! The bounds a rule is checked against: what EC2 sells and accepts, and sane maximums for the
//! limits that guard money (passed only with `unlimited = true`).

use chrono::Duration;
use rust_decimal::Decimal;

/// How far ahead EC2 sells Capacity Blocks.
pub const MAX_START_AHEAD: Duration = Duration::weeks(8);
pub const MAX_INSTANCES_PER_BLOCK: u32 = 64;
pub(super) const MAX_TAGS: usize = 40;
/// Questions one rule may ask per scan (regions x types x counts x durations). EC2 answers a
/// few a minute per region, so a rule past this would take hours to ask each question once
/// and crowd out the others (the scan has a total bound too, `app::scan::MAX_QUESTIONS_PER_SCAN`).
pub const MAX_QUESTIONS_PER_RULE: usize = 256;
/// Distinct regions one rule may name. Each region is visited on its own (clients, memory,
/// instance types, paced questions), so a rule of many cheap questions over many regions would
/// outgrow a scan's time and memory (the scan has a total bound too,
/// `app::scan::MAX_REGIONS_PER_SCAN`).
pub const MAX_REGIONS_PER_RULE: usize = 16;
/// A description is a note for people, not a document: the item must stay far below
/// DynamoDB's 400 KB.
pub const MAX_DESCRIPTION_CHARS: usize = 1024;
/// Sane maximums for a rule's own limits; a rule goes past them only with `unlimited = true`,
/// so a typo (an extra zero) cannot lift a limit that guards money.
pub const MAX_PURCHASES_PER_MONTH: u32 = 10;
pub const MAX_BLOCKS_HELD: u32 = 10;
/// In the rule's currency.
pub const MAX_MONTHLY_BUDGET: u32 = 1_000_000;
/// The bounds of every amount a rule sets, in its currency, `unlimited` or not: the smallest
/// unit of a price (a threshold of 1e-28 made every ratio to it overflow), and amounts far
/// past any Capacity Block (the dearest sell for tens of dollars per accelerator-hour).
pub const MIN_AMOUNT: Decimal = Decimal::from_parts(1, 0, 0, false, 2); // 0.01
pub const MAX_PRICE_PER_ACCELERATOR_HOUR: u32 = 10_000;
pub const MAX_AMOUNT: u64 = 1_000_000_000_000;
/// EC2's tag rules: keys 1-128 and values 0-256 Unicode characters, of letters, digits, spaces
/// and these.
pub(super) const TAG_KEY_CHARS: usize = 128;
pub(super) const TAG_VALUE_CHARS: usize = 256;
pub(super) const TAG_PUNCTUATION: &str = "_.:/=+-@";
/// Key prefixes that are not the rule's to set (compared without case): EC2 reserves `aws:`,
/// and capblock's own tags decide what a reservation belongs to.
pub(super) const RESERVED_TAG_PREFIXES: [&str; 2] = ["aws:", "capblock:"];

/// A week: offerings come and go daily, so a week with none at the threshold is a market that
/// moved away from the rule rather than a quiet spell.
pub const DEFAULT_DROUGHT_DAYS: u32 = 7;

/// The longest `drought_days`: the history the check reads back is bounded by it.
pub const MAX_DROUGHT_DAYS: i64 = 60;

/// The longest `idle_alert_minutes`: a week, longer than most blocks.
pub const MAX_IDLE_ALERT_MINUTES: i64 = 7 * 24 * 60;

/// How far a same-day closest match may be from the asked duration by default: blocks end at
/// 11:30 UTC, so a block starting today at 04:55 and asked for a day comes as 6 h 35 min or
/// 30 h 35 min. Twelve hours takes the nearer one whatever the time of day, never both.
pub const DEFAULT_DURATION_TOLERANCE_HOURS: u32 = 12;

pub(super) const PLATFORMS: &[&str] = &[
    "Linux/UNIX",
    "Red Hat Enterprise Linux",
    "SUSE Linux",
    "Windows",
    "Ubuntu Pro",
    "Linux with SQL Server Standard",
];
