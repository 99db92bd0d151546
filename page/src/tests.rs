//! The renderer against the fixture: each section holds what the table holds, says so when it
//! holds nothing, escapes what people typed, asks for nothing outside the file, and stays under
//! 1 MB for a year of data.

use capblock_core::app::report::Month;
use capblock_core::app::team_page::{PageBlock, PageBudget, PageRequest, PriceSeries};
use capblock_core::domain::budget::BudgetOwner;
use capblock_core::domain::lifecycle::BlockState;
use capblock_core::domain::request::RequestState;
use chrono::Duration;

use super::fixture::{at, block, fixture, observations};
use super::render;

fn section<'a>(page: &'a str, id: &str) -> &'a str {
    let start = page.find(&format!("<section id=\"{id}\"")).unwrap_or_else(|| panic!("no section {id}"));
    let end = page[start..].find("</section>").map(|e| start + e).unwrap();
    &page[start..end]
}

#[test]
fn each_section_holds_the_fixtures_blocks_budgets_prices_and_approval() {
    let page = render(&fixture());
    let cal = section(&page, "calendar");
    assert!(cal.contains("cr-active0001") && cal.contains("cr-pending0002"), "{cal}");
    assert!(cal.contains("ml-research / p5-weekly") && cal.contains("vision / vision-burst"));
    assert!(cal.contains("payment deadline") && cal.contains("111122223333") && cal.contains("reminder"));
    assert!(cal.contains("<th scope=\"col\">fee</th>") && cal.contains("480.00 USD"), "a fee per block: {cal}");
    let budgets = section(&page, "budgets");
    for name in ["Account", "Team ml-research", "Rule p5-weekly", "Rule vision-burst"] {
        assert!(budgets.contains(name), "{name} missing");
    }
    assert!(budgets.contains("<dt>Left</dt><dd>49040.00 USD of 50000.00 USD"), "{budgets}");
    let prices = section(&page, "prices");
    assert_eq!(prices.matches("<svg").count(), 2, "a chart per rule");
    assert!(prices.contains("us-east-1 p5.48xlarge") && prices.contains("threshold 3"));
    assert!(prices.contains("bought cr-active0001"), "the purchase is marked");
    let approvals = section(&page, "approvals");
    assert!(approvals.contains("<code>capblock approve p5-weekly/cb-0123456789abcdef0</code>"));
    assert!(
        approvals.contains("432.00 USD") && approvals.contains("2.2500 USD") && approvals.contains("21h"),
        "{approvals}"
    );
    let used = section(&page, "use");
    assert!(used.contains("1 of 1") && used.contains("cr-active0001"), "{used}");
    assert!(used.contains("The month per rule"));
    let market = section(&page, "market");
    assert!(market.contains("p5.48xlarge us-west-2"), "{market}");
}

/// The ids of the page's sections, top to bottom.
fn order(page: &str) -> Vec<&str> {
    page.split("<section id=\"").skip(1).filter_map(|s| s.split('"').next()).collect()
}

/// A lead reads the summary, then what waits for a person, before any chart: approvals second,
/// people's requests third.
#[test]
fn approvals_waiting_come_right_after_the_summary() {
    let page = render(&fixture());
    assert_eq!(order(&page), ["glance", "approvals", "requests", "calendar", "budgets", "prices", "use", "market"]);
    let nav = &page[page.find("<nav").unwrap()..page.find("</nav>").unwrap()];
    assert!(nav.find("#glance") < nav.find("#approvals") && nav.find("#approvals") < nav.find("#requests"), "{nav}");
    assert!(nav.find("#requests") < nav.find("#calendar"), "{nav}");
}

