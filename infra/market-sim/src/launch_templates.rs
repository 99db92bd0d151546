//! Launch templates as EC2 keeps them: a named, per-region resource with numbered, immutable
//! versions, each holding the `LaunchTemplateData` it was created with. The data is kept as the
//! query pairs EC2's protocol flattens it into (`CapacityReservationSpecification.
//! CapacityReservationTarget.CapacityReservationId`, `SecurityGroupId.1`, ...), verbatim, and
//! written back in the XML shape of `ResponseLaunchTemplateData`: each query segment's element is
//! its name with a lowercase first letter, a list `<nameSet><item>..</item></nameSet>`, except
//! the few lists [`LIST_ELEMENTS`] names (checked member by member against botocore's EC2 model).
//! The simulator never launches anything from a template: it only keeps and answers them.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use crate::wire::xml::Xml;

/// The request keys (after `LaunchTemplateData.`) capblock reads back, as EC2's query protocol
/// names them.
pub const INSTANCE_TYPE: &str = "InstanceType";
pub const IMAGE_ID: &str = "ImageId";
pub const MARKET_TYPE: &str = "InstanceMarketOptions.MarketType";
pub const CR_PREFERENCE: &str = "CapacityReservationSpecification.CapacityReservationPreference";
pub const CR_ID: &str = "CapacityReservationSpecification.CapacityReservationTarget.CapacityReservationId";
pub const CR_GROUP_ARN: &str =
    "CapacityReservationSpecification.CapacityReservationTarget.CapacityReservationResourceGroupArn";

/// The lists of `RequestLaunchTemplateData` whose response element is not `{name}Set` of
/// `<item>`s: (the list's request path, indices as `N`; its element; its members' element).
/// Every other member of the request shape, at any depth, answers under its own name with a
/// lowercase first letter (the other 185 of its 188 members in botocore 1.44's model).
pub const LIST_ELEMENTS: &[(&str, &str, &str)] = &[
    ("LicenseSpecification", "licenseSet", "item"),
    ("NetworkInterface.N.SecurityGroupId", "groupSet", "groupId"),
    ("SecondaryInterface.N.PrivateIpAddress", "privateIpAddressesSet", "item"),
];

/// One version's `LaunchTemplateData`: the request's `LaunchTemplateData.*` pairs without the
/// prefix, in the order given (a key given twice keeps its first place and its last value).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Data {
    pairs: Vec<(String, String)>,
}

impl Data {
    /// The `LaunchTemplateData.*` pairs of a request; keys with an empty segment are dropped.
    pub fn from_request(pairs: &[(String, String)]) -> Self {
        let mut d = Self::default();
        for (k, v) in pairs {
            if let Some(key) = k.strip_prefix("LaunchTemplateData.")
                && !key.split('.').any(str::is_empty)
            {
                d.set(key, v);
            }
        }
        d
    }

    fn set(&mut self, key: &str, value: &str) {
        match self.pairs.iter_mut().find(|(k, _)| k == key) {
            Some(slot) => slot.1 = value.to_string(),
            None => self.pairs.push((key.to_string(), value.to_string())),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.pairs.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    /// The top-level parameters given (`CapacityReservationSpecification`, `SecurityGroupId`, ...).
    fn parameters(&self) -> impl Iterator<Item = &str> {
        self.pairs.iter().map(|(k, _)| top(k))
    }

    /// A new version's data based on `self` (CreateLaunchTemplateVersion's `SourceVersion`): it
    /// inherits every parameter of the source except those `new` specifies, which replace the
    /// source's whole (a top-level parameter, e.g. `CapacityReservationSpecification`, with
    /// everything under it).
    pub fn overlaid_with(&self, new: &Data) -> Data {
        let given: Vec<&str> = new.parameters().collect();
        let mut d = Data { pairs: self.pairs.iter().filter(|(k, _)| !given.contains(&top(k))).cloned().collect() };
        for (k, v) in &new.pairs {
            d.set(k, v);
        }
        d
    }

    /// `<launchTemplateData>`'s content.
    pub fn write(&self, x: &mut Xml) {
        let mut root = Vec::new();
        for (k, v) in &self.pairs {
            let segments: Vec<&str> = k.split('.').collect();
            insert(&mut root, &segments, v);
        }
        write_members(x, &root, "");
    }

    /// The pairs, as a JSON object (GET /_sim/state).
    pub fn to_json(&self) -> Value {
        let map: BTreeMap<&str, &str> = self.pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        json!(map)
    }
}

fn top(key: &str) -> &str {
    key.split('.').next().unwrap_or(key)
}

/// The data as a tree: a structure's members in the order first given, a list's by index.
#[derive(Debug)]
enum Node {
    Leaf(String),
    Struct(Vec<(String, Node)>),
    List(BTreeMap<u32, Node>),
}

fn member<'a>(members: &'a mut Vec<(String, Node)>, name: &str, empty: fn() -> Node) -> &'a mut Node {
    let i = match members.iter().position(|(n, _)| n == name) {
        Some(i) => i,
        None => {
            members.push((name.to_string(), empty()));
            members.len() - 1
        }
    };
    &mut members[i].1
}

