//! CreateLaunchTemplate, CreateLaunchTemplateVersion and DescribeLaunchTemplateVersions: launch
//! templates kept per region, as EC2 keeps them (see `crate::launch_templates` and README.md,
//! "Launch templates"). They are not capacity-block actions: every region has them.

use super::purchase::tags_for;
use super::{Ctx, authorize, dry_run};
use crate::launch_templates::{Data, LaunchTemplate, Version};
use crate::pagination::{fingerprint, page_size, paginate};
use crate::rng::stable_hash;
use crate::wire::error::ApiError;
use crate::wire::query::Params;
use crate::wire::xml::Xml;
use crate::world::World;

/// EC2's codes (the EC2 API error code list).
pub const NAME_MALFORMED: &str = "InvalidLaunchTemplateName.MalformedException";
pub const NAME_IN_USE: &str = "InvalidLaunchTemplateName.AlreadyExistsException";
pub const NAME_NOT_FOUND: &str = "InvalidLaunchTemplateName.NotFoundException";
pub const ID_MALFORMED: &str = "InvalidLaunchTemplateId.Malformed";
pub const ID_NOT_FOUND: &str = "InvalidLaunchTemplateId.NotFound";
pub const VERSION_NOT_FOUND: &str = "InvalidLaunchTemplateId.VersionNotFound";
pub const IDEMPOTENT_MISMATCH: &str = "IdempotentParameterMismatch";

/// EC2's answer to DescribeLaunchTemplateVersions naming no template and either no versions
/// (MissingParameter) or version numbers (InvalidParameterValue), as recorded against AWS.
pub const ALL_TEMPLATES_MESSAGE: &str = "To describe the launch template data for all your launch templates, for \
     \u{2018}--versions\u{2019} specify \u{2018}$Latest\u{2019}, \u{2018}$Default\u{2019}, or both, and omit \
     \u{2018}--launch-template-id\u{2019}, \u{2018}--launch-template-name\u{2019}, and version numbers. To describe \
     the launch template data for a specific launch template, specify \u{2018}--launch-template-id\u{2019} or \
     \u{2018}--launch-template-name\u{2019}, and for \u{2018}--versions\u{2019} specify one or more of the following \
     values: \u{2018}$Latest\u{2019}, \u{2018}$Default\u{2019}, or one or more version numbers.";

/// The model's LaunchTemplateName: 3 to 128 characters of `[a-zA-Z0-9\(\)\.\-/_]`.
pub fn valid_name(name: &str) -> bool {
    (3..=128).contains(&name.len())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '(' | ')' | '.' | '-' | '/' | '_'))
}

fn malformed_name() -> ApiError {
    ApiError::client(
        NAME_MALFORMED,
        "A launch template name must be between 3 and 128 characters, and may contain letters, numbers, and the \
         following characters: - ( ) . / _.",
    )
}

/// `lt-` and 17 hex digits, the shape of every launch template id.
fn well_formed_id(id: &str) -> bool {
    id.strip_prefix("lt-").is_some_and(|hex| hex.len() == 17 && hex.chars().all(|c| c.is_ascii_hexdigit()))
}

/// The template a call names: by id or by name, never both.
enum Named {
    Id(String),
    Name(String),
}

fn named(p: &Params) -> Result<Option<Named>, ApiError> {
    let given = |k: &str| p.get(k).filter(|v| !v.is_empty()).map(str::to_string);
    match (given("LaunchTemplateId"), given("LaunchTemplateName")) {
        (Some(_), Some(_)) => Err(ApiError::client(
            "InvalidParameterCombination",
            "Either provide launch template ID or launch template name, not both.",
        )),
        (Some(id), None) if !well_formed_id(&id) => Err(ApiError::client(
            ID_MALFORMED,
            format!(
                "The launch template ID '{id}' is malformed. Ensure that you specify the launch template ID in the \
                 form lt-xxxxxxxxxxxxxxxxx."
            ),
        )),
        (Some(id), None) => Ok(Some(Named::Id(id))),
        (None, Some(name)) => Ok(Some(Named::Name(name))),
        (None, None) => Ok(None),
    }
}

/// The index of the template `n` names in `region`.
fn find(w: &World, region: &str, n: &Named) -> Result<usize, ApiError> {
    let here = |t: &LaunchTemplate| t.region == region;
    match n {
        Named::Id(id) => w.launch_templates.iter().position(|t| here(t) && t.id == *id).ok_or_else(|| {
            ApiError::client(
                ID_NOT_FOUND,
                format!("The specified launch template, with template ID {id}, does not exist."),
            )
        }),
        Named::Name(name) => w.launch_templates.iter().position(|t| here(t) && t.name == *name).ok_or_else(|| {
            ApiError::client(
                NAME_NOT_FOUND,
                format!("The specified launch template, with template name {name}, does not exist."),
            )
        }),
    }
}

