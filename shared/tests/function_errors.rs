//! The functions' errors as Lambda reports them: a typed `errorType` each, retryable or not.

/// Each failure an operator can meet maps to its own Lambda `errorType`, and only the ones a
/// retry can cure are retryable.
#[test]
fn function_errors_are_typed_and_tell_retryable_from_not() {
    use capblock_shared::config::ConfigError;
    use capblock_shared::lambda::FunctionError;
    use capblock_shared::ports::{MarketError, NotifyError, StoreError};
    let cases: Vec<(FunctionError, &str, bool, &str)> = vec![
        (FunctionError::BadInput("time: premature end".into()), "capblock.BadInput", false, "time"),
        (FunctionError::Config(ConfigError::Missing("CAPBLOCK_TABLE")), "capblock.Config", false, "CAPBLOCK_TABLE"),
        (
            FunctionError::Config(ConfigError::Invalid {
                name: "CAPBLOCK_MODE",
                value: "x".into(),
                problem: "p".into(),
            }),
            "capblock.Config",
            false,
            "CAPBLOCK_MODE",
        ),
        (
            FunctionError::Store(StoreError::Unavailable("throttled".into())),
            "capblock.StoreUnavailable",
            true,
            "throttled",
        ),
        (
            FunctionError::Market(MarketError::Throttled {
                operation: "DescribeCapacityBlockOfferings",
                region: "us-east-1".into(),
                code: "RequestLimitExceeded",
            }),
            "capblock.MarketUnavailable",
            true,
            "RequestLimitExceeded",
        ),
        (
            FunctionError::Market(MarketError::Rejected {
                operation: "PurchaseCapacityBlock",
                region: "us-east-1".into(),
                code: "UnauthorizedOperation".into(),
                message: "not allowed".into(),
            }),
            "capblock.MarketUnavailable",
            true,
            "UnauthorizedOperation",
        ),
        (
            FunctionError::Notify(NotifyError::Failed { topic: "alerts".into(), message: "denied".into() }),
            "capblock.NotifyFailed",
            true,
            "alerts",
        ),
    ];
    for (e, kind, retryable, needle) in cases {
        assert_eq!(e.kind(), kind, "{e}");
        assert_eq!(e.retryable(), retryable, "{e}");
        assert!(e.to_string().contains(needle), "{e} should name {needle}");
    }
}