/// Puts `value` at `segments` (`["BlockDeviceMapping", "1", "Ebs", "VolumeSize"]`) under
/// `members`. A segment of digits is an index into the list named by the segment before it. A
/// path that contradicts an earlier one (a leaf where a structure was) replaces it.
fn insert(members: &mut Vec<(String, Node)>, segments: &[&str], value: &str) {
    let Some((name, rest)) = segments.split_first() else { return };
    let node = member(members, name, || Node::Leaf(String::new()));
    match rest {
        [] => *node = Node::Leaf(value.to_string()),
        [index, after @ ..] if index.parse::<u32>().is_ok() => {
            let index = index.parse::<u32>().unwrap_or_default();
            if !matches!(node, Node::List(_)) {
                *node = Node::List(BTreeMap::new());
            }
            let Node::List(items) = node else { return };
            let item = items.entry(index).or_insert_with(|| Node::Leaf(String::new()));
            if after.is_empty() {
                *item = Node::Leaf(value.to_string());
            } else {
                if !matches!(item, Node::Struct(_)) {
                    *item = Node::Struct(Vec::new());
                }
                if let Node::Struct(m) = item {
                    insert(m, after, value);
                }
            }
        }
        _ => {
            if !matches!(node, Node::Struct(_)) {
                *node = Node::Struct(Vec::new());
            }
            if let Node::Struct(m) = node {
                insert(m, rest, value);
            }
        }
    }
}

/// `InstanceType` -> `instanceType`.
fn element(name: &str) -> String {
    let mut chars = name.chars();
    chars.next().map(|c| c.to_ascii_lowercase().to_string() + chars.as_str()).unwrap_or_default()
}

/// The elements of the list at request path `path` (indices as `N`): its own and its members'.
fn list_elements(path: &str, name: &str) -> (String, &'static str) {
    match LIST_ELEMENTS.iter().find(|(p, _, _)| *p == path) {
        Some((_, set, item)) => ((*set).to_string(), item),
        None => (format!("{}Set", element(name)), "item"),
    }
}

fn write_members(x: &mut Xml, members: &[(String, Node)], parent: &str) {
    for (name, node) in members {
        let path = if parent.is_empty() { name.clone() } else { format!("{parent}.{name}") };
        match node {
            Node::Leaf(v) => {
                x.leaf(&element(name), v);
            }
            Node::Struct(m) => {
                let tag = element(name);
                x.open(&tag);
                write_members(x, m, &path);
                x.close(&tag);
            }
            Node::List(items) => {
                let (set, item) = list_elements(&path, name);
                x.open(&set);
                for node in items.values() {
                    x.open(item);
                    match node {
                        Node::Leaf(v) => {
                            x.text(v);
                        }
                        Node::Struct(m) => write_members(x, m, &format!("{path}.N")),
                        // Lists of lists do not occur in the model.
                        Node::List(_) => {}
                    }
                    x.close(item);
                }
                x.close(&set);
            }
        }
    }
}

#[derive(Debug, Clone)]
pub struct Version {
    pub number: u64,
    pub description: Option<String>,
    pub created: DateTime<Utc>,
    pub created_by: String,
    pub data: Data,
}

