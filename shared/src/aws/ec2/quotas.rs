//! Service Quotas, read to confirm what EC2's refusals suggest: a family's Capacity Block
//! quota of 0. EC2 answers a search for a family with quota 0 exactly as it answers a search
//! past the account's describe limit (`CapacityBlockDescribeLimitExceeded`), so refusals alone
//! can be someone else's burst. Service Quotas names the quota ("Concurrent TRN2 Capacity
//! Blocks per account"): found by its name among EC2's quotas, then read as applied to the
//! account. Anything else (no such quota, no permission, an error) is "cannot tell".

use aws_sdk_servicequotas::Client as QuotasClient;

use super::*;

/// Whether `quota_name` is the family's per-account Capacity Block quota ("Concurrent TRN2
/// Capacity Blocks per account"). Each family also has a "... per organization" twin, default 0
/// like the account's; a field report says it stayed 0 and gated nothing, so reading it would
/// conclude "quota 0" from nothing (capacity-blocks.md, "Service Quotas").
fn names_family(quota_name: &str, family: &str) -> bool {
    let name = quota_name.to_ascii_lowercase();
    name.contains("capacity block")
        && name.contains("per account")
        && name.split_whitespace().any(|w| w == family.to_ascii_lowercase())
}

impl Ec2Market {
    fn quotas(&self, region: &Region) -> QuotasClient {
        let conf = aws_sdk_servicequotas::config::Builder::from(&self.base)
            .region(aws_sdk_servicequotas::config::Region::new(region.to_string()))
            .build();
        QuotasClient::from_conf(conf)
    }
}

#[async_trait]
impl QuotaSource for Ec2Market {
    async fn capacity_block_quota(&self, region: &Region, family: &str) -> Option<u32> {
        quota_of(&self.quotas(region), region, family).await
    }
}

/// The family's Capacity Block quota as `client`'s Service Quotas states it.
async fn quota_of(client: &QuotasClient, region: &Region, family: &str) -> Option<u32> {
    let listed = client
        .list_aws_default_service_quotas()
        .service_code("ec2")
        .into_paginator()
        .items()
        .send()
        .collect::<Result<Vec<_>, _>>()
        .await;
    let defaults = match listed {
        Ok(list) => list,
        Err(e) => {
            tracing::info!(%region, family, error = %DisplayErrorContext(&e), "Service Quotas not read: the quota of 0 rests on EC2's refusals");
            return None;
        }
    };
    let quota = defaults.into_iter().find(|q| q.quota_name().is_some_and(|n| names_family(n, family)))?;
    let code = quota.quota_code()?.to_string();
    // The value applied to the account, or the default when none was ever applied.
    let applied = client.get_service_quota().service_code("ec2").quota_code(&code).send().await;
    let value = match applied {
        Ok(out) => out.quota().and_then(|q| q.value()).or(quota.value()),
        Err(e) => {
            tracing::info!(%region, family, quota = %code, error = %DisplayErrorContext(&e), "the applied quota not read; its default stands");
            quota.value()
        }
    }?;
    // Quotas are whole counts; a negative or absurd value is no answer.
    (value.is_finite() && value >= 0.0 && value <= f64::from(u32::MAX)).then_some(value as u32)
}

#[cfg(test)]
mod tests {
    use aws_sdk_servicequotas::operation::get_service_quota::GetServiceQuotaOutput;
    use aws_sdk_servicequotas::operation::list_aws_default_service_quotas::ListAwsDefaultServiceQuotasOutput;
    use aws_sdk_servicequotas::types::ServiceQuota;
    use aws_smithy_mocks::{mock, mock_client};

    use super::*;

    fn quota(name: &str, code: &str, value: f64) -> ServiceQuota {
        ServiceQuota::builder().quota_name(name).quota_code(code).value(value).build()
    }

    /// The family's quota is found by name among EC2's defaults and read as applied.
    #[tokio::test]
    async fn the_applied_quota_of_the_family_is_read() {
        let defaults = || {
            mock!(QuotasClient::list_aws_default_service_quotas).then_output(|| {
                ListAwsDefaultServiceQuotasOutput::builder()
                    .quotas(quota("Running On-Demand P instances", "L-417A185B", 0.0))
                    // The organization's twin is listed first and stays 0: never read.
                    .quotas(quota("Concurrent TRN2 Capacity Blocks per organization", "L-24E8B4C0", 0.0))
                    .quotas(quota("Concurrent TRN2 Capacity Blocks per account", "L-64569A79", 0.0))
                    .build()
            })
        };
        let list = defaults();
        let get = mock!(QuotasClient::get_service_quota)
            .match_requests(|r| r.quota_code() == Some("L-64569A79"))
            .then_output(|| {
                GetServiceQuotaOutput::builder()
                    .quota(quota("Concurrent TRN2 Capacity Blocks per account", "L-64569A79", 192.0))
                    .build()
            });
        let client = mock_client!(aws_sdk_servicequotas, [&list, &get]);
        let east: Region = "us-east-1".parse().unwrap();
        assert_eq!(quota_of(&client, &east, "trn2").await, Some(192));
        // No quota of that name: cannot tell.
        let list = defaults();
        let client = mock_client!(aws_sdk_servicequotas, [&list]);
        assert_eq!(quota_of(&client, &east, "p6e").await, None);
    }

    #[test]
    fn a_quota_is_found_by_its_family_name() {
        assert!(names_family("Concurrent TRN2 Capacity Blocks per account", "trn2"));
        assert!(names_family("Concurrent P5 Capacity Blocks per account", "p5"));
        assert!(!names_family("Concurrent P5e Capacity Blocks per account", "p5"), "p5e is not p5");
        assert!(!names_family("Running On-Demand P instances", "p5"));
        assert!(!names_family("Concurrent TRN2 Capacity Blocks per organization", "trn2"), "the organization's twin");
    }

    /// Every family with a Capacity Block quota in the public catalog (capacity-blocks.md,
    /// "Quota codes") is found from an instance type of it, and from no other family's type:
    /// the 2026 families' names carry a dash (P6-B200, P6e-GB200), so a family is a whole word.
    #[test]
    fn every_catalogued_family_finds_its_own_quota_and_no_other() {
        use capblock_core::domain::plan::family;
        let catalog = [
            ("P4d", "L-2C8F52B3", "p4d.24xlarge"),
            ("P4de", "L-CFF3E941", "p4de.24xlarge"),
            ("P5", "L-DA6814F2", "p5.48xlarge"),
            ("P5e", "L-C45F30BC", "p5e.48xlarge"),
            ("P5en", "L-4F9BB70B", "p5en.48xlarge"),
            ("P6-B200", "L-8B23CEF3", "p6-b200.48xlarge"),
            ("P6-B300", "L-9C38E5AB", "p6-b300.48xlarge"),
            ("P6e-GB200", "L-FCF0179E", "p6e-gb200.36xlarge"),
            ("Trn1", "L-2E30FD7D", "trn1.32xlarge"),
            ("Trn2", "L-64569A79", "trn2.48xlarge"),
        ];
        for (name, code, _) in catalog {
            let quota_name = format!("Concurrent {name} Capacity Blocks per account");
            for (_, _, instance_type) in catalog {
                let own = name.to_ascii_lowercase() == family(instance_type);
                assert_eq!(
                    names_family(&quota_name, family(instance_type)),
                    own,
                    "{quota_name} ({code}) for {instance_type}"
                );
            }
        }
    }
}
