//! The AWS adapters behind the ports. Clients are built once (in `main`) from the standard
//! AWS configuration chain, so `AWS_ENDPOINT_URL_<SERVICE>` points them at an emulator
//! without any code path of their own.

pub mod accounts;
pub mod autoscaling;
pub mod cause;
pub mod clock;
pub mod dynamo;
pub mod ec2;
pub mod eks;
pub mod eventbridge;
pub mod identity;
pub mod organizations;
pub mod probe;
pub mod ram;
mod regional;
pub mod resource_groups;
pub mod s3;
pub mod scheduler;
pub mod sns;
pub mod ssm;

/// Loads the shared SDK configuration once: region, credentials and endpoint overrides from
/// the environment, plus capblock's timeouts.
pub async fn load_config() -> aws_config::SdkConfig {
    aws_config::defaults(aws_config::BehaviorVersion::latest()).timeout_config(ec2::timeouts()).load().await
}