/// A version as a call gives it: `$Latest`, `$Default` or a number of `t`.
fn resolve(t: &LaunchTemplate, given: &str, param: &str) -> Result<u64, ApiError> {
    match given {
        "$Latest" => Ok(t.latest_version()),
        "$Default" => Ok(t.default_version),
        n => match n.parse::<u64>() {
            Ok(n) if t.version(n).is_some() => Ok(n),
            Ok(n) => Err(ApiError::client(
                VERSION_NOT_FOUND,
                format!("Could not find the specified version {n} for the launch template with ID {}.", t.id),
            )),
            Err(_) => Err(ApiError::invalid_value(format!(
                "Value ({given}) for parameter {param} is invalid. Expected $Latest, $Default or a version number."
            ))),
        },
    }
}

/// The `LaunchTemplateData.*` of the call, which the model requires.
fn data(p: &Params) -> Result<Data, ApiError> {
    let d = Data::from_request(p.pairs());
    if d.is_empty() { Err(ApiError::missing("LaunchTemplateData")) } else { Ok(d) }
}

/// `VersionDescription`: at most 255 characters (the model).
fn version_description(p: &Params) -> Result<Option<String>, ApiError> {
    match p.get("VersionDescription") {
        Some(d) if d.chars().count() > 255 => Err(ApiError::invalid_value(
            "Value for parameter VersionDescription is invalid. It must be at most 255 characters.",
        )),
        d => Ok(d.map(str::to_string)),
    }
}

/// `ClientToken`: at most 128 ASCII characters (the model); empty is none.
fn client_token(p: &Params) -> Result<Option<String>, ApiError> {
    match p.get("ClientToken").filter(|t| !t.is_empty()) {
        Some(t) if t.len() > 128 || !t.is_ascii() => Err(ApiError::invalid_value(
            "Value for parameter ClientToken is invalid. It must be at most 128 ASCII characters.",
        )),
        t => Ok(t.map(str::to_string)),
    }
}

/// What makes two calls with one token the same call: every parameter but the token, DryRun and
/// the protocol's own (Action, Version, a presigned call's X-Amz-*), in any order.
fn call_fingerprint(p: &Params) -> u64 {
    let mut v: Vec<String> = p
        .pairs()
        .iter()
        .filter(|(k, _)| !matches!(k.as_str(), "Action" | "Version" | "ClientToken" | "DryRun"))
        .filter(|(k, _)| !k.starts_with("X-Amz-"))
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    v.sort();
    stable_hash(&v.join("&"))
}

/// Idempotency ("Ensuring idempotency in Amazon EC2 API requests"): a call repeating an earlier
/// successful one's token in the region gets that call's answer again and changes nothing; with
/// other parameters it is refused. `None`: the call is new.
fn replay(w: &World, ctx: &Ctx<'_>, token: Option<&str>, fp: u64) -> Result<Option<String>, ApiError> {
    let Some(token) = token else { return Ok(None) };
    match w.client_tokens.get(&(ctx.region.to_string(), ctx.action.to_string(), token.to_string())) {
        Some((seen, body)) if *seen == fp => Ok(Some(body.clone())),
        Some(_) => Err(ApiError::client(
            IDEMPOTENT_MISMATCH,
            "The request uses the same client token as a previous, but non-identical request. Do not reuse a client \
             token with different requests, unless the requests are identical.",
        )),
        None => Ok(None),
    }
}

fn remember(w: &mut World, ctx: &Ctx<'_>, token: Option<String>, fp: u64, body: &str) {
    if let Some(token) = token {
        w.client_tokens.insert((ctx.region.to_string(), ctx.action.to_string(), token), (fp, body.to_string()));
    }
}

/// `createdBy`: the caller's ARN, the assumed role the IAM denials name for a signed call, the
/// account's root for an unsigned one.
fn caller_arn(w: &World, ctx: &Ctx<'_>) -> String {
    let account = &w.scenario.account_id;
    match ctx.caller {
        Some(key) => format!("arn:aws:sts::{account}:assumed-role/role-{key}/{key}"),
        None => format!("arn:aws:iam::{account}:root"),
    }
}