/// The rows of the table captioned `caption` in `html`, each a list of its cells' markup.
fn rows<'a>(html: &'a str, caption: &str) -> Vec<Vec<&'a str>> {
    let at =
        html.find(&format!("<caption>{caption}</caption>")).unwrap_or_else(|| panic!("no table {caption}: {html}"));
    let body = &html[at..];
    let body = &body[body.find("<tbody>").unwrap() + 7..body.find("</tbody>").unwrap()];
    body.split("<tr>")
        .skip(1)
        .map(|r| r.split("<td>").skip(1).map(|c| c.trim_end_matches("</tr>").trim_end_matches("</td>")).collect())
        .collect()
}

/// People's requests: the open ones with whose approval they wait for, the closed ones with how
/// each ended, each with who filed it and why, newest first; their counts in the summary.
#[test]
fn each_request_says_who_why_and_where_it_stands() {
    let page = render(&fixture());
    let req = section(&page, "requests");
    assert!(
        req.contains(
            "2 open (1 waiting for approval, 1 approved and looked for); 1 bought, 1 expired, 1 rejected, 1 cancelled."
        ),
        "{req}"
    );
    let open = rows(req, "Open requests, newest first");
    let ids: Vec<&str> = open.iter().map(|r| r[1]).collect();
    assert_eq!(ids, ["rq-waiting1", "rq-approved1"], "newest first");
    let waiting = &open[0];
    assert_eq!(waiting[2], "@ada (AROAEXAMPLE:ada)", "the Slack handle and the identity it is filed under");
    assert_eq!(waiting[5], "the ablation the reviewers asked for");
    assert!(waiting[3].starts_with("2 × p5.48xlarge for 1 day(s) in us-west-2, team ml-research; at most 3.00 USD per accelerator-hour (1152.00 USD in all)"), "{waiting:?}");
    assert_eq!(waiting[6], "<span class=\"state r-filed\">filed</span>");
    assert_eq!(
        waiting[7],
        "Waits for an approver of team ml-research: arn:aws:iam::111122223333:role/ResearchLead. <code>capblock requests approve rq-waiting1</code>"
    );
    assert!(open[1][7].starts_with("Approved by arn:aws:iam::111122223333:role/ResearchLead; the scan buys the first block under the cap that starts by <time"), "{:?}", open[1]);
    let closed = rows(req, "Closed requests, newest first");
    let states: Vec<&str> = closed.iter().map(|r| r[5].split('>').nth(1).unwrap().trim_end_matches("</span")).collect();
    assert_eq!(states, ["bought", "expired", "rejected", "cancelled"]);
    assert!(
        closed[0][6].starts_with("Bought cr-request0003 (1 × p5.48xlarge in us-west-2, 480.00 USD) from <time"),
        "{:?}",
        closed[0]
    );
    assert!(closed[1][6].starts_with("Its window closed unbought. The cheapest offering seen: 2.3958 USD per accelerator-hour, 1 × p5.48xlarge in us-west-2 at <time datetime=\"2026-12-02T00:00:00+00:00\">"), "{:?}", closed[1]);
    assert_eq!(closed[1][4], "&lt;b&gt;urgent&lt;/b&gt; &amp; large", "a reason is shown, never run");
    assert_eq!(closed[2][6], "Rejected by arn:aws:iam::111122223333:role/ResearchLead: over the quarter&#39;s plan");
    assert!(closed[3][6].starts_with("Cancelled by its requester at <time"), "{:?}", closed[3]);
    assert!(!req.contains("are listed"), "all listed: no count of more");
    let glance = section(&page, "glance");
    assert!(glance.contains("<dt>Requests</dt><dd><a href=\"#requests\">2 open</a>: 1 waiting for approval, 1 approved and looked for; 4 closed: 1 bought, 1 expired, 2 rejected or cancelled</dd>"), "{glance}");
}

