//! What an AWS SDK error means to a person, read once from the SDK's typed error (never from its
//! debug text): no credentials, an expired session, no region, AWS out of reach, a timeout, an
//! unreadable answer, or AWS's own refusal with its code. Each cause says what to do. Used by
//! the CLI's messages and preflight's findings, so a DNS failure is never advised as a missing
//! permission and no `DispatchFailure { .. }` dump reaches a terminal.

use std::error::Error;
use std::fmt;

use aws_credential_types::provider::error::CredentialsError;
use aws_smithy_runtime_api::client::result::SdkError;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;

/// Why a call failed, as a person acts on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cause {
    /// No credentials anywhere in the default chain.
    NoCredentials,
    /// Credentials were found but their session ended.
    ExpiredSession,
    /// No region to sign for (AWS_REGION unset, no profile region).
    NoRegion,
    /// The request never reached AWS: DNS, a refused connection, no network.
    Unreachable(String),
    /// Sent, and no answer in time: it may have been done.
    TimedOut,
    /// An answer came that could not be read.
    Unreadable,
    /// AWS refused it, with its code and message.
    Refused { code: String, message: String },
    /// Anything else, in the SDK's own first words.
    Other(String),
}

impl Cause {
    /// Whether AWS refused it for want of a permission.
    pub fn is_access_denied(&self) -> bool {
        matches!(self, Cause::Refused { code, .. } if code.contains("AccessDenied") || code.contains("Unauthorized"))
    }

    /// What to do about it.
    pub fn todo(&self) -> String {
        match self {
            Cause::NoCredentials => {
                "set AWS_PROFILE (after `aws sso login`), or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY".into()
            }
            Cause::ExpiredSession => "log in again (`aws sso login`), then run it again".into(),
            Cause::NoRegion => "set AWS_REGION (or a region in the AWS profile) to the stack's region".into(),
            Cause::Unreachable(_) => {
                "check the network and AWS_REGION (AWS_ENDPOINT_URL_* are for the local stack only)".into()
            }
            Cause::TimedOut => "run it again; if it keeps timing out, check the network".into(),
            Cause::Unreadable => "run it again; if it persists, report it with the log".into(),
            Cause::Refused { .. } if self.is_access_denied() => {
                "grant the permission the message names to the credentials you run with".into()
            }
            Cause::Refused { .. } | Cause::Other(_) => "read the message; it is AWS's".into(),
        }
    }
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cause::NoCredentials => write!(f, "no AWS credentials found"),
            Cause::ExpiredSession => write!(f, "the AWS session has expired"),
            Cause::NoRegion => write!(f, "no AWS region is set"),
            Cause::Unreachable(why) => write!(f, "AWS could not be reached ({why})"),
            Cause::TimedOut => write!(f, "AWS did not answer in time"),
            Cause::Unreadable => write!(f, "AWS's answer could not be read"),
            Cause::Refused { code, message } if message.is_empty() => write!(f, "AWS refused it: {code}"),
            Cause::Refused { code, message } => write!(f, "AWS refused it: {code}: {message}"),
            Cause::Other(why) => write!(f, "{why}"),
        }
    }
}

/// The cause of `e`.
pub fn cause<E, R>(e: &SdkError<E, R>) -> Cause
where
    E: ProvideErrorMetadata + Error + 'static,
    R: fmt::Debug + 'static,
{
    if let Some(c) = credentials(e) {
        return c;
    }
    match e {
        SdkError::ServiceError(_) => {
            let code = e.code().unwrap_or("an unnamed error").to_string();
            if code.contains("ExpiredToken") || code == "RequestExpired" {
                return Cause::ExpiredSession;
            }
            Cause::Refused { code, message: e.message().unwrap_or_default().to_string() }
        }
        SdkError::TimeoutError(_) => Cause::TimedOut,
        SdkError::ResponseError(_) => Cause::Unreadable,
        SdkError::DispatchFailure(d) if d.is_timeout() => Cause::TimedOut,
        SdkError::DispatchFailure(d) if d.is_io() => Cause::Unreachable(root(e)),
        _ => {
            let text = chain(e);
            if text.contains("region") && (text.contains("signing") || text.contains("missing")) {
                Cause::NoRegion
            } else if text.contains("dns error") || text.contains("Connection refused") {
                Cause::Unreachable(root(e))
            } else {
                Cause::Other(root(e))
            }
        }
    }
}

/// A credentials failure anywhere in `e`'s sources (the SDK wraps the provider's error).
fn credentials(e: &(dyn Error + 'static)) -> Option<Cause> {
    let mut at: Option<&(dyn Error + 'static)> = Some(e);
    while let Some(err) = at {
        if let Some(c) = err.downcast_ref::<CredentialsError>() {
            let text = chain(c).to_ascii_lowercase();
            return Some(if text.contains("expired") { Cause::ExpiredSession } else { Cause::NoCredentials });
        }
        at = err.source();
    }
    None
}

/// Every message of `e`'s source chain, joined: what the SDK says, without its debug dump.
fn chain(e: &(dyn Error + 'static)) -> String {
    let mut parts = Vec::new();
    let mut at: Option<&(dyn Error + 'static)> = Some(e);
    while let Some(err) = at {
        parts.push(err.to_string());
        at = err.source();
    }
    parts.join(": ")
}

/// The innermost message: the one that names the cause ("dns error: failed to lookup ...").
fn root(e: &(dyn Error + 'static)) -> String {
    let mut at: &(dyn Error + 'static) = e;
    while let Some(next) = at.source() {
        at = next;
    }
    at.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_ec2::operation::describe_instances::DescribeInstancesError;
    use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
    use aws_smithy_runtime_api::client::result::{ConnectorError, ServiceError};
    use aws_smithy_types::error::ErrorMetadata;

    type E = SdkError<DescribeInstancesError, HttpResponse>;

    fn refused(code: &str) -> E {
        let meta = ErrorMetadata::builder().code(code).message("nope").build();
        let raw = HttpResponse::new(403u16.try_into().unwrap(), aws_smithy_types::body::SdkBody::empty());
        SdkError::ServiceError(ServiceError::builder().source(DescribeInstancesError::generic(meta)).raw(raw).build())
    }

    #[test]
    fn each_cause_is_read_from_the_typed_error_and_says_what_to_do() {
        let dns = E::dispatch_failure(ConnectorError::io(
            std::io::Error::other("dns error: failed to lookup address information").into(),
        ));
        let c = cause(&dns);
        assert!(matches!(&c, Cause::Unreachable(why) if why.contains("dns error")), "{c:?}");
        assert!(c.todo().contains("network") && !c.todo().contains("lambda"), "{c:?}");

        let timeout = E::dispatch_failure(ConnectorError::timeout("slow".into()));
        assert_eq!(cause(&timeout), Cause::TimedOut);

        let denied = cause(&refused("AccessDeniedException"));
        assert!(denied.is_access_denied() && denied.to_string().contains("AccessDeniedException: nope"));
        assert_eq!(cause(&refused("ExpiredTokenException")), Cause::ExpiredSession);
        assert!(!cause(&refused("ThrottlingException")).is_access_denied());

        let no_creds =
            E::dispatch_failure(ConnectorError::other(CredentialsError::not_loaded_no_source().into(), None));
        assert_eq!(cause(&no_creds), Cause::NoCredentials);
        assert!(cause(&no_creds).todo().contains("AWS_PROFILE"));
    }
}
