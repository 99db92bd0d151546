//! A rule file checked (`RuleSpec::validate`): every field, every problem named by its field
//! and reported at once, and a rule that could never buy anything refused with the figures.

use super::*;

impl RuleSpec {
    /// Checks every field and reports every problem at once; `now` anchors absolute windows.
    pub fn validate(&self, now: DateTime<Utc>) -> Result<Rule, RuleError> {
        let mut p = Problems::default();
        p.id_and_description(self);
        let regions = p.regions(self);
        let (instance_types, instance_counts, ultraserver_types, ultraserver_counts) = p.what_to_buy(self);
        let durations_days = p.durations(self);

        // Counted over the valid, distinct entries, so the problem is not repeated for a
        // list that is wrong anyway.
        p.question_bound([
            regions.len(),
            instance_types.len().max(ultraserver_types.len()),
            instance_counts.len().max(ultraserver_counts.len()),
            durations_days.len(),
        ]);

        let start_window = p.start_window(&self.start_window, now);

        let (currency, max_price, max_total_fee, budget) = p.money(self);
        p.platform_and_limits(self);
        p.tags(&self.tags);
        let extend = self.extend.as_ref().map(|x| p.extend(x, Decimal::from(MAX_PRICE_PER_ACCELERATOR_HOUR)));
        p.alert_and_tolerance(self);
        let actions = p.actions(self, &durations_days, &instance_counts, &ultraserver_types, &ultraserver_counts);
        p.team(self.team.as_deref());
        let share_with = p.share_with(&self.share_with, !ultraserver_types.is_empty());
        p.handoff_account(self.handoff_account.as_deref(), &self.share_with, &share_with);

        if !p.0.is_empty() {
            return Err(RuleError::Invalid { id: self.id.clone(), problems: p.0 });
        }
        let money = |d: Decimal| Money::new(d, currency).expect("checked within MIN_AMOUNT..=MAX_AMOUNT above");
        let rule = Rule {
            id: self.id.clone(),
            description: self.description.clone(),
            enabled: self.enabled,
            mode: self.mode,
            regions,
            instance_types,
            instance_counts,
            ultraserver_types,
            ultraserver_counts,
            durations_days,
            start_window,
            currency,
            max_price_per_accelerator_hour: max_price,
            max_total_fee: max_total_fee.map(money),
            monthly_budget: money(budget),
            instance_platform: self.instance_platform.clone(),
            max_blocks_held: self.max_blocks_held,
            max_purchases_per_month: self.max_purchases_per_month,
            rebuy_on_payment_failure: self.rebuy_on_payment_failure,
            tags: self.tags.clone(),
            extend,
            duration_tolerance_hours: self.duration_tolerance_hours as u32,
            local_zones: self.local_zones,
            allow_unknown_regions: self.allow_unknown_regions,
            unlimited: self.unlimited,
            actions,
            idle_alert_minutes: u32::try_from(self.idle_alert_minutes).unwrap_or(DEFAULT_IDLE_ALERT_MINUTES),
            drought_days: u32::try_from(self.drought_days).unwrap_or(DEFAULT_DROUGHT_DAYS),
            team: self.team.clone(),
            share_with,
            handoff_account: self.handoff_account.clone(),
            request: None,
        };
        // Judged on the valid rule: what it could buy is known only once every field is.
        match never_buys(&rule) {
            Some(problem) => Err(RuleError::Invalid { id: rule.id, problems: vec![problem] }),
            None => Ok(rule),
        }
    }
}

/// `max_total_fee` below what any block the rule accepts could cost (`Rule::least_fee`): the
/// rule can never buy anything. Said with the figures and what would work.
pub(super) fn never_buys(rule: &Rule) -> Option<RuleProblem> {
    let max = rule.max_total_fee?;
    let least = rule.least_fee()?;
    if max.amount() >= least.fee {
        return None;
    }
    let least_fee = least.fee.round_dp_with_strategy(2, rust_decimal::RoundingStrategy::AwayFromZero);
    Some(RuleProblem {
        field: "max_total_fee".into(),
        message: format!(
            "{max} can never buy anything: the least a block this rule accepts could cost is {least_fee} {cur} \
             ({} x {}, {} accelerators each, for {} (the shortest of durations_days less \
             duration_tolerance_hours) at {} {cur} per accelerator-hour, less than any Capacity Block has sold for); \
             set max_total_fee to at least {least_fee}, or leave it out",
            least.instance_count,
            least.instance_type,
            least.accelerators,
            crate::domain::duration::compact(Duration::hours(i64::from(least.hours))),
            crate::domain::catalog::PRICE_FLOOR_PER_ACCELERATOR_HOUR,
            cur = rule.currency,
        ),
    })
}