pub fn create(w: &mut World, ctx: &Ctx<'_>, p: &Params) -> Result<String, ApiError> {
    authorize(w, ctx)?;
    let name = p.require("LaunchTemplateName")?.to_string();
    if !valid_name(&name) {
        return Err(malformed_name());
    }
    let data = data(p)?;
    let description = version_description(p)?;
    let tags = tags_for(p, "launch-template")?;
    let token = client_token(p)?;
    dry_run(p)?;
    let fp = call_fingerprint(p);
    if let Some(body) = replay(w, ctx, token.as_deref(), fp)? {
        return Ok(body);
    }
    if w.launch_templates.iter().any(|t| t.region == ctx.region && t.name == name) {
        return Err(ApiError::client(NAME_IN_USE, "Launch template name already in use."));
    }
    let created_by = caller_arn(w, ctx);
    let t = LaunchTemplate {
        id: w.new_launch_template_id(),
        name,
        region: ctx.region.to_string(),
        created: ctx.now,
        created_by: created_by.clone(),
        default_version: 1,
        versions: vec![Version { number: 1, description, created: ctx.now, created_by, data }],
        tags,
    };
    tracing::info!(id = %t.id, name = %t.name, region = %t.region, "launch template created");
    let mut x = Xml::new();
    x.open("launchTemplate");
    t.write(&mut x);
    x.close("launchTemplate");
    let body = x.into_string();
    w.launch_templates.push(t);
    remember(w, ctx, token, fp, &body);
    Ok(body)
}

pub fn create_version(w: &mut World, ctx: &Ctx<'_>, p: &Params) -> Result<String, ApiError> {
    authorize(w, ctx)?;
    let named = named(p)?.ok_or_else(|| {
        ApiError::client(
            "MissingParameter",
            "The request must contain the parameter launch template ID or launch template name",
        )
    })?;
    let new = data(p)?;
    let description = version_description(p)?;
    let token = client_token(p)?;
    let i = find(w, ctx.region, &named)?;
    let t = &w.launch_templates[i];
    let data = match p.get("SourceVersion").filter(|s| !s.is_empty()) {
        Some(s) => {
            let n = resolve(t, s, "SourceVersion")?;
            t.version(n).map(|v| v.data.overlaid_with(&new)).unwrap_or(new)
        }
        None => new,
    };
    dry_run(p)?;
    let fp = call_fingerprint(p);
    if let Some(body) = replay(w, ctx, token.as_deref(), fp)? {
        return Ok(body);
    }
    let created_by = caller_arn(w, ctx);
    let t = &mut w.launch_templates[i];
    let number = t.latest_version() + 1;
    t.versions.push(Version { number, description, created: ctx.now, created_by, data });
    tracing::info!(id = %t.id, version = number, "launch template version created");
    let t = &w.launch_templates[i];
    let mut x = Xml::new();
    x.open("launchTemplateVersion");
    if let Some(v) = t.versions.last() {
        t.write_version(&mut x, v);
    }
    x.close("launchTemplateVersion");
    let body = x.into_string();
    remember(w, ctx, token, fp, &body);
    Ok(body)
}

pub fn describe_versions(w: &mut World, ctx: &Ctx<'_>, p: &Params) -> Result<String, ApiError> {
    authorize(w, ctx)?;
    let w: &World = w;
    // Not modelled: refused rather than ignored, so that no answer is silently wider.
    for unmodelled in ["MinVersion", "MaxVersion"] {
        if p.get(unmodelled).is_some() {
            return Err(ApiError::invalid_value(format!(
                "The simulator does not model {unmodelled} of DescribeLaunchTemplateVersions (README.md, Launch templates)."
            )));
        }
    }
    if !p.filters().is_empty() {
        return Err(ApiError::invalid_value(
            "The simulator does not model the filters of DescribeLaunchTemplateVersions (README.md, Launch templates).",
        ));
    }
    let size = page_size(p, 1, 200)?;
    let asked = p.list("LaunchTemplateVersion");
    // (template index, version number), each template's newest first.
    let mut items: Vec<(usize, u64)> = Vec::new();
    match named(p)? {
        None => {
            if asked.is_empty() {
                return Err(ApiError::client("MissingParameter", ALL_TEMPLATES_MESSAGE));
            }
            if asked.iter().any(|v| v != "$Latest" && v != "$Default") {
                return Err(ApiError::invalid_value(ALL_TEMPLATES_MESSAGE));
            }
            for (i, t) in w.launch_templates.iter().enumerate().filter(|(_, t)| t.region == ctx.region) {
                let mut numbers: Vec<u64> =
                    asked.iter().map(|v| if v == "$Latest" { t.latest_version() } else { t.default_version }).collect();
                numbers.sort_unstable_by(|a, b| b.cmp(a));
                numbers.dedup();
                items.extend(numbers.into_iter().map(|n| (i, n)));
            }
        }
        Some(n) => {
            let i = find(w, ctx.region, &n)?;
            let t = &w.launch_templates[i];
            let mut numbers: Vec<u64> = if asked.is_empty() {
                t.versions.iter().map(|v| v.number).collect()
            } else {
                asked.iter().map(|v| resolve(t, v, "LaunchTemplateVersion")).collect::<Result<_, _>>()?
            };
            numbers.sort_unstable_by(|a, b| b.cmp(a));
            numbers.dedup();
            items.extend(numbers.into_iter().map(|n| (i, n)));
        }
    }
    dry_run(p)?;
    let (page, next) = paginate(&items, size, p.get("NextToken"), fingerprint(ctx.action, ctx.region, p))?;
    let mut x = Xml::new();
    x.set("launchTemplateVersionSet", &page, |x, (i, n)| {
        let t = &w.launch_templates[*i];
        if let Some(v) = t.version(*n) {
            t.write_version(x, v);
        }
    });
    if let Some(t) = next {
        x.leaf("nextToken", t);
    }
    Ok(x.into_string())
}