/// A waiting request within its team's automatic limit, of a team TeamApprovals does not name,
/// or refused by the scan, says so; a list cut short says how many there are.
#[test]
fn a_request_says_why_it_waits_and_a_long_list_how_many_more() {
    let mut d = fixture();
    d.requests.teams = capblock_core::domain::request::parse_team_approvals("ml-research=5000").unwrap();
    let page = render(&d);
    let open = rows(section(&page, "requests"), "Open requests, newest first");
    assert_eq!(open[0][7], "Within the team&#39;s automatic limit (5000.00 USD): the next scan approves it.");
    d.requests.teams.clear();
    let page = render(&d);
    let open = rows(section(&page, "requests"), "Open requests, newest first");
    assert_eq!(open[0][7], "Team ml-research takes no requests: the stack&#39;s TeamApprovals names no such team.");
    d.requests.closed[3].state =
        Err("request rq-cancelled1 names requester \"AROAEXAMPLE:lin\" but is stored under \"AROAEVE:eve\": forged"
            .into());
    d.requests.counts.cancelled = 0;
    d.requests.counts.refused = 1;
    d.requests.counts.bought = 30;
    let page = render(&d);
    let req = section(&page, "requests");
    let closed = rows(req, "Closed requests, newest first");
    assert_eq!(closed[3][5], "<span class=\"state r-refused\">refused</span>");
    assert!(
        closed[3][6].starts_with("The scan refuses its item and buys nothing for it: request rq-cancelled1 names"),
        "{:?}",
        closed[3]
    );
    assert!(
        req.contains("The newest 4 of 33 are listed; <code>capblock requests list</code> lists them all."),
        "{req}"
    );
    assert!(section(&page, "glance").contains("33 closed: 30 bought, 1 expired, 1 rejected or cancelled, 1 refused"));
}

/// The numeric attribute `name` of an SVG tag's text (`<rect class="bar" x="1" ...`).
fn attr(tag: &str, name: &str) -> f64 {
    let from = tag.find(&format!(" {name}=\"")).unwrap_or_else(|| panic!("no {name} in {tag}")) + name.len() + 3;
    tag[from..].split('"').next().unwrap().parse().unwrap()
}

/// The tags in `html` that start with `open` (up to their `>`).
fn tags<'a>(html: &'a str, open: &str) -> Vec<&'a str> {
    html.match_indices(open).map(|(i, _)| &html[i..i + html[i..].find('>').unwrap()]).collect()
}

/// The calendar's axis fits its blocks: together its bars span most of the plot's width (a fixed
/// 8-week window drew the fixture's five days in its first tenth).
#[test]
fn the_calendars_bars_fill_its_width() {
    let page = render(&fixture());
    let cal = section(&page, "calendar");
    let plot = tags(cal, "<rect class=\"plot\"");
    assert_eq!(plot.len(), 1, "{cal}");
    let (left, width) = (attr(plot[0], "x"), attr(plot[0], "width"));
    let bars = tags(cal, "<rect class=\"bar\"");
    assert_eq!(bars.len(), 2, "{cal}");
    let from = bars.iter().map(|b| attr(b, "x")).fold(f64::MAX, f64::min);
    let to = bars.iter().map(|b| attr(b, "x") + attr(b, "width")).fold(f64::MIN, f64::max);
    let share = (to - from) / width;
    assert!(share > 0.8, "the bars span {:.0} % of the plot ({from}..{to} of {left}+{width})", share * 100.0);
    assert!(from >= left && to <= left + width + 1.0, "a bar outside the plot: {from}..{to}");
    // Midnight ticks, each labelled with its day.
    let ticks = tags(cal, "<text class=\"tick\"");
    assert!((3..=11).contains(&ticks.len()), "{} ticks", ticks.len());
    assert!(cal.contains(">Tue Dec 08</text>"), "{cal}");
}

