//! EC2-style errors. Status codes follow EC2: 400 client errors, 403 UnauthorizedOperation,
//! 412 DryRunOperation, 503 RequestLimitExceeded/Unavailable, 500 InternalError.

use super::xml::escape;

pub const DESCRIBE_LIMIT_EXCEEDED: &str = "CapacityBlockDescribeLimitExceeded";
pub const UNAUTHORIZED: &str = "UnauthorizedOperation";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: u16,
    pub code: String,
    pub message: String,
}

impl ApiError {
    pub fn new(status: u16, code: &str, message: impl Into<String>) -> Self {
        Self { status, code: code.to_string(), message: message.into() }
    }

    pub fn client(code: &str, message: impl Into<String>) -> Self {
        Self::new(400, code, message)
    }

    pub fn invalid_value(message: impl Into<String>) -> Self {
        Self::client("InvalidParameterValue", message)
    }

    pub fn missing(name: &str) -> Self {
        Self::client("MissingParameter", format!("The request must contain the parameter {name}"))
    }

    pub fn dry_run() -> Self {
        Self::new(412, "DryRunOperation", "Request would have succeeded, but DryRun flag is set.")
    }

    /// The caller's IAM policies do not allow the action: EC2 answers `UnauthorizedOperation`
    /// with HTTP 403 (the message is built by the caller, see `actions::authorize`).
    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(403, UNAUTHORIZED, message)
    }

    pub fn throttled() -> Self {
        Self::new(503, "RequestLimitExceeded", "Request limit exceeded.")
    }

    /// DescribeCapacityBlockOfferings past the account's describe limit, or for an instance
    /// family whose Capacity Block quota is 0: the same code and message, a client error.
    pub fn describe_limit() -> Self {
        Self::client(DESCRIBE_LIMIT_EXCEEDED, "You've reached the limit for this account.")
    }

    pub fn internal() -> Self {
        Self::new(500, "InternalError", "An internal error has occurred. Please try again later.")
    }

    pub fn unsupported(region: &str) -> Self {
        Self::client("UnsupportedOperation", format!("Capacity Blocks are not supported in region {region}."))
    }

    /// The XML body EC2 sends for errors (note: `RequestID`, not `requestId`).
    pub fn to_xml(&self, request_id: &str) -> String {
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error><Code>{}</Code><Message>{}</Message></Error></Errors><RequestID>{}</RequestID></Response>",
            escape(&self.code),
            escape(&self.message),
            escape(request_id)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_xml_is_escaped() {
        let e = ApiError::invalid_value("a < b & 'c'");
        let x = e.to_xml("rid");
        assert!(x.contains("<Code>InvalidParameterValue</Code>"));
        assert!(x.contains("<Message>a &lt; b &amp; &apos;c&apos;</Message>"));
        assert!(x.contains("<RequestID>rid</RequestID>"));
        assert_eq!(ApiError::dry_run().status, 412);
        assert_eq!(ApiError::throttled().status, 503);
        assert_eq!(
            (ApiError::unauthorized("no").status, ApiError::unauthorized("no").code.as_str()),
            (403, UNAUTHORIZED)
        );
        let limit = ApiError::describe_limit();
        assert_eq!((limit.status, limit.code.as_str()), (400, "CapacityBlockDescribeLimitExceeded"));
        assert!(limit.to_xml("r").contains("<Message>You&apos;ve reached the limit for this account.</Message>"));
    }
}