#[derive(Debug, Clone)]
pub struct LaunchTemplate {
    /// `lt-` + 17 hex digits.
    pub id: String,
    pub name: String,
    pub region: String,
    pub created: DateTime<Utc>,
    /// Who created it (`createdBy`): the caller's ARN.
    pub created_by: String,
    pub default_version: u64,
    /// Version 1 first; numbers are 1, 2, ... in creation order.
    pub versions: Vec<Version>,
    /// The template's own tags (`TagSpecification.N` of resource type `launch-template`).
    pub tags: Vec<(String, String)>,
}

impl LaunchTemplate {
    pub fn latest_version(&self) -> u64 {
        self.versions.last().map_or(0, |v| v.number)
    }

    pub fn version(&self, number: u64) -> Option<&Version> {
        self.versions.iter().find(|v| v.number == number)
    }

    /// `<launchTemplate>`'s content (the LaunchTemplate shape).
    pub fn write(&self, x: &mut Xml) {
        x.leaf("launchTemplateId", &self.id)
            .leaf("launchTemplateName", &self.name)
            .time("createTime", self.created)
            .leaf("createdBy", &self.created_by)
            .num("defaultVersionNumber", self.default_version)
            .num("latestVersionNumber", self.latest_version());
        if !self.tags.is_empty() {
            x.tags("tagSet", &self.tags);
        }
    }

    /// One item of `launchTemplateVersionSet`, or `<launchTemplateVersion>`'s content (the
    /// LaunchTemplateVersion shape).
    pub fn write_version(&self, x: &mut Xml, v: &Version) {
        x.leaf("launchTemplateId", &self.id).leaf("launchTemplateName", &self.name).num("versionNumber", v.number);
        if let Some(d) = &v.description {
            x.leaf("versionDescription", d);
        }
        x.time("createTime", v.created)
            .leaf("createdBy", &v.created_by)
            .leaf("defaultVersion", if v.number == self.default_version { "true" } else { "false" })
            .open("launchTemplateData");
        v.data.write(x);
        x.close("launchTemplateData");
    }

