//! Extensions: DescribeCapacityBlockExtensionOfferings and PurchaseCapacityBlockExtension
//! (sent once, as a purchase is).

use super::*;

#[async_trait]
impl ExtensionMarket for Ec2Market {
    async fn extension_offerings(
        &self,
        region: &Region,
        reservation_id: &str,
        duration_hours: u32,
    ) -> Result<Vec<ExtensionOffer>, MarketError> {
        const OP: &str = "DescribeCapacityBlockExtensionOfferings";
        let hours = int_param(OP, region, "CapacityBlockExtensionDurationHours", duration_hours)?;
        // One attempt per call: the tracker paces these questions itself and stops asking the
        // region at a throttled one (`app::extend`), as the scan's paced asker does.
        let mut pages = self
            .once(region)
            .describe_capacity_block_extension_offerings()
            .capacity_reservation_id(reservation_id)
            .capacity_block_extension_duration_hours(hours)
            .into_paginator()
            .send();
        let mut out = Vec::new();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| classify(OP, region, e))?;
            for o in page.capacity_block_extension_offerings() {
                let parsed = (|| {
                    let id = o.capacity_block_extension_offering_id().ok_or("no offering id")?;
                    let fee = o.upfront_fee().ok_or("no UpfrontFee")?;
                    let fee = Money::parse(fee, o.currency_code().unwrap_or("USD")).map_err(|_| "a bad UpfrontFee")?;
                    Ok::<_, &str>(ExtensionOffer {
                        id: id.to_string(),
                        reservation_id: reservation_id.to_string(),
                        duration_hours: o
                            .capacity_block_extension_duration_hours()
                            .and_then(|h| u32::try_from(h).ok())
                            .unwrap_or(duration_hours),
                        start: o.capacity_block_extension_start_date().and_then(to_chrono).ok_or("no start date")?,
                        end: o.capacity_block_extension_end_date().and_then(to_chrono).ok_or("no end date")?,
                        fee,
                    })
                })();
                match parsed {
                    Ok(x) => out.push(x),
                    Err(e) => {
                        tracing::warn!(%region, reservation = reservation_id, error = e, "skipping an extension offering EC2 described badly")
                    }
                }
            }
        }
        Ok(out)
    }

    async fn check_extension(
        &self,
        region: &Region,
        offering_id: &str,
        reservation_id: &str,
    ) -> Result<(), MarketError> {
        // DryRun buys nothing; still one attempt, like the real call.
        match self.extension_purchase(region, offering_id, reservation_id, true).await {
            Err(e) if e.code() == Some("DryRunOperation") => Ok(()),
            Err(e) => Err(classify(EXTENSION_OP, region, e)),
            // EC2 never answers a dry run with success; if it did, something was bought.
            Ok(_) => Err(MarketError::Unknown {
                operation: EXTENSION_OP,
                region: region.to_string(),
                message: "EC2 answered a DryRun extension purchase with success".into(),
            }),
        }
    }

    async fn purchase_extension(
        &self,
        region: &Region,
        offering_id: &str,
        reservation_id: &str,
    ) -> Result<ExtensionReceipt, MarketError> {
        // No ClientToken here either: one attempt; an unknown outcome is settled by watching
        // the block's end date, never by resending.
        match self.extension_purchase(region, offering_id, reservation_id, false).await {
            Ok(out) => {
                let x = out.capacity_block_extensions().first();
                Ok(ExtensionReceipt {
                    offering_id: offering_id.to_string(),
                    reservation_id: reservation_id.to_string(),
                    status: x
                        .and_then(|x| x.capacity_block_extension_status())
                        .map(|s| s.as_str().to_string())
                        .unwrap_or_else(|| "payment-pending".into()),
                    end: x.and_then(|x| x.capacity_block_extension_end_date()).and_then(to_chrono),
                })
            }
            Err(e) => Err(classify(EXTENSION_OP, region, e)),
        }
    }
}

const EXTENSION_OP: &str = "PurchaseCapacityBlockExtension";

impl Ec2Market {
    /// PurchaseCapacityBlockExtension, sent once (no retry: it has no idempotency token).
    async fn extension_purchase(
        &self,
        region: &Region,
        offering_id: &str,
        reservation_id: &str,
        dry_run: bool,
    ) -> Result<
        aws_sdk_ec2::operation::purchase_capacity_block_extension::PurchaseCapacityBlockExtensionOutput,
        SdkError<aws_sdk_ec2::operation::purchase_capacity_block_extension::PurchaseCapacityBlockExtensionError>,
    > {
        self.once(region)
            .purchase_capacity_block_extension()
            .capacity_block_extension_offering_id(offering_id)
            .capacity_reservation_id(reservation_id)
            .dry_run(dry_run)
            .send()
            .await
    }
}
