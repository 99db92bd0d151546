//! The team page's bucket contract (the `PagePublisher` port): a page written is read back whole,
//! the last write wins, and a write to a bucket that is gone fails naming the page, held
//! against the in-memory bucket (`crate::memory::MemoryPages`) and the S3 adapter on moto alike.
//! (The hour's claim, `PageClaims`, is the store's: `contract::store`.)
//!
//! Each case takes a fresh publisher on a fresh, empty bucket and a [`Readers`] that reads it.
//! To add one: write `async fn the_promise<P: PagePublisher, R: Readers>(p: &P, r: &R)` and
//! name it in `page_contract_cases!`: both runners (the core's `on_memory!` below and `contract!`
//! in `tests/tests/integration/topics.rs`) expand that one list.

use async_trait::async_trait;

use crate::ports::PagePublisher;

/// The bucket's readers, and what a case does to the bucket besides writing.
#[async_trait]
pub trait Readers: Send + Sync {
    /// The object `key` as a reader gets it now (`None`: no such object).
    async fn read(&self, key: &str) -> Option<String>;
    /// Empties and deletes the bucket (an operator tearing the stack down by hand).
    async fn delete_bucket(&self);
}

macro_rules! cases {
    ($($name:ident),* $(,)?) => {
        /// Every case, by name.
        pub const CASES: &[&str] = &[$(stringify!($name)),*];

        /// Runs case `name` on `publisher` (on a fresh bucket), read by `readers`.
        pub async fn run<P: PagePublisher, R: Readers>(name: &str, publisher: &P, readers: &R) {
            match name {
                $(stringify!($name) => $name(publisher, readers).await,)*
                _ => panic!("no page contract case {name}"),
            }
        }
    };
}

/// Calls macro `$runner` with the name of every case, in order: the one list of cases.
#[macro_export]
macro_rules! page_contract_cases {
    ($runner:ident) => {
        $runner!(
            a_page_written_is_read_back_whole,
            the_last_page_written_is_the_one_read,
            a_page_for_a_bucket_that_is_gone_fails_naming_it,
        );
    };
}

page_contract_cases!(cases);

const KEY: &str = "index.html";

async fn a_page_written_is_read_back_whole<P: PagePublisher, R: Readers>(p: &P, r: &R) {
    assert_eq!(r.read(KEY).await, None);
    // UTF-8 beyond ASCII, and a page larger than one network read.
    let html =
        format!("<!doctype html><title>capblock</title><p>Bloc « p5 » à 3,00 $</p>{}", "<p>ligne</p>\n".repeat(20_000));
    p.publish(KEY, &html).await.unwrap();
    assert_eq!(r.read(KEY).await, Some(html));
    assert_eq!(r.read("other.html").await, None, "one object, under its key");
}

async fn the_last_page_written_is_the_one_read<P: PagePublisher, R: Readers>(p: &P, r: &R) {
    for n in 1..=3 {
        p.publish(KEY, &format!("<!doctype html><p>page {n}</p>")).await.unwrap();
    }
    assert_eq!(r.read(KEY).await.as_deref(), Some("<!doctype html><p>page 3</p>"));
}

async fn a_page_for_a_bucket_that_is_gone_fails_naming_it<P: PagePublisher, R: Readers>(p: &P, r: &R) {
    p.publish(KEY, "<p>before</p>").await.unwrap();
    r.delete_bucket().await;
    let e = p.publish(KEY, "<p>after</p>").await.unwrap_err();
    assert_eq!(e.operation, "PutObject");
    assert!(e.key.ends_with(KEY), "{e}");
    assert!(e.message.contains("NoSuchBucket"), "{e}");
    assert_eq!(r.read(KEY).await, None);
}

#[cfg(test)]
mod tests {
    use async_trait::async_trait;

    use super::Readers;
    use crate::memory::MemoryPages;

    struct OnMemory(MemoryPages);

    #[async_trait]
    impl Readers for OnMemory {
        async fn read(&self, key: &str) -> Option<String> {
            self.0.object(key)
        }
        async fn delete_bucket(&self) {
            self.0.delete_bucket();
        }
    }

    macro_rules! on_memory {
        ($($name:ident),* $(,)?) => {
            $(
                #[tokio::test]
                async fn $name() {
                    let r = OnMemory(MemoryPages::default());
                    super::run(stringify!($name), &r.0, &r).await;
                }
            )*
        };
    }

    crate::page_contract_cases!(on_memory);
}
