//! Who a pod belongs to and what kind of work it is: clients from mapping rules, workload
//! classes for spot adoption, and the platform namespaces whose cost is shared.

use std::collections::HashSet;

use regex::Regex;

use crate::store::{ClientRule, MatchKind, PodRecord, WorkloadClass};

pub use crate::domain::clients::{DEFAULT_CLIENT_LABEL, DEFAULT_PLATFORM_NAMESPACES, PLATFORM, UNASSIGNED};

/// The family a workload belongs to: a Job named by its CronJob's schedule (`-` and six or
/// more digits at the end) belongs to the CronJob; any other workload is its own family. The
/// opportunities and the Costs page's workloads are by family.
pub fn family(workload: &str) -> &str {
    match workload.rsplit_once('-') {
        Some((base, suffix))
            if !base.is_empty() && suffix.len() >= 6 && suffix.bytes().all(|b| b.is_ascii_digit()) =>
        {
            base
        }
        _ => workload,
    }
}

/// Client rules ready to match.
pub struct ClientMatcher {
    rules: Vec<(ClientRule, Option<Regex>)>,
    platform: HashSet<String>,
    /// Where pods' labels count (`*`, `CLUSTER`, `CLUSTER/NAMESPACE`).
    label_scopes: HashSet<String>,
}

impl ClientMatcher {
    /// Rules by priority, then the default: the `user_client` label's value is the client.
    /// Label rules (the default too) apply only to pods in `label_scopes` (`*`, `CLUSTER` or
    /// `CLUSTER/NAMESPACE`): elsewhere a pod's labels are its tenant's to set and name no
    /// client.
    pub fn new(
        rules: &[ClientRule],
        platform_namespaces: &[String],
        label_scopes: &[String],
    ) -> Result<ClientMatcher, String> {
        let mut sorted = rules.to_vec();
        sorted.sort_by_key(|r| r.priority);
        sorted.push(ClientRule {
            client: String::new(),
            match_kind: MatchKind::Label,
            pattern: "*".into(),
            label_key: DEFAULT_CLIENT_LABEL.into(),
            priority: i64::MAX,
        });
        let rules = sorted
            .into_iter()
            .map(|rule| {
                let regex = if rule.match_kind == MatchKind::Regex {
                    let anchored = format!("^(?:{})$", rule.pattern);
                    Some(Regex::new(&anchored).map_err(|e| format!("client rule {:?}: {e}", rule.pattern))?)
                } else {
                    None
                };
                Ok((rule, regex))
            })
            .collect::<Result<Vec<_>, String>>()?;
        Ok(ClientMatcher {
            rules,
            platform: platform_namespaces.iter().cloned().collect(),
            label_scopes: label_scopes.iter().cloned().collect(),
        })
    }

    /// Whether `pod`'s own labels may name its client.
    pub fn trusts_labels(&self, pod: &PodRecord) -> bool {
        let scopes = &self.label_scopes;
        scopes.contains("*")
            || scopes.contains(&pod.cluster)
            || scopes.contains(&format!("{}/{}", pod.cluster, pod.namespace))
    }

    pub fn is_platform(&self, namespace: &str) -> bool {
        self.platform.contains(namespace)
    }

    /// The client of a pod: `(platform)` in a platform namespace, else the first rule that
    /// matches, else `(unassigned)`.
    pub fn client(&self, pod: &PodRecord) -> String {
        if self.is_platform(&pod.namespace) {
            return PLATFORM.to_string();
        }
        for (rule, regex) in &self.rules {
            let matched = match rule.match_kind {
                MatchKind::Namespace => pod.namespace == rule.pattern,
                MatchKind::Prefix => pod.namespace.starts_with(&rule.pattern),
                MatchKind::Regex => regex.as_ref().is_some_and(|r| r.is_match(&pod.namespace)),
                MatchKind::Label if !self.trusts_labels(pod) => false,
                MatchKind::Label => {
                    let key = if rule.label_key.is_empty() { DEFAULT_CLIENT_LABEL } else { &rule.label_key };
                    match label(&pod.labels, key) {
                        Some(value) if rule.pattern == "*" || rule.pattern.is_empty() => return value,
                        Some(value) => value == rule.pattern,
                        None => false,
                    }
                }
            };
            if matched {
                return rule.client.clone();
            }
        }
        UNASSIGNED.to_string()
    }
}

impl ClientMatcher {
    /// The client a non-Kubernetes line's `user_*` tags name: label rules only (namespace
    /// rules describe pods), else `(unassigned)`.
    pub fn client_of_tags(&self, tags: &str) -> String {
        for (rule, _) in self.rules.iter().filter(|(rule, _)| rule.match_kind == MatchKind::Label) {
            let key = if rule.label_key.is_empty() { DEFAULT_CLIENT_LABEL } else { &rule.label_key };
            match label(tags, key) {
                Some(value) if rule.pattern == "*" || rule.pattern.is_empty() => return value,
                Some(value) if value == rule.pattern => return rule.client.clone(),
                _ => {}
            }
        }
        UNASSIGNED.to_string()
    }
}

/// A label's value from a pod's stored labels (a JSON object of `user_*` tags).
pub fn label(labels: &str, key: &str) -> Option<String> {
    if labels.is_empty() {
        return None;
    }
    let map: serde_json::Map<String, serde_json::Value> = serde_json::from_str(labels).ok()?;
    map.get(key).and_then(|v| v.as_str()).filter(|v| !v.is_empty()).map(str::to_string)
}