pub(super) const TAG_CHARS_ALLOWED: &str = "tags hold only letters, digits, spaces and _ . : / = + - @";

/// EC2's tag alphabet: Unicode letters, digits and spaces, and `_ . : / = + - @`. No line
/// breaks or control characters: a tag ends up in consoles, logs and Slack.
pub(super) fn tag_char(c: char) -> bool {
    c.is_alphanumeric()
        || TAG_PUNCTUATION.contains(c)
        || (c.is_whitespace() && !c.is_control() && !matches!(c, '\u{2028}' | '\u{2029}'))
}

#[derive(Default)]
pub(super) struct Problems(Vec<RuleProblem>);

pub(super) type WhatToBuy = (Vec<InstanceType>, Vec<u32>, Vec<UltraServerType>, Vec<u32>);

impl Problems {
    /// The rule's `id` and `description`.
    fn id_and_description(&mut self, spec: &RuleSpec) {
        let id = &spec.id;
        if id.is_empty()
            || id.len() > 64
            || !id.bytes().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-' || c == b'_')
        {
            self.add("id", "must be 1-64 characters of a-z, 0-9, '-' or '_'");
        }
        // A request's one-shot rule is named after it: a rule file of that name would share the
        // request's guard, budget row and purchase count.
        if id.starts_with(super::REQUEST_RULE_PREFIX) {
            let prefix = super::REQUEST_RULE_PREFIX;
            self.add("id", &format!("ids starting with {prefix:?} are reserved for people's requests"));
        }
        if spec.description.chars().count() > MAX_DESCRIPTION_CHARS {
            self.add(
                "description",
                &format!("is {} characters long; at most {MAX_DESCRIPTION_CHARS}", spec.description.chars().count()),
            );
        }
    }

    /// `durations_days`: durations EC2 sells.
    fn durations(&mut self, spec: &RuleSpec) -> Vec<u32> {
        self.list("durations_days", &spec.durations_days, |&d| {
            if is_sellable_duration_days(d) {
                Ok(d as u32)
            } else {
                Err(format!("{d} days is not a duration EC2 sells (1-14 days, then multiples of 7 up to 182)"))
            }
        })
    }

    /// The rule's money: its currency, price cap, fee cap and monthly budget (amounts within
    /// their bounds; a budget over `MAX_MONTHLY_BUDGET` only when `unlimited`; a fee cap the
    /// budget leaves room for).
    fn money(&mut self, spec: &RuleSpec) -> (Currency, Decimal, Option<Decimal>, Decimal) {
        let currency = spec.currency.parse::<Currency>().unwrap_or_else(|e| {
            self.add("currency", &e.to_string());
            Currency::USD
        });
        let price_max = Decimal::from(MAX_PRICE_PER_ACCELERATOR_HOUR);
        let max_price = self.amount("max_price_per_accelerator_hour", &spec.max_price_per_accelerator_hour, price_max);
        let max_total_fee = spec.max_total_fee.as_ref().map(|a| self.amount("max_total_fee", a, MAX_AMOUNT.into()));
        let budget = self.amount("monthly_budget", &spec.monthly_budget, MAX_AMOUNT.into());
        if !spec.unlimited && budget > Decimal::from(MAX_MONTHLY_BUDGET) {
            self.add(
                "monthly_budget",
                &format!("{budget} is more than {MAX_MONTHLY_BUDGET}; set unlimited = true if you mean it"),
            );
        }
        if let Some(fee) = max_total_fee
            && fee > budget
            && budget > Decimal::ZERO
        {
            self.add("max_total_fee", "is larger than monthly_budget, so it can never apply");
        }
        (currency, max_price, max_total_fee, budget)
    }

