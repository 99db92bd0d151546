//! Which region a call is for, and who makes it. The endpoint override points every region at
//! the same simulator, so the only place the region survives is the SigV4 credential scope; the
//! caller is the access key id at its head (signatures are not checked).

pub const DEFAULT_REGION: &str = "us-east-1";

/// The access key id from `Authorization: AWS4-HMAC-SHA256 Credential=AKID/DATE/REGION/ec2/aws4_request, ...`
/// or from a presigned `X-Amz-Credential` value; `None` when neither has one.
pub fn access_key(header: Option<&str>, presigned_credential: Option<&str>) -> Option<String> {
    scope_part(header, presigned_credential, 0)
}

/// Region from `Authorization: AWS4-HMAC-SHA256 Credential=AKID/DATE/REGION/ec2/aws4_request, ...`
/// or from a presigned `X-Amz-Credential` value; `None` when neither has one.
pub fn from_authorization(header: Option<&str>, presigned_credential: Option<&str>) -> Option<String> {
    scope_part(header, presigned_credential, 2)
}

/// Part `i` of the credential scope (AKID / DATE / REGION / SERVICE / aws4_request): the
/// header's if it has a non-empty one, else the presigned credential's.
fn scope_part(header: Option<&str>, presigned_credential: Option<&str>, i: usize) -> Option<String> {
    let part = |scope: &str| {
        let parts: Vec<&str> = scope.split('/').collect();
        (parts.len() >= 5 && !parts[i].is_empty()).then(|| parts[i].to_string())
    };
    header.and_then(scope_of_header).and_then(part).or_else(|| presigned_credential.and_then(part))
}

fn scope_of_header(h: &str) -> Option<&str> {
    let rest = &h[h.find("Credential=")? + "Credential=".len()..];
    rest.split([',', ' ']).next()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_sigv4_scope() {
        let h = "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261201/eu-west-2/ec2/aws4_request, SignedHeaders=host;x-amz-date, Signature=abc";
        assert_eq!(from_authorization(Some(h), None).as_deref(), Some("eu-west-2"));
        assert_eq!(
            from_authorization(None, Some("AK/20261201/ap-south-1/ec2/aws4_request")).as_deref(),
            Some("ap-south-1")
        );
        assert_eq!(from_authorization(Some("Bearer x"), None), None);
        assert_eq!(from_authorization(None, None), None);
    }

    #[test]
    fn parses_the_access_key() {
        let h = "AWS4-HMAC-SHA256 Credential=ASIAFUNCTIONKEY/20261201/eu-west-2/ec2/aws4_request, SignedHeaders=host, Signature=abc";
        assert_eq!(access_key(Some(h), None).as_deref(), Some("ASIAFUNCTIONKEY"));
        assert_eq!(
            access_key(None, Some("AKPRESIGNED/20261201/ap-south-1/ec2/aws4_request")).as_deref(),
            Some("AKPRESIGNED")
        );
        // The header wins over a presigned credential.
        assert_eq!(
            access_key(Some(h), Some("AKPRESIGNED/20261201/ap-south-1/ec2/aws4_request")).as_deref(),
            Some("ASIAFUNCTIONKEY")
        );
        assert_eq!(access_key(Some("Bearer x"), None), None);
        assert_eq!(access_key(Some("AWS4-HMAC-SHA256 Credential=/20261201/us-east-1/ec2/aws4_request"), None), None);
        assert_eq!(access_key(None, None), None);
    }
}