/// Every mark the calendar draws and every state its bars show has an entry in its legend.
#[test]
fn every_calendar_mark_and_colour_has_a_legend_entry() {
    let page = render(&fixture());
    let cal = section(&page, "calendar");
    let svg = &cal[..cal.find("</svg>").unwrap()];
    let legend = &cal[cal.find("<ul class=\"legend\"").expect("a legend")..];
    let legend = &legend[..legend.find("</ul>").unwrap()];
    let mut kinds: Vec<&str> = tags(svg, "<g class=\"").iter().map(|t| t[10..].split('"').next().unwrap()).collect();
    kinds.retain(|k| *k != "tips");
    kinds.dedup();
    assert!(kinds.contains(&"deadline") && kinds.contains(&"reminder"), "{kinds:?}");
    for k in kinds {
        assert!(legend.contains(&format!("<li class=\"k-{k}\">")), "the {k} mark has no legend entry: {legend}");
    }
    for state in ["active", "payment-pending"] {
        assert!(legend.contains(&format!("<title>{state}</title>")), "state {state} not in the legend: {legend}");
    }
    assert!(legend.contains("payment deadline") && legend.contains(">now</li>"), "{legend}");
}

/// Each budget card says its share used, the share of the month gone, its pace and where the
/// month ends at this pace; its scale is words in the page, never SVG text a card would shrink.
#[test]
fn each_budget_says_its_use_its_pace_and_its_month_end() {
    let page = render(&fixture());
    let budgets = section(&page, "budgets");
    let card = |name: &str| {
        let at = budgets.find(&format!("<h3>{name} ")).unwrap_or_else(|| panic!("no card {name}: {budgets}"));
        let rest = &budgets[at..];
        &rest[..rest.find("</dl>").unwrap_or(rest.len())]
    };
    // December 7th, 09:00: 21 % of the month gone; 960 USD committed extends to 4668.24 USD.
    let account = card("Account");
    assert!(account.contains("<span class=\"pct\">2 % used</span>"), "{account}");
    assert!(account.contains("<dt>Month gone</dt><dd>21 %: <b class=\"pace\">within pace</b>"), "{account}");
    assert!(account.contains("<dt>Month-end forecast</dt><dd>4668.24 USD (9 % of the limit)</dd>"), "{account}");
    let rule = card("Rule vision-burst");
    assert!(rule.contains("<dd>2334.12 USD (39 % of the limit)</dd>"), "{rule}");
    for meter in budgets.split("<svg class=\"meter\"").skip(1) {
        let meter = &meter[..meter.find("</svg>").unwrap()];
        assert!(!meter.contains("<text"), "text inside a meter shrinks with its card: {meter}");
    }
    assert!(budgets.contains("<div class=\"scale\"><span>0</span><span>50000.00 USD</span></div>"), "{budgets}");
}

/// A count that never changed is a sentence, not a flat chart (three took 900 pixels).
#[test]
fn a_count_that_never_changes_is_said_not_charted() {
    let page = render(&fixture());
    let market = section(&page, "market");
    assert_eq!(market.matches("<svg").count(), 0, "a flat chart: {market}");
    assert!(
        market.contains("p5.48xlarge us-east-1: at most 4 instance(s) in one offering on every start day seen (6 of them, Dec 03 to Dec 08)."),
        "{market}"
    );
}

/// Each rule's chart carries the published list rate beside what was offered and paid, and a
/// threshold below it is said in words above the chart.
#[test]
fn each_price_chart_shows_the_list_and_a_threshold_below_it_is_said() {
    let page = render(&fixture());
    let prices = section(&page, "prices");
    let charts: Vec<&str> = prices.split("<svg").skip(1).collect();
    assert_eq!(charts.len(), 2);
    for c in charts {
        assert!(c.contains("list p5 5.97 since 2026-10-07\n</text>"), "no list line in the legend: {c}");
    }
    assert!(prices.contains("List for p5: 5.97 USD/accelerator-hour since 2026-10-07"), "{prices}");
    let warn = "<p class=\"warn\">3 USD per accelerator-hour is below today&#39;s list for p5.48xlarge (5.97 USD since 2026-10-07";
    assert_eq!(prices.matches(warn).count(), 2, "{prices}");
    let mut d = fixture();
    d.rules[0].max_price_per_accelerator_hour = "6.5".parse().unwrap();
    let page = render(&d);
    assert_eq!(section(&page, "prices").matches("<p class=\"warn\">").count(), 1, "only the rule below the list");
}