    /// `instance_platform`, `max_blocks_held` and `max_purchases_per_month`.
    fn platform_and_limits(&mut self, spec: &RuleSpec) {
        if !PLATFORMS.contains(&spec.instance_platform.as_str()) {
            self.add(
                "instance_platform",
                &format!("{:?} is not one of {}", spec.instance_platform, PLATFORMS.join(", ")),
            );
        }
        self.limit("max_blocks_held", spec.max_blocks_held, MAX_BLOCKS_HELD, spec.unlimited);
        self.limit("max_purchases_per_month", spec.max_purchases_per_month, MAX_PURCHASES_PER_MONTH, spec.unlimited);
    }

    /// `idle_alert_minutes` and `duration_tolerance_hours`.
    fn alert_and_tolerance(&mut self, spec: &RuleSpec) {
        if !(0..=MAX_IDLE_ALERT_MINUTES).contains(&spec.idle_alert_minutes) {
            self.add(
                "idle_alert_minutes",
                &format!("must be between 0 (never alert) and {MAX_IDLE_ALERT_MINUTES} minutes"),
            );
        }
        if !(0..=MAX_DROUGHT_DAYS).contains(&spec.drought_days) {
            self.add("drought_days", &format!("must be between 0 (never say) and {MAX_DROUGHT_DAYS} days"));
        }
        if !(0..24).contains(&spec.duration_tolerance_hours) {
            self.add("duration_tolerance_hours", "must be between 0 and 23 hours");
        }
    }

    /// `team`: a name the stack's TeamBudgets can hold.
    fn team(&mut self, team: Option<&str>) {
        if let Some(team) = team
            && !is_team_name(team)
        {
            self.add("team", "must be 1-64 characters of a-z, 0-9, '-' or '_', as the stack's TeamBudgets names it");
        }
    }

    fn add(&mut self, field: &str, message: &str) {
        self.0.push(RuleProblem { field: field.to_string(), message: message.to_string() });
    }

    /// Where the hand-off actions run: an account the block is shared with. Named accounts are
    /// checked against `share_with`; an OU or the Organization may hold any member, which only
    /// the Organization knows (the role's trust policy refuses one outside it).
    fn handoff_account(&mut self, account: Option<&str>, written: &[String], shared: &[SharePrincipal]) {
        let Some(account) = account else { return };
        if SharePrincipal::parse(account).ok().is_none_or(|p| !matches!(p, SharePrincipal::Account(_))) {
            self.add("handoff_account", "must be a 12-digit account id");
            return;
        }
        if written.is_empty() {
            self.add(
                "handoff_account",
                "needs share_with: the hand-off runs where the block is shared (name the account there)",
            );
            return;
        }
        let reaches = shared.iter().any(|p| match p {
            SharePrincipal::Account(a) => a == account,
            SharePrincipal::Organization(_) | SharePrincipal::Unit(_) => true,
        });
        if !shared.is_empty() && !reaches {
            self.add("handoff_account", &format!("{account} is not one share_with shares the block with"));
        }
    }

    /// Who the rule's blocks are shared with: each a principal RAM takes inside an
    /// Organization, none twice, at most `MAX_SHARE_PRINCIPALS`; never for UltraServers, which
    /// EC2 does not share.
    fn share_with(&mut self, entries: &[String], ultraserver: bool) -> Vec<SharePrincipal> {
        if entries.is_empty() {
            return Vec::new();
        }
        if ultraserver {
            self.add(
                "share_with",
                "EC2 cannot share UltraServer Capacity Blocks (only instance Capacity Blocks can be shared through AWS RAM): \
                 drop share_with, or buy instances with this rule",
            );
            return Vec::new();
        }
        if entries.len() > MAX_SHARE_PRINCIPALS {
            self.add(
                "share_with",
                &format!(
                    "names {} principals; at most {MAX_SHARE_PRINCIPALS} (name an OU or the Organization instead)",
                    entries.len()
                ),
            );
        }
        let mut out: Vec<SharePrincipal> = Vec::new();
        for (i, e) in entries.iter().enumerate() {
            match SharePrincipal::parse(e) {
                Ok(p) if out.contains(&p) => self.add(&format!("share_with[{i}]"), &format!("{e:?} is named twice")),
                Ok(p) => out.push(p),
                Err(why) => self.add(&format!("share_with[{i}]"), &why),
            }
        }
        out
    }

