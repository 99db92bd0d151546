use lambda_runtime::{Error, service_fn};

#[tokio::main]
async fn main() -> Result<(), Error> {
    capblock_shared::lambda::init_logging();
    let app = on_capacity_event::App::from_env().await?;
    lambda_runtime::run(service_fn(|event| app.handle(event))).await
}