#[cfg(test)]
mod tests {
    use super::super::dispatch_as;
    use super::super::test_support::{values, world_of};
    use super::*;
    use crate::launch_templates::{CR_GROUP_ARN, CR_ID, MARKET_TYPE};

    const GROUP: &str = "arn:aws:resource-groups:us-east-1:111122223333:group/capblock-x";

    fn world() -> World {
        world_of("describe_limit = false", "")
    }

    fn call_in(w: &mut World, region: &str, action: &str, pairs: &[(&str, &str)]) -> Result<String, ApiError> {
        dispatch_as(w, region, None, action, &Params::from_pairs(pairs)).map(|o| o.body)
    }

    fn call(w: &mut World, action: &str, pairs: &[(&str, &str)]) -> Result<String, ApiError> {
        call_in(w, "us-east-1", action, pairs)
    }

    fn with_data(mut pairs: Vec<(String, String)>, data: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.extend(data.iter().map(|(k, v)| (format!("LaunchTemplateData.{k}"), v.to_string())));
        pairs
    }

    fn owned(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn borrowed(pairs: &[(String, String)]) -> Vec<(&str, &str)> {
        pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
    }

    /// A capacity-block template: p5.48xlarge, MarketType capacity-block, the group GROUP.
    fn capacity_block_data() -> Vec<(&'static str, &'static str)> {
        vec![
            ("InstanceType", "p5.48xlarge"),
            ("ImageId", "ami-0123456789abcdef0"),
            (MARKET_TYPE, "capacity-block"),
            (CR_GROUP_ARN, GROUP),
        ]
    }

    fn create(w: &mut World, name: &str, data: &[(&str, &str)]) -> Result<String, ApiError> {
        let pairs = with_data(owned(&[("LaunchTemplateName", name)]), data);
        call(w, "CreateLaunchTemplate", &borrowed(&pairs))
    }

    fn version(w: &mut World, extra: &[(&str, &str)], data: &[(&str, &str)]) -> Result<String, ApiError> {
        let pairs = with_data(owned(extra), data);
        call(w, "CreateLaunchTemplateVersion", &borrowed(&pairs))
    }

    fn describe(w: &mut World, pairs: &[(&str, &str)]) -> Result<Vec<String>, ApiError> {
        call(w, "DescribeLaunchTemplateVersions", pairs).map(|b| values(&b, "versionNumber"))
    }

    #[test]
    fn create_answers_the_template_with_version_1() {
        let mut w = world();
        let body = create(&mut w, "capblock-p5", &capacity_block_data()).unwrap();
        let id = values(&body, "launchTemplateId").swap_remove(0);
        assert!(well_formed_id(&id), "{id}");
        assert!(id.chars().skip(3).all(|c| c.is_ascii_digit() || c.is_ascii_lowercase()), "{id}");
        assert_eq!(
            body,
            format!(
                "<launchTemplate><launchTemplateId>{id}</launchTemplateId><launchTemplateName>capblock-p5\
                 </launchTemplateName><createTime>2026-12-01T00:00:00.000Z</createTime><createdBy>\
                 arn:aws:iam::111122223333:root</createdBy><defaultVersionNumber>1</defaultVersionNumber>\
                 <latestVersionNumber>1</latestVersionNumber></launchTemplate>"
            )
        );
        assert_eq!(w.launch_templates.len(), 1);
        assert_eq!(w.launch_templates[0].versions[0].data.get(MARKET_TYPE), Some("capacity-block"));
        // A signed caller is its assumed role; the template's own tags answer too.
        let pairs = with_data(
            owned(&[
                ("LaunchTemplateName", "tagged"),
                ("TagSpecification.1.ResourceType", "launch-template"),
                ("TagSpecification.1.Tag.1.Key", "team"),
                ("TagSpecification.1.Tag.1.Value", "ml"),
            ]),
            &[("InstanceType", "p5.48xlarge")],
        );
        let body = dispatch_as(
            &mut w,
            "us-east-1",
            Some("ASIAKEY"),
            "CreateLaunchTemplate",
            &Params::from_pairs(&borrowed(&pairs)),
        )
        .unwrap()
        .body;
        assert!(body.contains("<createdBy>arn:aws:sts::111122223333:assumed-role/role-ASIAKEY/ASIAKEY</createdBy>"));
        assert!(body.contains("<tagSet><item><key>team</key><value>ml</value></item></tagSet>"), "{body}");
        let e = create(&mut w, "x-instance-tags", &[("InstanceType", "p5.48xlarge")]);
        assert!(e.is_ok());
        let bad = with_data(
            owned(&[("LaunchTemplateName", "wrong-type"), ("TagSpecification.1.ResourceType", "instance")]),
            &[("InstanceType", "p5.48xlarge")],
        );
        let e = call(&mut w, "CreateLaunchTemplate", &borrowed(&bad)).unwrap_err();
        assert_eq!(e.code, "InvalidParameterValue");
    }

    #[test]
    fn versions_are_numbered_and_described_by_latest_default_and_number() {
        let mut w = world();
        create(&mut w, "lt-ml", &capacity_block_data()).unwrap();
        let id = w.launch_templates[0].id.clone();
        // Version 2 from version 1, targeting a reservation: it inherits the rest.
        let v2 = version(
            &mut w,
            &[("LaunchTemplateName", "lt-ml"), ("SourceVersion", "1"), ("VersionDescription", "one block")],
            &[(CR_ID, "cr-0123456789abcdef0")],
        )
        .unwrap();
        assert_eq!(values(&v2, "versionNumber"), ["2"]);
        assert_eq!(values(&v2, "defaultVersion"), ["false"]);
        assert_eq!(values(&v2, "versionDescription"), ["one block"]);
        assert_eq!(values(&v2, "marketType"), ["capacity-block"]);
        assert_eq!(values(&v2, "capacityReservationId"), ["cr-0123456789abcdef0"]);
        assert!(values(&v2, "capacityReservationResourceGroupArn").is_empty(), "replaced with the whole parameter");
        // Version 3 without a source version has only what it gives.
        let v3 = version(&mut w, &[("LaunchTemplateId", &id)], &[("ImageId", "ami-3")]).unwrap();
        assert!(values(&v3, "instanceType").is_empty(), "{v3}");
        let t = &w.launch_templates[0];
        assert_eq!((t.default_version, t.latest_version()), (1, 3));

        let by_name = [("LaunchTemplateName", "lt-ml")];
        assert_eq!(describe(&mut w, &by_name).unwrap(), ["3", "2", "1"], "every version, newest first");
        assert_eq!(
            describe(&mut w, &[("LaunchTemplateId", &id), ("LaunchTemplateVersion.1", "$Latest")]).unwrap(),
            ["3"]
        );
        let body = call(
            &mut w,
            "DescribeLaunchTemplateVersions",
            &[("LaunchTemplateId", &id), ("LaunchTemplateVersion.1", "$Default")],
        )
        .unwrap();
        assert_eq!(
            (values(&body, "versionNumber"), values(&body, "defaultVersion")),
            (vec!["1".into()], vec!["true".into()])
        );
        let asked = [
            ("LaunchTemplateName", "lt-ml"),
            ("LaunchTemplateVersion.1", "1"),
            ("LaunchTemplateVersion.2", "2"),
            ("LaunchTemplateVersion.3", "$Default"),
        ];
        assert_eq!(describe(&mut w, &asked).unwrap(), ["2", "1"], "each version once");
        // Every template's $Latest and $Default in the region, when none is named.
        create(&mut w, "other", &[("InstanceType", "p5.48xlarge")]).unwrap();
        let all = [("LaunchTemplateVersion.1", "$Latest"), ("LaunchTemplateVersion.2", "$Default")];
        assert_eq!(describe(&mut w, &all).unwrap(), ["3", "1", "1"]);
        assert_eq!(describe(&mut w, &[("LaunchTemplateVersion.1", "$Default")]).unwrap(), ["1", "1"]);
        assert!(
            call_in(&mut w, "us-west-2", "DescribeLaunchTemplateVersions", &all)
                .unwrap()
                .ends_with("<launchTemplateVersionSet></launchTemplateVersionSet>")
        );
    }

    #[test]
    fn the_capacity_reservation_target_round_trips() {
        let mut w = world();
        create(&mut w, "by-group", &capacity_block_data()).unwrap();
        let mut by_id = capacity_block_data();
        by_id[3] = (CR_ID, "cr-0123456789abcdef0");
        by_id.push(("CapacityReservationSpecification.CapacityReservationPreference", "capacity-reservations-only"));
        create(&mut w, "by-id", &by_id).unwrap();
        let body = call(&mut w, "DescribeLaunchTemplateVersions", &[("LaunchTemplateName", "by-group")]).unwrap();
        assert!(body.starts_with("<launchTemplateVersionSet><item><launchTemplateId>lt-"), "{body}");
        assert!(
            body.ends_with(
                "<launchTemplateName>by-group</launchTemplateName><versionNumber>1</versionNumber>\
                 <createTime>2026-12-01T00:00:00.000Z</createTime><createdBy>arn:aws:iam::111122223333:root</createdBy>\
                 <defaultVersion>true</defaultVersion><launchTemplateData><instanceType>p5.48xlarge</instanceType>\
                 <imageId>ami-0123456789abcdef0</imageId><instanceMarketOptions><marketType>capacity-block</marketType>\
                 </instanceMarketOptions><capacityReservationSpecification><capacityReservationTarget>\
                 <capacityReservationResourceGroupArn>arn:aws:resource-groups:us-east-1:111122223333:group/capblock-x\
                 </capacityReservationResourceGroupArn></capacityReservationTarget></capacityReservationSpecification>\
                 </launchTemplateData></item></launchTemplateVersionSet>"
            ),
            "{body}"
        );
        let body = call(&mut w, "DescribeLaunchTemplateVersions", &[("LaunchTemplateName", "by-id")]).unwrap();
        assert!(
            body.contains(
                "<capacityReservationSpecification><capacityReservationTarget><capacityReservationId>\
                 cr-0123456789abcdef0</capacityReservationId></capacityReservationTarget><capacityReservationPreference>\
                 capacity-reservations-only</capacityReservationPreference></capacityReservationSpecification>"
            ),
            "{body}"
        );
    }

    #[test]
    fn an_unknown_template_or_version_answers_ec2s_codes() {
        let mut w = world();
        create(&mut w, "known", &capacity_block_data()).unwrap();
        let id = w.launch_templates[0].id.clone();
        let unknown = "lt-0123456789abcdef0";
        for action in ["DescribeLaunchTemplateVersions", "CreateLaunchTemplateVersion"] {
            let pairs = with_data(owned(&[("LaunchTemplateId", unknown)]), &[("ImageId", "ami-1")]);
            let e = call(&mut w, action, &borrowed(&pairs)).unwrap_err();
            assert_eq!(
                (e.code.as_str(), e.message.as_str()),
                (ID_NOT_FOUND, "The specified launch template, with template ID lt-0123456789abcdef0, does not exist."),
                "{action}"
            );
            let pairs = with_data(owned(&[("LaunchTemplateName", "nope")]), &[("ImageId", "ami-1")]);
            let e = call(&mut w, action, &borrowed(&pairs)).unwrap_err();
            assert_eq!(
                (e.code.as_str(), e.message.as_str()),
                (NAME_NOT_FOUND, "The specified launch template, with template name nope, does not exist."),
                "{action}"
            );
            let pairs = with_data(owned(&[("LaunchTemplateId", "lt-nothex")]), &[("ImageId", "ami-1")]);
            assert_eq!(call(&mut w, action, &borrowed(&pairs)).unwrap_err().code, ID_MALFORMED, "{action}");
            let pairs =
                with_data(owned(&[("LaunchTemplateId", &id), ("LaunchTemplateName", "known")]), &[("ImageId", "a")]);
            assert_eq!(call(&mut w, action, &borrowed(&pairs)).unwrap_err().code, "InvalidParameterCombination");
            // A template of another region does not exist here.
            let pairs = with_data(owned(&[("LaunchTemplateName", "known")]), &[("ImageId", "ami-1")]);
            assert_eq!(call_in(&mut w, "eu-west-1", action, &borrowed(&pairs)).unwrap_err().code, NAME_NOT_FOUND);
        }
        let e = describe(&mut w, &[("LaunchTemplateName", "known"), ("LaunchTemplateVersion.1", "3")]).unwrap_err();
        assert_eq!(
            (e.code.as_str(), e.message),
            (
                VERSION_NOT_FOUND,
                format!("Could not find the specified version 3 for the launch template with ID {id}.")
            )
        );
        let e = version(&mut w, &[("LaunchTemplateId", &id), ("SourceVersion", "2")], &[("ImageId", "a")]).unwrap_err();
        assert_eq!(e.code, VERSION_NOT_FOUND);
        let e = describe(&mut w, &[("LaunchTemplateId", &id), ("LaunchTemplateVersion.1", "latest")]).unwrap_err();
        assert_eq!(e.code, "InvalidParameterValue");
        // Naming no template: MissingParameter without versions, InvalidParameterValue with numbers.
        let e = describe(&mut w, &[]).unwrap_err();
        assert_eq!((e.code.as_str(), e.message.as_str()), ("MissingParameter", ALL_TEMPLATES_MESSAGE));
        assert!(e.message.contains("for \u{2018}--versions\u{2019} specify \u{2018}$Latest\u{2019}"));
        let e =
            describe(&mut w, &[("LaunchTemplateVersion.1", "$Latest"), ("LaunchTemplateVersion.2", "1")]).unwrap_err();
        assert_eq!((e.code.as_str(), e.message.as_str()), ("InvalidParameterValue", ALL_TEMPLATES_MESSAGE));
        let e = version(&mut w, &[], &[("ImageId", "a")]).unwrap_err();
        assert_eq!(e.code, "MissingParameter");
        let e = version(&mut w, &[("LaunchTemplateId", &id)], &[]).unwrap_err();
        assert_eq!(e.message, "The request must contain the parameter LaunchTemplateData");
        assert_eq!(w.launch_templates[0].versions.len(), 1, "nothing was created");
    }

    #[test]
    fn a_name_is_unique_in_its_region_and_validated() {
        let mut w = world();
        create(&mut w, "capblock-p5", &capacity_block_data()).unwrap();
        let e = create(&mut w, "capblock-p5", &[("InstanceType", "p5.4xlarge")]).unwrap_err();
        assert_eq!(
            (e.status, e.code.as_str(), e.message.as_str()),
            (400, NAME_IN_USE, "Launch template name already in use.")
        );
        let pairs = with_data(owned(&[("LaunchTemplateName", "capblock-p5")]), &capacity_block_data());
        call_in(&mut w, "us-west-2", "CreateLaunchTemplate", &borrowed(&pairs)).expect("another region");
        assert_eq!(w.launch_templates.len(), 2);

        let long = "a".repeat(128);
        for ok in ["abc", "my-(x).y/z_1", long.as_str()] {
            assert!(valid_name(ok), "{ok}");
            create(&mut w, ok, &[("InstanceType", "p5.48xlarge")]).expect(ok);
        }
        let too_long = "a".repeat(129);
        for bad in ["ab", too_long.as_str(), "a b c", "caf\u{e9}s", "a:b", "a,b", "$Latest"] {
            assert!(!valid_name(bad), "{bad}");
            let e = create(&mut w, bad, &[("InstanceType", "p5.48xlarge")]).unwrap_err();
            assert_eq!(e.code, NAME_MALFORMED, "{bad}");
            assert_eq!(
                e.message,
                "A launch template name must be between 3 and 128 characters, and may contain letters, numbers, \
                 and the following characters: - ( ) . / _."
            );
        }
        assert_eq!(create(&mut w, "", &[("InstanceType", "p5.48xlarge")]).unwrap_err().code, "MissingParameter");
        let e = create(&mut w, "no-data", &[]).unwrap_err();
        assert_eq!(
            (e.code.as_str(), e.message.as_str()),
            ("MissingParameter", "The request must contain the parameter LaunchTemplateData")
        );
        assert_eq!(w.launch_templates.len(), 5);
    }

    #[test]
    fn a_client_token_makes_a_call_idempotent_and_dry_run_records_nothing() {
        let mut w = world();
        let first =
            with_data(owned(&[("LaunchTemplateName", "once"), ("ClientToken", "tok-1")]), &capacity_block_data());
        let a = call(&mut w, "CreateLaunchTemplate", &borrowed(&first)).unwrap();
        // The same call again (in another order, with botocore's Action and Version): the same answer.
        let mut again = first.clone();
        again.reverse();
        again.extend(owned(&[("Action", "CreateLaunchTemplate"), ("Version", "2016-11-15")]));
        assert_eq!(call(&mut w, "CreateLaunchTemplate", &borrowed(&again)).unwrap(), a);
        assert_eq!(w.launch_templates.len(), 1);
        // The token with other parameters is refused; the parameters without it are a new call.
        let other =
            with_data(owned(&[("LaunchTemplateName", "twice"), ("ClientToken", "tok-1")]), &capacity_block_data());
        let e = call(&mut w, "CreateLaunchTemplate", &borrowed(&other)).unwrap_err();
        assert_eq!((e.status, e.code.as_str()), (400, IDEMPOTENT_MISMATCH));
        let untokened = with_data(owned(&[("LaunchTemplateName", "once")]), &capacity_block_data());
        assert_eq!(call(&mut w, "CreateLaunchTemplate", &borrowed(&untokened)).unwrap_err().code, NAME_IN_USE);
        // Another region has its own tokens.
        call_in(&mut w, "us-west-2", "CreateLaunchTemplate", &borrowed(&first)).expect("a new template there");
        assert_eq!(w.launch_templates.len(), 2);

        // A version with a token is made once.
        let v = [("LaunchTemplateName", "once"), ("ClientToken", "tok-1")];
        let b = version(&mut w, &v, &[("ImageId", "ami-2")]).unwrap();
        assert_eq!(version(&mut w, &v, &[("ImageId", "ami-2")]).unwrap(), b);
        assert_eq!(version(&mut w, &v, &[("ImageId", "ami-3")]).unwrap_err().code, IDEMPOTENT_MISMATCH);
        assert_eq!(w.launch_templates[0].latest_version(), 2);

        // DryRun: after the parameters, before anything is made or remembered.
        let dry = with_data(
            owned(&[("LaunchTemplateName", "dry"), ("ClientToken", "tok-2"), ("DryRun", "true")]),
            &[("ImageId", "a")],
        );
        assert_eq!(call(&mut w, "CreateLaunchTemplate", &borrowed(&dry)).unwrap_err().code, "DryRunOperation");
        let dry_bad = with_data(owned(&[("LaunchTemplateName", "a"), ("DryRun", "true")]), &[("ImageId", "a")]);
        assert_eq!(call(&mut w, "CreateLaunchTemplate", &borrowed(&dry_bad)).unwrap_err().code, NAME_MALFORMED);
        let e =
            version(&mut w, &[("LaunchTemplateName", "once"), ("DryRun", "true")], &[("ImageId", "a")]).unwrap_err();
        assert_eq!(e.code, "DryRunOperation");
        let e = describe(&mut w, &[("LaunchTemplateName", "once"), ("DryRun", "true")]).unwrap_err();
        assert_eq!(e.code, "DryRunOperation");
        assert_eq!((w.launch_templates.len(), w.launch_templates[0].latest_version()), (2, 2));
        assert!(!w.client_tokens.keys().any(|(_, _, t)| t == "tok-2"));
        let long = "t".repeat(129);
        let e = version(&mut w, &[("LaunchTemplateName", "once"), ("ClientToken", &long)], &[("ImageId", "a")])
            .unwrap_err();
        assert_eq!(e.code, "InvalidParameterValue");
    }

    #[test]
    fn pages_and_what_is_not_modelled() {
        let mut w = world();
        create(&mut w, "paged", &[("InstanceType", "p5.48xlarge")]).unwrap();
        for _ in 0..2 {
            version(&mut w, &[("LaunchTemplateName", "paged"), ("SourceVersion", "$Latest")], &[("ImageId", "a")])
                .unwrap();
        }
        let mut seen = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let mut pairs = vec![("LaunchTemplateName", "paged"), ("MaxResults", "2")];
            if let Some(t) = &token {
                pairs.push(("NextToken", t));
            }
            let body = call(&mut w, "DescribeLaunchTemplateVersions", &pairs).unwrap();
            seen.extend(values(&body, "versionNumber"));
            match values(&body, "nextToken").pop() {
                Some(t) => token = Some(t),
                None => break,
            }
        }
        assert_eq!(seen, ["3", "2", "1"]);
        for bad in ["0", "201"] {
            let e = describe(&mut w, &[("LaunchTemplateName", "paged"), ("MaxResults", bad)]).unwrap_err();
            assert_eq!(e.code, "InvalidParameterValue", "{bad}");
        }
        for unmodelled in [("MinVersion", "1"), ("MaxVersion", "2"), ("Filter.1.Name", "image-id")] {
            let e = describe(&mut w, &[("LaunchTemplateName", "paged"), unmodelled]).unwrap_err();
            assert_eq!(e.code, "InvalidParameterValue", "{unmodelled:?}");
            assert!(e.message.contains("does not model"), "{}", e.message);
        }
    }

