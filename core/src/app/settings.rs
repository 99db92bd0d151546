//! Settings every scheduled workflow shares. Read once from the environment by
//! `config::stack_settings` (the one reader and the one place of each default); the type lives
//! in `domain::stack` (the store keeps a copy for the CLI) and is named here for `app/`.

pub use crate::domain::stack::StackSettings;
