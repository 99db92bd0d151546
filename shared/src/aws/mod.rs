//! The AWS adapters behind the ports. Clients are built once (in `main`) from the standard
//! AWS configuration chain, so `AWS_ENDPOINT_URL_<SERVICE>` points them at an emulator
//! without any code path of their own.

pub mod dynamo;
mod dynamo_item;