    #[test]
    fn templates_show_in_the_state_and_reset_with_the_scenario() {
        let mut w = world();
        create(&mut w, "capblock-p5", &capacity_block_data()).unwrap();
        version(&mut w, &[("LaunchTemplateName", "capblock-p5")], &[(CR_ID, "cr-1")]).unwrap();
        let r = crate::control::handle(&mut w, "GET", "/_sim/state", b"");
        let st: serde_json::Value = serde_json::from_str(&r.body).unwrap();
        let t = &st["launch_templates"][0];
        assert_eq!(t["launch_template_name"], "capblock-p5");
        assert_eq!(t["region"], "us-east-1");
        assert_eq!(
            (&t["default_version_number"], &t["latest_version_number"]),
            (&serde_json::json!(1), &serde_json::json!(2))
        );
        let v1 = &t["versions"][0];
        assert_eq!(
            (&v1["market_type"], &v1["capacity_reservation_resource_group_arn"]),
            (&serde_json::json!("capacity-block"), &serde_json::json!(GROUP))
        );
        assert_eq!(v1["data"]["InstanceType"], "p5.48xlarge");
        assert_eq!(
            (&v1["default"], &t["versions"][1]["default"]),
            (&serde_json::json!(true), &serde_json::json!(false))
        );
        assert_eq!(t["versions"][1]["capacity_reservation_id"], "cr-1");
        assert!(t["versions"][1]["market_type"].is_null());
        let r = crate::control::handle(&mut w, "POST", "/_sim/scenario", b"");
        assert_eq!(r.status, 200);
        assert!(w.launch_templates.is_empty() && w.client_tokens.is_empty());
    }
}