    /// The rule's regions: each known (or unknown ones allowed), at most `MAX_REGIONS_PER_RULE`.
    fn regions(&mut self, spec: &RuleSpec) -> Vec<Region> {
        let regions = self.list("regions", &spec.regions, |s| {
            let region = s.parse::<Region>().map_err(|e| e.to_string())?;
            if region.is_known() || spec.allow_unknown_regions {
                Ok(region)
            } else {
                Err(format!(
                    "{s:?} is not a region capblock knows; if AWS opened it recently, set allow_unknown_regions = true"
                ))
            }
        });
        if regions.len() > MAX_REGIONS_PER_RULE {
            self.add(
                "regions",
                &format!(
                    "lists {} regions; at most {MAX_REGIONS_PER_RULE}: split it into several rules",
                    regions.len()
                ),
            );
        }
        regions
    }

    /// The questions a rule asks each scan (regions x types x counts x durations), bounded.
    fn question_bound(&mut self, questions: [usize; 4]) {
        let total = questions.iter().fold(1usize, |a, &n| a.saturating_mul(n));
        if total > MAX_QUESTIONS_PER_RULE {
            self.add(
                "regions x instance_types x instance_counts x durations_days",
                &format!(
                    "the rule asks {total} questions per scan ({} x {} x {} x {}); at most {MAX_QUESTIONS_PER_RULE}: \
                     split it into several rules or ask for fewer",
                    questions[0], questions[1], questions[2], questions[3]
                ),
            );
        }
    }

    /// EC2's tag rules, and capblock's own tags' room and prefixes.
    fn tags(&mut self, tags: &BTreeMap<String, String>) {
        if tags.len() > MAX_TAGS - 3 {
            self.add("tags", &format!("at most {} tags (capblock adds 3 of its own)", MAX_TAGS - 3));
        }
        for (k, v) in tags {
            let field = format!("tags.{}", prefix(&k.escape_debug().to_string()));
            let n = k.chars().count();
            if n == 0 || n > TAG_KEY_CHARS {
                self.add(&field, &format!("key must be 1-{TAG_KEY_CHARS} characters"));
            }
            if let Some(c) = k.chars().find(|&c| !tag_char(c)) {
                self.add(&field, &format!("key has {c:?}: {TAG_CHARS_ALLOWED}"));
            }
            let reserved = |p: &str| k.get(..p.len()).is_some_and(|start| start.eq_ignore_ascii_case(p));
            if let Some(taken) = RESERVED_TAG_PREFIXES.into_iter().find(|p| reserved(p)) {
                self.add(&field, &format!("keys starting with {taken:?} (in any case) are reserved"));
            }
            if v.chars().count() > TAG_VALUE_CHARS {
                self.add(&field, &format!("value must be at most {TAG_VALUE_CHARS} characters"));
            }
            if let Some(c) = v.chars().find(|&c| !tag_char(c)) {
                self.add(&field, &format!("value has {c:?}: {TAG_CHARS_ALLOWED}"));
            }
        }
    }

    /// Auto-extension: its price threshold, a length EC2 sells, when to decide.
    fn extend(&mut self, x: &ExtendSpec, price_max: Decimal) -> Extend {
        let price = self.amount("extend.max_price_per_accelerator_hour", &x.max_price_per_accelerator_hour, price_max);
        if !(1..=182).contains(&x.max_days) || !is_sellable_duration_days(i64::from(x.max_days)) {
            self.add("extend.max_days", "must be a duration EC2 sells (1-14 days, then multiples of 7 up to 182)");
        }
        if !(1..=56 * 24).contains(&x.decide_hours_before_end) {
            self.add("extend.decide_hours_before_end", "must be between 1 and 1344 hours (56 days)");
        }
        Extend {
            max_price_per_accelerator_hour: price,
            max_days: x.max_days,
            decide_hours_before_end: x.decide_hours_before_end,
        }
    }