/// The class spot adoption is reported by: a `user_workload_class` label wins; platform
/// pods (DaemonSets, platform namespaces) are `platform`; workloads that served requests are
/// `inference`; Jobs are `training` (training and batch); the rest `other`.
pub fn workload_class(pod: &PodRecord, is_platform: bool, serves_requests: bool) -> WorkloadClass {
    if let Some(class) = label(&pod.labels, "user_workload_class") {
        return WorkloadClass::named(&class);
    }
    if is_platform || pod.workload_type == "DaemonSet" {
        WorkloadClass::Platform
    } else if serves_requests {
        WorkloadClass::Inference
    } else if matches!(pod.workload_type.as_str(), "Job" | "CronJob") {
        WorkloadClass::Training
    } else {
        WorkloadClass::Other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(namespace: &str, labels: &str) -> PodRecord {
        PodRecord {
            cluster: "main".into(),
            namespace: namespace.into(),
            labels: labels.into(),
            ..PodRecord::default()
        }
    }

    fn rule(client: &str, kind: &str, pattern: &str, priority: i64) -> ClientRule {
        ClientRule {
            client: client.into(),
            match_kind: kind.parse().unwrap(),
            pattern: pattern.into(),
            label_key: String::new(),
            priority,
        }
    }

    #[test]
    fn rules_by_priority_then_the_client_label() {
        let rules = [rule("acme", "prefix", "acme-", 10), rule("globex", "regex", "glob(ex)?-.*", 20)];
        let m = ClientMatcher::new(&rules, &["kube-system".to_string()], &["*".to_string()]).unwrap();
        assert_eq!(m.client(&pod("acme-llm", "")), "acme");
        assert_eq!(m.client(&pod("globex-vision", "")), "globex");
        assert_eq!(m.client(&pod("web", r#"{"user_client":"initech"}"#)), "initech");
        assert_eq!(m.client(&pod("web", r#"{"user_team":"x"}"#)), UNASSIGNED);
        assert_eq!(m.client(&pod("kube-system", r#"{"user_client":"acme"}"#)), PLATFORM);
        assert!(ClientMatcher::new(&[rule("x", "regex", "(", 1)], &[], &[]).is_err());
    }

    /// A tenant in `web` labels its pods `user_client=acme` to bill acme. Labels count only
    /// where the administrator trusts them: by default nowhere, then in one namespace.
    #[test]
    fn a_pods_own_label_names_its_client_only_where_labels_are_trusted() {
        let rules = [rule("initech", "namespace", "web", 10), rule("globex", "label", "gx", 5)];
        let platform = ["kube-system".to_string()];
        let squatter = pod("web", r#"{"user_client":"acme"}"#);
        let labelled_gx = pod("batch", r#"{"user_client":"gx"}"#);
        let nowhere = ClientMatcher::new(&rules, &platform, &[]).unwrap();
        assert_eq!(nowhere.client(&squatter), "initech", "its namespace's client, not the label's");
        assert_eq!(nowhere.client(&labelled_gx), UNASSIGNED, "a label rule needs trusted labels too");
        let batch_only = ClientMatcher::new(&rules, &platform, &["main/batch".to_string()]).unwrap();
        assert_eq!(batch_only.client(&squatter), "initech");
        assert_eq!(batch_only.client(&labelled_gx), "globex");
        assert_eq!(batch_only.client(&pod("batch", r#"{"user_client":"acme"}"#)), "acme");
        let other_cluster = ClientMatcher::new(&rules, &platform, &["edge".to_string()]).unwrap();
        assert_eq!(other_cluster.client(&pod("batch", r#"{"user_client":"acme"}"#)), UNASSIGNED);
        let whole_cluster = ClientMatcher::new(&rules, &platform, &["main".to_string()]).unwrap();
        assert_eq!(whole_cluster.client(&pod("batch", r#"{"user_client":"acme"}"#)), "acme");
    }

    #[test]
    fn classes_for_spot_adoption() {
        let job = PodRecord { workload_type: "Job".into(), ..PodRecord::default() };
        assert_eq!(workload_class(&job, false, false), WorkloadClass::Training);
        let deployment = PodRecord { workload_type: "ReplicaSet".into(), ..PodRecord::default() };
        assert_eq!(workload_class(&deployment, false, true), WorkloadClass::Inference);
        assert_eq!(workload_class(&deployment, false, false), WorkloadClass::Other);
        assert_eq!(workload_class(&deployment, true, true), WorkloadClass::Platform);
        let labelled =
            PodRecord { labels: r#"{"user_workload_class":"training"}"#.into(), ..deployment.clone() };
        assert_eq!(workload_class(&labelled, false, true), WorkloadClass::Training);
        // A label's own value is kept as it is, stored and shown by that name.
        let own = PodRecord { labels: r#"{"user_workload_class":"fine-tuning"}"#.into(), ..deployment };
        assert_eq!(workload_class(&own, false, true), WorkloadClass::Labelled("fine-tuning".into()));
        assert_eq!("fine-tuning".parse::<WorkloadClass>().unwrap().as_str(), "fine-tuning");
        assert_eq!("training".parse::<WorkloadClass>().unwrap(), WorkloadClass::Training);
        // Ordered by name, as the stored strings were.
        assert!(WorkloadClass::Inference < WorkloadClass::Labelled("j".into()));
        assert!(WorkloadClass::Training > WorkloadClass::Platform);
    }
}
