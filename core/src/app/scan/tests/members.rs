//! The watch over member accounts, in a scan: a block a member account found is bought by the
//! buying account, under the id EC2 shows the buyer (nothing public says an id one account was
//! shown is another's to buy).

use chrono::Duration;

use super::*;
use crate::app::fixtures::{offering, t0};
use crate::domain::money::Money;
use crate::memory::{MemoryEc2, MemoryNotifier, MemoryTable};

/// A rule asking for 1 or 2 x p5.48xlarge for a day: two questions, so the buying account takes
/// the first (count 1) and the member the second (count 2).
fn rule() -> Rule {
    let text = "id = \"r\"\nmode = \"live\"\nregions = [\"us-east-1\"]\ninstance_types = [\"p5.48xlarge\"]\n\
         instance_counts = [1, 2]\ndurations_days = [1]\nstart_window = { earliest_in_days = 1, latest_in_days = 14 }\n\
         max_price_per_accelerator_hour = \"3\"\nmonthly_budget = \"2000\"\nmax_purchases_per_month = 1\n";
    Rule::from_toml(text, t0()).unwrap()
}

fn two(id: &str) -> Offering {
    let one = offering(id, t0() + Duration::days(2));
    Offering { instance_count: 2, fee: Money::parse("960", "USD").unwrap(), ..one }
}

// On tokio's paused clock: the lanes' pace is the runtime's time, so which lane takes which
// question is the test's, not the machine's (on the real clock a loaded machine swapped them).
#[tokio::test(start_paused = true)]
async fn a_block_a_member_found_is_bought_under_the_buying_accounts_id() {
    let settings = crate::app::fixtures::scan_settings(Mode::Live);
    let (table, notifier) = (MemoryTable::default().with_rules([rule()]), MemoryNotifier::default());
    // The same block: the member was shown it as cb-member, the buying account as cb-home.
    // A block of one: bought once, it is off sale (EC2 sells an offering until its stock is gone).
    let home = MemoryEc2::default().with_offerings([two("cb-home")]).with_stock(|_| Some(1));
    let member = MemoryEc2::default().with_offerings([two("cb-member")]);
    let members = [MemberMarket { account: "111111111111".into(), market: Box::new(member) }];
    let catalog = Mutex::new(AcceleratorCatalog::new());
    let scanner = Scanner {
        market: &home,
        store: &table,
        notifier: &notifier,
        catalog: &catalog,
        settings: &settings,
        members: &members,
    };
    let report = scanner.run(RunTime::asked(t0(), None)).await.unwrap();
    assert_eq!(report.regions["us-east-1"].accounts, 2);
    assert_eq!(home.calls().get("PurchaseCapacityBlock"), Some(&1), "{report:#?}");
    // Decided on the member's id (the intent's tag), bought under the buyer's.
    assert_eq!(home.purchases_by_intent(), [("r/cb-member".to_string(), 1)].into(), "{report:#?}");
    assert!(home.on_sale().is_empty(), "cb-home was bought");
}
