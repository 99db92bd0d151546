use lambda_runtime::{Error, service_fn};

// One thread: a 128 MB Lambda has a small share of one vCPU, and a second worker only adds
// cross-thread wake-ups (make bench: a 256-question fan-out took 0.09 s multi-threaded, 0.07 s here).
#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    capblock_shared::lambda::install_panic_hook("on-capacity-event");
    capblock_shared::lambda::init_logging();
    let app = on_capacity_event::App::from_env().await?;
    lambda_runtime::run(service_fn(|event| app.handle(event))).await
}
