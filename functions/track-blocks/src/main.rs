use lambda_runtime::{Error, service_fn};

#[tokio::main]
async fn main() -> Result<(), Error> {
    capblock_shared::lambda::init_logging();
    let app = track_blocks::App::from_env().await?;
    lambda_runtime::run(service_fn(|event| app.handle(event))).await
}