/// A rate the operator announced for a later day is told, above the chart, to the rule it will
/// put below; from its day on it is the list the chart draws.
#[test]
fn an_announced_rate_is_told_before_its_day_and_drawn_from_it() {
    use capblock_core::domain::list_price::{ListRate, RateBook};
    let mut d = fixture();
    d.rules[0].max_price_per_accelerator_hour = "6.2".parse().unwrap();
    let day = chrono::NaiveDate::from_ymd_opt(2027, 1, 1).unwrap();
    let rise = ListRate::announcement("p5", "6.50".parse().unwrap(), day, "AWS email of 2026-12-01").unwrap();
    d.rates = RateBook::with_announced(vec![rise]);
    let page = render(&d);
    let prices = section(&page, "prices");
    let ahead = "<p class=\"warn\">from 2027-01-01 the list for p5.48xlarge will be 6.5 USD per accelerator-hour \
                 (announced: AWS email of 2026-12-01): 6.2 will be below it";
    assert_eq!(prices.matches(ahead).count(), 1, "told once, to the rule at 6.2: {prices}");
    d.now = at(7, 9) + Duration::days(26);
    let page = render(&d);
    let prices = section(&page, "prices");
    assert!(
        prices.contains("List for p5: 6.5 USD/accelerator-hour since 2027-01-01 (AWS email of 2026-12-01)"),
        "{prices}"
    );
    assert!(!prices.contains("will be 6.5"), "in effect: told as the list, not ahead");
}

/// An UltraServer rule names no instance type: its chart draws its UltraServers' offerings, per
/// accelerator-hour, rather than "No prices." above its purchase.
#[test]
fn an_ultraserver_rules_prices_are_charted() {
    let mut d = fixture();
    let text = "id = \"trn2-ultra\"\nmode = \"live\"\nregions = [\"us-east-1\"]\nultraserver_types = [\"u-trn2x64\"]\n\
                ultraserver_counts = [1]\ndurations_days = [2]\nstart_window = { earliest_in_days = 2, latest_in_days = 10 }\n\
                max_price_per_accelerator_hour = \"2.00\"\nmonthly_budget = \"12000\"\n";
    d.rules.push(capblock_core::domain::rule::Rule::from_toml(text, at(1, 0)).unwrap());
    let mut observations = observations("us-east-1", at(5, 0), 24, 6);
    for o in &mut observations {
        o.offering.instance_type = "trn2u.48xlarge".parse().unwrap();
        o.offering.instance_count = 4;
        o.offering.ultraserver = true;
        o.accelerators_per_instance = 16;
    }
    d.prices.push(PriceSeries {
        region: "us-east-1".parse().unwrap(),
        instance_type: "trn2u.48xlarge".parse().unwrap(),
        observations,
    });
    let page = render(&d);
    let prices = section(&page, "prices");
    let ultra = &prices[prices.find("<h3>Rule trn2-ultra</h3>").expect("its chart")..];
    assert!(ultra.starts_with("<h3>Rule trn2-ultra</h3><div class=\"scroll chart-box\"><svg"), "{ultra}");
    assert!(ultra.contains("us-east-1 trn2u.48xlarge: 4 scans shown"), "{ultra}");
}

/// A chart is never drawn narrower than its words stay readable at: its box keeps it at least
/// `MIN_CHART_PX` wide (scrolling sideways on a phone), where `LABEL_PX` text is 10 CSS pixels.
#[test]
fn charts_keep_their_text_readable_on_a_phone() {
    use crate::chart::{LABEL_PX, MIN_CHART_PX};
    assert_eq!(MIN_CHART_PX * LABEL_PX, 900 * 10, "{MIN_CHART_PX} px wide");
    assert!(super::STYLE.contains(&format!(".chart-box svg.chart{{min-width:{MIN_CHART_PX}px}}")));
    let page = render(&fixture());
    let charts = page.matches("<svg width=").count();
    assert_eq!(page.matches("<div class=\"scroll chart-box\"><svg width=").count(), charts, "a chart outside its box");
    for size in page.split("font-size=\"").skip(1).map(|s| s.split('"').next().unwrap()) {
        assert!(size.parse::<f64>().unwrap() >= f64::from(LABEL_PX), "chart text of {size} px");
    }
}

