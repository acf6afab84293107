//! gpuledger's own client names and the rules that map namespaces (and tags) to clients.

use serde::Serialize;

/// Pods in these namespaces run the platform; their cost is shared between clients.
pub const DEFAULT_PLATFORM_NAMESPACES: &[&str] = &["kube-system", "monitoring", "gpu-operator"];

/// The client of pods no rule matched.
pub const UNASSIGNED: &str = "(unassigned)";

/// The "client" of platform pods: a pool shared out, never a client.
pub const PLATFORM: &str = "(platform)";

/// The row that keeps exempt clients' shares and pools nobody takes.
pub const HOUSE: &str = "(house)";

/// The label gpuledger reads a pod's client from when no rule says otherwise.
pub const DEFAULT_CLIENT_LABEL: &str = "user_client";

/// What a client mapping rule matches. Stored in the settings' JSON by these lowercase names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MatchKind {
    /// The namespace, exactly.
    Namespace,
    /// The namespace's beginning.
    Prefix,
    /// The whole namespace, by regular expression.
    Regex,
    /// A pod label's value (and a non-Kubernetes line's tag).
    Label,
}

impl MatchKind {
    pub fn as_str(self) -> &'static str {
        match self {
            MatchKind::Namespace => "namespace",
            MatchKind::Prefix => "prefix",
            MatchKind::Regex => "regex",
            MatchKind::Label => "label",
        }
    }
}

impl std::str::FromStr for MatchKind {
    type Err = String;

    fn from_str(text: &str) -> Result<MatchKind, String> {
        [MatchKind::Namespace, MatchKind::Prefix, MatchKind::Regex, MatchKind::Label]
            .into_iter()
            .find(|kind| kind.as_str() == text)
            .ok_or_else(|| format!("{text:?} is not a rule kind (namespace, prefix, regex, label)"))
    }
}

/// How a namespace or label maps to a client.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct ClientRule {
    pub client: String,
    pub match_kind: MatchKind,
    /// The namespace, prefix or regex; for `label`, the label value.
    pub pattern: String,
    /// For `label` rules, the resource-tag key (`user_client` by default); else empty.
    pub label_key: String,
    /// Lower numbers are tried first.
    pub priority: i64,
}
