//! AWS RAM for `share_with`: one resource share per block, holding its reservation and the
//! rule's principals, tagged so a retry finds it (`domain::share`). RAM's own model: shares are
//! regional like the reservations they hold; `resourceOwner = SELF` lists the shares this
//! account made; associations come and go asynchronously (GetResourceShareAssociations).
//! Locally the market simulator serves these calls (moto refuses capacity reservations).

use async_trait::async_trait;
use aws_config::SdkConfig;
use aws_sdk_ram::Client;
use aws_sdk_ram::error::{DisplayErrorContext, SdkError};
use aws_sdk_ram::types::{
    ResourceOwner, ResourceShareAssociation, ResourceShareAssociationType, ResourceShareStatus, Tag, TagFilter,
};

use super::regional::Regional;
use crate::domain::ids::Region;
use crate::domain::share::{Associated, Association, RESERVATION_TAG, ShareView};
use crate::domain::tags::STACK_TAG;
use crate::ports::{ActionError, ActionResult, ShareRequest, Shares};

/// The IAM actions each port implemented here calls (see `aws::sns::ACTIONS`). Tags given to
/// CreateResourceShare are authorized as `ram:TagResource` too.
pub const ACTIONS: &[(&str, &[&str])] = &[(
    "Shares",
    &[
        "ram:CreateResourceShare",
        "ram:TagResource",
        "ram:GetResourceShares",
        "ram:GetResourceShareAssociations",
        "ram:DeleteResourceShare",
    ],
)];

fn failure<E, R>(operation: &'static str, region: &Region, e: &SdkError<E, R>) -> ActionError
where
    E: std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug,
{
    ActionError { operation, region: region.to_string(), message: DisplayErrorContext(e).to_string() }
}

fn associated(a: &ResourceShareAssociation) -> Option<Associated> {
    Some(Associated {
        entity: a.associated_entity()?.to_string(),
        // A status this release does not know is read as still associating: looked at again
        // later rather than taken for done or failed.
        status: a.status().and_then(|s| Association::parse(s.as_str())).unwrap_or(Association::Associating),
        message: a.status_message().map(str::to_string),
    })
}

async fn find(client: &Client, region: &Region, stack: &str, reservation_id: &str) -> ActionResult<Option<ShareView>> {
    let filter = |k: &str, v: &str| TagFilter::builder().tag_key(k).tag_values(v).build();
    let mut pages = client
        .get_resource_shares()
        .resource_owner(ResourceOwner::SelfValue)
        .resource_share_status(ResourceShareStatus::Active)
        .tag_filters(filter(RESERVATION_TAG, reservation_id))
        .tag_filters(filter(STACK_TAG, stack))
        .into_paginator()
        .send();
    let mut arn = None;
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| failure("GetResourceShares", region, &e))?;
        // The record does not say that RAM ANDs tag filters across keys (the API model's
        // TagFilter reads as a match on any of them): with OR, every share of the stack comes
        // back. Both tags are checked here, so only this block's share is taken under either
        // reading, and the pages are followed until it is found.
        let tagged = |s: &aws_sdk_ram::types::ResourceShare, k: &str, v: &str| {
            s.tags().iter().any(|t| t.key() == Some(k) && t.value() == Some(v))
        };
        if let Some(s) = page
            .resource_shares()
            .iter()
            .find(|s| tagged(s, RESERVATION_TAG, reservation_id) && tagged(s, STACK_TAG, stack))
        {
            arn = s.resource_share_arn().map(str::to_string);
            break;
        }
    }
    let Some(arn) = arn else { return Ok(None) };
    view(client, region, &arn).await.map(Some)
}

async fn view(client: &Client, region: &Region, arn: &str) -> ActionResult<ShareView> {
    let resources = associations(client, region, arn, ResourceShareAssociationType::Resource).await?;
    let principals = associations(client, region, arn, ResourceShareAssociationType::Principal).await?;
    Ok(ShareView { arn: arn.to_string(), resource: resources.into_iter().next(), principals })
}

async fn associations(
    client: &Client,
    region: &Region,
    share_arn: &str,
    kind: ResourceShareAssociationType,
) -> ActionResult<Vec<Associated>> {
    let mut pages = client
        .get_resource_share_associations()
        .association_type(kind)
        .resource_share_arns(share_arn)
        .into_paginator()
        .send();
    let mut out = Vec::new();
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| failure("GetResourceShareAssociations", region, &e))?;
        out.extend(page.resource_share_associations().iter().filter_map(associated));
    }
    Ok(out)
}

async fn create(client: &Client, region: &Region, r: &ShareRequest) -> ActionResult<String> {
    let mut call = client
        .create_resource_share()
        .name(&r.name)
        .resource_arns(&r.reservation_arn)
        // Inside the Organization only, as EC2 shares Capacity Blocks.
        .allow_external_principals(false)
        .client_token(&r.client_token);
    for p in &r.principals {
        call = call.principals(p.as_str());
    }
    for (k, v) in &r.tags {
        call = call.tags(Tag::builder().key(k).value(v).build());
    }
    let out = call.send().await.map_err(|e| failure("CreateResourceShare", region, &e))?;
    out.resource_share().and_then(|s| s.resource_share_arn()).map(str::to_string).ok_or_else(|| ActionError {
        operation: "CreateResourceShare",
        region: region.to_string(),
        message: "RAM answered without the share's ARN".to_string(),
    })
}

async fn delete(client: &Client, region: &Region, share_arn: &str) -> ActionResult<()> {
    match client.delete_resource_share().resource_share_arn(share_arn).send().await {
        Ok(_) => Ok(()),
        // Deleted already (by a run that died before recording it, or by a person): done. RAM
        // answers a share it no longer knows UnknownResourceException, and one it still lists as
        // DELETING or DELETED InvalidStateTransitionException (the only state a deletion can be
        // refused for): the share is gone either way, and the ARN capblock recorded stays.
        Err(e)
            if e.as_service_error()
                .is_some_and(|se| se.is_unknown_resource_exception() || se.is_invalid_state_transition_exception()) =>
        {
            Ok(())
        }
        Err(e) => Err(failure("DeleteResourceShare", region, &e)),
    }
}

pub struct Ram {
    clients: Regional<Client>,
}

impl Ram {
    pub fn new(base: SdkConfig) -> Self {
        Ram { clients: Regional::new(base, Client::new) }
    }
}

#[async_trait]
impl Shares for Ram {
    async fn find(&self, region: &Region, stack: &str, reservation_id: &str) -> ActionResult<Option<ShareView>> {
        find(&self.clients.get(region), region, stack, reservation_id).await
    }

    async fn view(&self, region: &Region, share_arn: &str) -> ActionResult<ShareView> {
        view(&self.clients.get(region), region, share_arn).await
    }

    async fn create(&self, region: &Region, request: &ShareRequest) -> ActionResult<String> {
        create(&self.clients.get(region), region, request).await
    }

    async fn delete(&self, region: &Region, share_arn: &str) -> ActionResult<()> {
        delete(&self.clients.get(region), region, share_arn).await
    }
}