/// A budget committed faster than an even month is over pace, said in words and in red.
#[test]
fn a_budget_over_pace_is_said_and_marked() {
    let mut d = fixture();
    // 2,000 of 6,000 committed with 21 % of the month gone: an even month would be at 1,233.87.
    d.budgets[3].usage.as_mut().unwrap().committed = capblock_core::domain::money::Money::parse("2000", "USD").unwrap();
    let page = render(&d);
    let budgets = section(&page, "budgets");
    let card = &budgets[budgets.find("<div class=\"card over\"><h3>Rule vision-burst").expect("marked over")..];
    assert!(card.contains("<b class=\"pace\">over pace</b>"), "{card}");
    assert!(super::STYLE.contains(".card.over .pace{color:var(--red)}"));
}

/// The first section answers a lead at a glance, each in a line: what is active until when,
/// what starts next, which payment is due, the month's spend against the cap, the approvals.
#[test]
fn the_summary_answers_a_leads_first_questions() {
    let page = render(&fixture());
    let glance = section(&page, "glance");
    assert!(page.find("id=\"glance\"") < page.find("id=\"calendar\""), "first on the page");
    let line = |term: &str| {
        let at = glance.find(&format!("<dt>{term}</dt><dd>")).unwrap_or_else(|| panic!("no {term}: {glance}"));
        let rest = &glance[at..];
        rest[..rest.find("</dd>").unwrap()].to_string()
    };
    assert!(line("Active now").contains("1 block(s): ml-research / p5-weekly: 1 × p5.48xlarge"), "{glance}");
    assert!(line("Active now").contains("until <time"), "{glance}");
    assert!(line("Starts next").contains("vision / vision-burst"), "{glance}");
    assert!(line("Payment due").contains("vision / vision-burst") && line("Payment due").contains(" by <time"));
    assert_eq!(
        line("Spent this month"),
        "<dt>Spent this month</dt><dd>480.00 USD spent and 480.00 USD in flight of the account&#39;s 50000.00 USD cap (2 % committed)"
    );
    assert!(line("Approvals waiting").contains("<a href=\"#approvals\">1 decision(s)</a>"), "{glance}");
    let mut quiet = fixture();
    quiet.blocks.clear();
    quiet.approvals.clear();
    let page = render(&quiet);
    let glance = section(&page, "glance");
    assert!(glance.contains("<dt>Active now</dt><dd>none</dd>") && glance.contains("<dd>nothing scheduled</dd>"));
}

#[test]
fn every_section_says_plainly_when_it_is_empty() {
    let mut d = fixture();
    d.rules.clear();
    d.blocks.clear();
    d.budgets = vec![PageBudget { owner: BudgetOwner::Account, limit: None, usage: None }];
    d.approvals.clear();
    d.prices.clear();
    d.month =
        Month { month: d.period.as_str().into(), rules: vec![], teams: vec![], account_spent: None, skipped: vec![] };
    let page = render(&d);
    assert!(section(&page, "calendar").contains("No blocks held or starting in the next 8 weeks."));
    assert!(section(&page, "budgets").contains("No budgets set"));
    assert!(section(&page, "prices").contains("No rules"));
    assert!(section(&page, "approvals").contains("No approvals waiting."));
    assert!(section(&page, "use").contains("No active blocks.") && section(&page, "use").contains("Nothing bought"));
    assert!(section(&page, "market").contains("No offerings seen"));
    d.requests = Default::default();
    let page = render(&d);
    assert!(section(&page, "requests").contains("No requests. Researchers file them with"));
    assert!(section(&page, "glance").contains("<dt>Requests</dt><dd>none</dd>"));
    d.requests = super::fixture::requests(&fixture().rules[0]);
    d.requests.open.clear();
    d.requests.counts.filed = 0;
    d.requests.counts.approved = 0;
    let page = render(&d);
    assert!(section(&page, "requests").contains("No request waits for a decision or a block."));
}

