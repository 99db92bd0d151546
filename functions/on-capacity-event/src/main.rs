// One thread: a 128 MB Lambda has a small share of one vCPU, and a second worker only adds
// cross-thread wake-ups (make bench: a 256-question fan-out took 0.09 s multi-threaded, 0.07 s here).
#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_runtime::Error> {
    capblock_shared::lambda::serve("on-capacity-event", on_capacity_event::from_env).await
}
