//! A function's role in memory: every action allowed but those denied, each try recorded.

use std::sync::Mutex;

use async_trait::async_trait;

use crate::domain::ids::{InstanceType, Region};
use crate::domain::permissions::{Access, is_regional};
use crate::ports::PermissionProbe;

/// What a role was tried for, as (action, region).
pub type Tried = (String, Option<String>);

/// The role as `aws/probe` tries it: regional actions as it reads them, the actions denied
/// told by the test.
#[derive(Default)]
pub struct MemoryProbe {
    denied: Vec<Tried>,
    tried: Mutex<Vec<Tried>>,
}

impl MemoryProbe {
    /// `action` denied in `region` (`None`: the function's own region).
    pub fn denying(mut self, action: &str, region: Option<&str>) -> Self {
        self.denied.push((action.to_string(), region.map(str::to_string)));
        self
    }

    /// Every try, in order.
    pub fn tried(&self) -> Vec<Tried> {
        self.tried.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

#[async_trait]
impl PermissionProbe for MemoryProbe {
    async fn try_action(&self, action: &str, region: Option<&Region>, _: Option<&InstanceType>) -> Access {
        let tried = (action.to_string(), region.map(|r| r.to_string()));
        let denied = self.denied.contains(&tried);
        self.tried.lock().unwrap_or_else(|p| p.into_inner()).push(tried);
        if denied { Access::Denied { message: format!("{action} is denied") } } else { Access::Allowed }
    }
    fn regional(&self, action: &str) -> bool {
        is_regional(action)
    }
}
