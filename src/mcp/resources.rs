//! The rules a client runs under, as read-only text resources: every
//! deciding policy file and the schema.

use rmcp::model::{Resource, ResourceContents};

use crate::pdp::PolicyBundle;

pub const SCHEMA_URI: &str = "portcullis://schema";

/// One readable resource.
#[derive(Debug, Clone)]
pub struct PolicyResource {
    pub uri: String,
    pub name: String,
    pub mime_type: &'static str,
    pub text: String,
}

impl PolicyResource {
    pub fn listing(&self) -> Resource {
        Resource::new(self.uri.clone(), self.name.clone()).with_mime_type(self.mime_type)
    }

    pub fn contents(&self) -> ResourceContents {
        ResourceContents::text(self.text.clone(), self.uri.clone()).with_mime_type(self.mime_type)
    }
}

/// The policy files (`portcullis://policies/<file>`) and the schema
/// (`portcullis://schema`, every schema file in order).
pub fn policy_resources(bundle: &PolicyBundle) -> Vec<PolicyResource> {
    let mut out: Vec<PolicyResource> = bundle
        .all_policies()
        .chain([&bundle.tiers, &bundle.path_classes])
        .map(|file| {
            let name = match file.logical.strip_prefix("policies/") {
                Some(name) => name.to_owned(),
                // `builtin/portcullis-X/hard_constraints.cedar`
                None => format!(
                    "builtin/{}",
                    file.logical.rsplit('/').next().unwrap_or(&file.logical)
                ),
            };
            let mime_type = if name.ends_with(".json") {
                "application/json"
            } else if name.ends_with(".toml") {
                "application/toml"
            } else {
                "text/x-cedar"
            };
            PolicyResource {
                uri: format!("portcullis://policies/{name}"),
                name,
                mime_type,
                text: file.text.clone(),
            }
        })
        .collect();
    let schema: Vec<&str> = bundle.schemas.iter().map(|f| f.text.as_str()).collect();
    out.push(PolicyResource {
        uri: SCHEMA_URI.to_owned(),
        name: "schema".to_owned(),
        mime_type: "text/x-cedarschema",
        text: schema.join("\n"),
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_deciding_file_and_the_schema_are_listed_with_their_kind() {
        let bundle = PolicyBundle::builtin();
        let resources = policy_resources(&bundle);
        let find = |uri: &str| {
            resources
                .iter()
                .find(|r| r.uri == uri)
                .unwrap_or_else(|| panic!("no {uri}"))
        };
        assert_eq!(
            find("portcullis://policies/builtin/hard_constraints.cedar").mime_type,
            "text/x-cedar"
        );
        assert_eq!(
            find("portcullis://policies/tiers.json").mime_type,
            "application/json"
        );
        assert_eq!(
            find("portcullis://policies/path_classes.toml").mime_type,
            "application/toml"
        );
        let schema = resources.last().unwrap();
        assert_eq!(schema.uri, SCHEMA_URI);
        assert!(schema.text.contains("action read_policy"));
        // Every policy file of the set is there, by its text.
        for file in bundle.all_policies() {
            assert!(
                resources.iter().any(|r| r.text == file.text),
                "{}",
                file.logical
            );
        }
    }
}