#[test]
fn nothing_in_the_page_points_outside_it() {
    let page = render(&fixture());
    let url = page
        .find("http:")
        .or(page.find("https:"))
        .or(page.find("//"))
        .map(|i| &page[i.saturating_sub(80)..(i + 80).min(page.len())]);
    assert!(url.is_none(), "a URL in the page: {url:?}");
    assert!(!page.contains("<script") && !page.contains("<link") && !page.contains("<img") && !page.contains("url("));
    assert!(page.contains(&format!("content=\"{}\"", super::CSP)));
}

#[test]
fn what_people_typed_is_shown_never_run() {
    let mut d = fixture();
    d.stack = Some("<script>alert(1)</script>".into());
    d.blocks[0].team = Some("<img src=x onerror=alert(1)>".into());
    d.blocks[0].shared_with = vec!["\"><script>".into()];
    let page = render(&d);
    assert!(!page.contains("<script") && !page.contains("<img"), "user text became markup");
    assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
}

#[test]
fn every_picture_has_a_text_alternative() {
    let page = render(&fixture());
    let svgs = page.matches("<svg").count();
    assert!(svgs >= 6, "{svgs}");
    for svg in page.split("<svg").skip(1) {
        let head = &svg[..svg.find("</svg>").unwrap()];
        assert!(head.contains("role=\"img\""), "an svg without a role");
        assert!(head.contains("<title>"), "an svg without a title");
    }
}

#[test]
fn a_year_of_data_stays_under_a_megabyte() {
    let mut d = fixture();
    // A year of hourly scans in two regions (the page shows the last 90 days of them), a block a
    // week for each rule, and an approval a day.
    let year = at(7, 9) - Duration::days(365);
    d.prices = ["us-east-1", "us-west-2", "eu-north-1", "ap-northeast-1"]
        .iter()
        .map(|r| PriceSeries {
            region: r.parse().unwrap(),
            instance_type: "p5.48xlarge".parse().unwrap(),
            observations: observations(r, at(7, 9) - Duration::days(90), 24 * 90, 1),
        })
        .collect();
    let rules = d.rules.clone();
    for w in 0..52 {
        for r in &rules {
            let start = year + Duration::weeks(w);
            let b = block(
                r,
                &format!("cr-{}-{w:02}", r.id),
                start,
                if start < d.now { BlockState::Expired } else { BlockState::Scheduled },
                start - Duration::days(2),
            );
            d.blocks.push(PageBlock { block: b, extensions: vec![], team: None, shared_with: vec![] });
        }
    }
    let page = render(&d);
    // Two hundred requests a month for a year: the page lists the newest of each kind.
    let filed = super::fixture::request("rq-year", "AROAEXAMPLE:ada", Some("@ada"), at(7, 8), 1, &"why ".repeat(100));
    d.requests.counts.expired = 2400;
    d.requests.closed = (0..2400)
        .map(|_| PageRequest { state: Ok(RequestState::Expired), ..d.requests.open[0].clone() })
        .take(capblock_core::app::team_page::SHOWN_REQUESTS)
        .collect();
    d.requests.open[0].request = filed;
    let sizes: Vec<(&str, usize)> = ["calendar", "budgets", "prices", "approvals", "requests", "use", "market"]
        .iter()
        .map(|id| (*id, section(&page, id).len()))
        .collect();
    assert!(page.len() < 1_000_000, "{} bytes: {sizes:?}", page.len());
}
