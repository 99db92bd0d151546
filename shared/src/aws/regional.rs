//! One SDK client per region, built lazily from the shared configuration: blocks live in the
//! regions rules name, and a parameter, group or instance of a block is in the block's region.

use std::collections::HashMap;
use std::sync::Mutex;

use aws_config::SdkConfig;

use crate::domain::ids::Region;

pub struct Regional<C> {
    base: SdkConfig,
    /// The client's `new` (e.g. `aws_sdk_ssm::Client::new`), given the base with the region set.
    build: fn(&SdkConfig) -> C,
    clients: Mutex<HashMap<Region, C>>,
}

impl<C: Clone> Regional<C> {
    pub fn new(base: SdkConfig, build: fn(&SdkConfig) -> C) -> Self {
        Regional { base, build, clients: Mutex::new(HashMap::new()) }
    }

    pub fn get(&self, region: &Region) -> C {
        let mut clients = self.clients.lock().unwrap_or_else(|p| p.into_inner());
        let build =
            || (self.build)(&self.base.to_builder().region(aws_config::Region::new(region.to_string())).build());
        clients.entry(region.clone()).or_insert_with(build).clone()
    }
}