    /// The hand-off actions, judged against the shortest block the rule may buy and its size.
    fn actions(
        &mut self,
        spec: &RuleSpec,
        durations_days: &[u32],
        instance_counts: &[u32],
        ultraserver_types: &[UltraServerType],
        ultraserver_counts: &[u32],
    ) -> Vec<Action> {
        // A lead is judged against the shortest block the rule may buy: its shortest duration
        // less the tolerance (EC2's closest matches may be that much shorter).
        let shortest_days = durations_days.iter().copied().min().unwrap_or(1);
        // An UltraServer rule's blocks hold all the instances of their UltraServers, and EC2
        // terminates them 60 minutes before the end, not 30.
        let ultra = !ultraserver_types.is_empty();
        let ultra_instances = ultraserver_types
            .iter()
            .flat_map(|&kind| ultraserver_counts.iter().map(move |&count| UltraServers { kind, count }.instances()));
        let limits = ActionLimits {
            shortest_block_minutes: i64::from(shortest_days) * 24 * 60
                - spec.duration_tolerance_hours.clamp(0, 23) * 60,
            termination_lead_minutes: termination_lead(ultra).num_minutes(),
            max_instances: instance_counts.iter().copied().chain(ultra_instances).max().unwrap_or(1),
            ultraserver_instance_types: ultraserver_types
                .iter()
                .filter_map(|k| k.instance_type().ok())
                .map(|t| t.to_string())
                .collect(),
            in_member_account: spec.handoff_account.is_some(),
        };
        let (actions, action_problems) = actions::validate(&spec.actions, &limits);
        for (field, message) in action_problems {
            self.add(&field, &message);
        }
        actions
    }

    /// Validates each element; the list must be non-empty and free of repeats.
    fn list<T, U: PartialEq>(&mut self, field: &str, items: &[T], check: impl Fn(&T) -> Result<U, String>) -> Vec<U> {
        if items.is_empty() {
            self.add(field, "must list at least one value");
        }
        let mut out: Vec<U> = Vec::new();
        for (i, item) in items.iter().enumerate() {
            match check(item) {
                Ok(v) if out.contains(&v) => self.add(&format!("{field}[{i}]"), "is listed twice"),
                Ok(v) => out.push(v),
                Err(msg) => self.add(&format!("{field}[{i}]"), &msg),
            }
        }
        out
    }

    /// Instance types and counts, or UltraServer types and counts: never both, since EC2
    /// refuses a search that names UltraserverType with InstanceType or InstanceCount
    /// (InvalidParameterCombination), and instance types sold only inside UltraServers are
    /// refused as instances.
    fn what_to_buy(&mut self, spec: &RuleSpec) -> WhatToBuy {
        let ultra = !spec.ultraserver_types.is_empty() || !spec.ultraserver_counts.is_empty();
        let instances = !spec.instance_types.is_empty() || !spec.instance_counts.is_empty();
        if ultra && instances {
            self.add(
                "ultraserver_types",
                "a rule asks for instances (instance_types, instance_counts) or for UltraServers \
                 (ultraserver_types, ultraserver_counts), not both: EC2 refuses UltraserverType with InstanceType or \
                 InstanceCount",
            );
            return Default::default();
        }
        if ultra {
            let kinds = self.list("ultraserver_types", &spec.ultraserver_types, |s| {
                s.parse::<UltraServerType>().map_err(|e| e.to_string())
            });
            let counts = self.list("ultraserver_counts", &spec.ultraserver_counts, |&n| {
                u32::try_from(n)
                    .ok()
                    .filter(|n| (1..=ultraserver::MAX_COUNT).contains(n))
                    .ok_or_else(|| format!("{n} is not between 1 and {} UltraServers", ultraserver::MAX_COUNT))
            });
            for &kind in &kinds {
                for (i, &count) in counts.iter().enumerate() {
                    if let Some(why) = ultraserver::count_problem(kind, count) {
                        self.add(&format!("ultraserver_counts[{i}]"), &why);
                    }
                }
            }
            return (Vec::new(), Vec::new(), kinds, counts);
        }
        let types = self.list("instance_types", &spec.instance_types, |s| {
            let t = s.parse::<InstanceType>().map_err(|e| e.to_string())?;
            match ultraserver::only_in_ultraservers(t.as_str()) {
                Some(u) => Err(format!(
                    "{s} is sold only inside UltraServers: ask with ultraserver_types = [\"{u}\"] and ultraserver_counts"
                )),
                None => Ok(t),
            }
        });
        let counts = self.list("instance_counts", &spec.instance_counts, |&n| {
            u32::try_from(n)
                .ok()
                .filter(|n| (1..=MAX_INSTANCES_PER_BLOCK).contains(n))
                .ok_or_else(|| format!("{n} is not between 1 and {MAX_INSTANCES_PER_BLOCK} instances"))
        });
        (types, counts, Vec::new(), Vec::new())
    }

