//! The team page's bucket (S3): `PutObject` of the one page the tracker renders.
//!
//! Addressing: the SDK resolves S3 endpoints by its own rules, path-style when the endpoint is an
//! IP address (`http://127.0.0.1/<bucket>/<key>`: aws-sdk-s3's endpoint test "use global endpoint,
//! IP address endpoint override") and virtual-hosted against AWS. The local stack gives moto as
//! `AWS_ENDPOINT_URL_S3=http://127.0.0.1:<port>` (infra/local/stack.sh), so the same client
//! reaches both, with no setting or code path for tests (no `force_path_style`).

use async_trait::async_trait;
use aws_config::SdkConfig;
use aws_sdk_s3::Client;
use aws_sdk_s3::primitives::ByteStream;

use super::cause::cause;
use crate::ports::{PagePublisher, PublishError};

/// The IAM actions each port of this adapter needs (see `aws::sns::ACTIONS`).
pub const ACTIONS: &[(&str, &[&str])] = &[("PagePublisher", &["s3:PutObject"])];

/// What a browser is told of the page: HTML in UTF-8, and to ask again before showing a copy it
/// kept (`no-cache` revalidates by ETag, so an unchanged page costs no download, and a page
/// republished since is never shown stale).
pub const CONTENT_TYPE: &str = "text/html; charset=utf-8";
pub const CACHE_CONTROL: &str = "no-cache";

/// The stack's page bucket, in the function's own region.
pub struct S3Pages {
    client: Client,
    bucket: String,
}

impl S3Pages {
    pub fn new(sdk: &SdkConfig, bucket: impl Into<String>) -> Self {
        S3Pages { client: Client::new(sdk), bucket: bucket.into() }
    }

    pub fn bucket(&self) -> &str {
        &self.bucket
    }
}

#[async_trait]
impl PagePublisher for S3Pages {
    async fn publish(&self, key: &str, html: &str) -> Result<(), PublishError> {
        self.client
            .put_object()
            .bucket(&self.bucket)
            .key(key)
            .content_type(CONTENT_TYPE)
            .cache_control(CACHE_CONTROL)
            .body(ByteStream::from(html.as_bytes().to_vec()))
            .send()
            .await
            .map(|_| ())
            .map_err(|e| PublishError {
                operation: "PutObject",
                key: format!("s3://{}/{key}", self.bucket),
                message: cause(&e).to_string(),
            })
    }
}