    /// The template in GET /_sim/state: every version with its data as given, and the fields
    /// capblock reads named.
    pub fn to_json(&self) -> Value {
        let rfc3339 = |t: DateTime<Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let versions: Vec<Value> = self
            .versions
            .iter()
            .map(|v| {
                json!({
                    "version_number": v.number,
                    "version_description": v.description,
                    "created": rfc3339(v.created),
                    "created_by": v.created_by,
                    "default": v.number == self.default_version,
                    "instance_type": v.data.get(INSTANCE_TYPE),
                    "image_id": v.data.get(IMAGE_ID),
                    "market_type": v.data.get(MARKET_TYPE),
                    "capacity_reservation_preference": v.data.get(CR_PREFERENCE),
                    "capacity_reservation_id": v.data.get(CR_ID),
                    "capacity_reservation_resource_group_arn": v.data.get(CR_GROUP_ARN),
                    "data": v.data.to_json(),
                })
            })
            .collect();
        let tags: BTreeMap<&str, &str> = self.tags.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        json!({
            "launch_template_id": self.id,
            "launch_template_name": self.name,
            "region": self.region,
            "created": rfc3339(self.created),
            "created_by": self.created_by,
            "default_version_number": self.default_version,
            "latest_version_number": self.latest_version(),
            "tags": tags,
            "versions": versions,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(pairs: &[(&str, &str)]) -> Data {
        let pairs: Vec<(String, String)> =
            pairs.iter().map(|(k, v)| (format!("LaunchTemplateData.{k}"), v.to_string())).collect();
        Data::from_request(&pairs)
    }

    fn xml(d: &Data) -> String {
        let mut x = Xml::new();
        d.write(&mut x);
        x.into_string()
    }

    #[test]
    fn the_capacity_fields_answer_in_ec2s_elements() {
        let d = data(&[
            ("InstanceType", "p5.48xlarge"),
            ("InstanceMarketOptions.MarketType", "capacity-block"),
            (CR_GROUP_ARN, "arn:aws:resource-groups:us-east-1:111122223333:group/g"),
            (CR_PREFERENCE, "capacity-reservations-only"),
        ]);
        assert_eq!(
            xml(&d),
            "<instanceType>p5.48xlarge</instanceType>\
             <instanceMarketOptions><marketType>capacity-block</marketType></instanceMarketOptions>\
             <capacityReservationSpecification><capacityReservationTarget>\
             <capacityReservationResourceGroupArn>arn:aws:resource-groups:us-east-1:111122223333:group/g\
             </capacityReservationResourceGroupArn></capacityReservationTarget>\
             <capacityReservationPreference>capacity-reservations-only</capacityReservationPreference>\
             </capacityReservationSpecification>"
        );
        assert_eq!(d.get(MARKET_TYPE), Some("capacity-block"));
        assert_eq!(d.get(CR_ID), None);
    }

    #[test]
    fn lists_and_their_exceptions_and_anything_else_verbatim() {
        let d = data(&[
            ("SecurityGroupId.2", "sg-2"),
            ("SecurityGroupId.1", "sg-1 & <x>"),
            ("BlockDeviceMapping.1.DeviceName", "/dev/xvda"),
            ("BlockDeviceMapping.1.Ebs.VolumeSize", "100"),
            ("NetworkInterface.1.DeviceIndex", "0"),
            ("NetworkInterface.1.SecurityGroupId.1", "sg-3"),
            ("LicenseSpecification.1.LicenseConfigurationArn", "arn:l"),
            ("SecondaryInterface.1.PrivateIpAddress.1.PrivateIpAddress", "10.0.0.1"),
            ("Monitoring.Enabled", "true"),
        ]);
        assert_eq!(
            xml(&d),
            "<securityGroupIdSet><item>sg-1 &amp; &lt;x&gt;</item><item>sg-2</item></securityGroupIdSet>\
             <blockDeviceMappingSet><item><deviceName>/dev/xvda</deviceName><ebs><volumeSize>100</volumeSize></ebs>\
             </item></blockDeviceMappingSet>\
             <networkInterfaceSet><item><deviceIndex>0</deviceIndex><groupSet><groupId>sg-3</groupId></groupSet>\
             </item></networkInterfaceSet>\
             <licenseSet><item><licenseConfigurationArn>arn:l</licenseConfigurationArn></item></licenseSet>\
             <secondaryInterfaceSet><item><privateIpAddressesSet><item><privateIpAddress>10.0.0.1</privateIpAddress>\
             </item></privateIpAddressesSet></item></secondaryInterfaceSet>\
             <monitoring><enabled>true</enabled></monitoring>"
        );
    }

    #[test]
    fn a_source_versions_parameters_are_inherited_whole_unless_given() {
        let source = data(&[
            ("InstanceType", "p5.48xlarge"),
            (MARKET_TYPE, "capacity-block"),
            (CR_GROUP_ARN, "arn:group"),
            ("SecurityGroupId.1", "sg-1"),
            ("SecurityGroupId.2", "sg-2"),
        ]);
        let new = data(&[(CR_ID, "cr-1"), ("SecurityGroupId.1", "sg-9"), ("ImageId", "ami-1")]);
        let v = source.overlaid_with(&new);
        assert_eq!(v.get(INSTANCE_TYPE), Some("p5.48xlarge"));
        assert_eq!(v.get(MARKET_TYPE), Some("capacity-block"));
        // CapacityReservationSpecification and SecurityGroupId are replaced whole.
        assert_eq!((v.get(CR_ID), v.get(CR_GROUP_ARN)), (Some("cr-1"), None));
        assert_eq!((v.get("SecurityGroupId.1"), v.get("SecurityGroupId.2")), (Some("sg-9"), None));
        assert_eq!(v.get(IMAGE_ID), Some("ami-1"));
    }

    #[test]
    fn repeated_and_malformed_keys() {
        let d = data(&[("InstanceType", "a"), ("ImageId", "ami-1"), ("InstanceType", "b"), ("Bad..Key", "x")]);
        assert_eq!(xml(&d), "<instanceType>b</instanceType><imageId>ami-1</imageId>");
        // Other keys of the request are not data.
        let other = Data::from_request(&[("LaunchTemplateName".into(), "n".into())]);
        assert!(other.is_empty());
    }
}