    fn start_window(&mut self, w: &StartWindowSpec, now: DateTime<Utc>) -> StartWindow {
        let fallback = StartWindow::Relative { earliest: Duration::zero(), latest: MAX_START_AHEAD };
        let relative = w.earliest_in_days.is_some() || w.latest_in_days.is_some();
        let absolute = w.earliest.is_some() || w.latest.is_some();
        match (relative, absolute) {
            (true, true) => {
                self.add("start_window", "give either earliest_in_days/latest_in_days or earliest/latest, not both");
                fallback
            }
            (false, false) => {
                self.add("start_window", "needs earliest_in_days and latest_in_days (or earliest and latest)");
                fallback
            }
            (true, false) => {
                let (Some(e), Some(l)) = (w.earliest_in_days, w.latest_in_days) else {
                    self.add("start_window", "needs both earliest_in_days and latest_in_days");
                    return fallback;
                };
                let ahead = MAX_START_AHEAD.num_days();
                if e < 0 {
                    self.add("start_window.earliest_in_days", "must not be negative");
                }
                if e > ahead {
                    self.add(
                        "start_window.earliest_in_days",
                        &format!("{e} days is beyond the 8 weeks (56 days) EC2 sells ahead"),
                    );
                }
                if l <= e {
                    self.add("start_window.latest_in_days", "must be after earliest_in_days");
                }
                if l > ahead {
                    self.add(
                        "start_window.latest_in_days",
                        &format!("{l} days is beyond the 8 weeks (56 days) EC2 sells ahead"),
                    );
                }
                // Checked: days near i64::MAX are not a Duration (reported above, not a panic).
                match (Duration::try_days(e), Duration::try_days(l)) {
                    (Some(earliest), Some(latest)) => StartWindow::Relative { earliest, latest },
                    _ => fallback,
                }
            }
            (false, true) => {
                let (Some(e), Some(l)) = (&w.earliest, &w.latest) else {
                    self.add("start_window", "needs both earliest and latest");
                    return fallback;
                };
                let mut instant = |field: &str, t: &InstantText| t.to_instant().map_err(|m| self.add(field, &m)).ok();
                let (Some(earliest), Some(latest)) =
                    (instant("start_window.earliest", e), instant("start_window.latest", l))
                else {
                    return fallback;
                };
                if latest <= earliest {
                    self.add("start_window.latest", "must be after earliest");
                }
                if latest <= now {
                    self.add("start_window.latest", "is in the past");
                }
                if now.checked_add_signed(MAX_START_AHEAD).is_some_and(|limit| earliest > limit) {
                    self.add("start_window.earliest", "is beyond the 8 weeks EC2 sells ahead");
                }
                StartWindow::Absolute { earliest, latest }
            }
        }
    }

    /// A limit of at least 1, and at most `max` unless the rule says `unlimited = true`.
    fn limit(&mut self, field: &str, value: u32, max: u32, unlimited: bool) {
        if value == 0 {
            self.add(field, "must be at least 1");
        } else if value > max && !unlimited {
            self.add(field, &format!("{value} is more than {max}; set unlimited = true if you mean it"));
        }
    }

    /// An amount within `MIN_AMOUNT..=max`.
    fn amount(&mut self, field: &str, amount: &AmountText, max: Decimal) -> Decimal {
        match amount.to_decimal() {
            Ok(d) if (MIN_AMOUNT..=max).contains(&d) => d,
            Ok(d) if d <= Decimal::ZERO => {
                self.add(field, &format!("must be greater than zero (got {d})"));
                Decimal::ZERO
            }
            Ok(d) if d < MIN_AMOUNT => {
                self.add(field, &format!("must be at least {MIN_AMOUNT} (got {d})"));
                Decimal::ZERO
            }
            Ok(d) => {
                self.add(field, &format!("must be at most {max} (got {d})"));
                Decimal::ZERO
            }
            Err(e) => {
                self.add(field, &e);
                Decimal::ZERO
            }
        }
    }
}
