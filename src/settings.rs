//! Settings with effective dates: client terms (markup, exempt), the sharing rule of each
//! pool, the client mapping rules and the engine's settings (idle threshold, platform
//! namespaces). Each is stored as versions that take effect from a month (`YYYY-MM`, or
//! from the beginning); a period is always computed with the versions in force for it, so
//! recomputing an old month gives the same result unless a setting for that month changed.
//!
//! A version of a single setting (a client's terms, a pool's rule, the engine) holds until
//! the next version of the same setting. The mapping rules are one list; a rule added or
//! removed `--from` a month changes that month's list and every later one.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::engine::compute::ComputeOptions;
use crate::period::Period;
use crate::store::ClientRule;

/// A pool chargeback shares out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Pool {
    /// Everything the platform namespaces cost.
    Platform,
    /// The unused capacity AWS pushed down to the pods of every other namespace.
    Idle,
    /// EC2 of a cluster not allocated to pods (node-hours without pods, parent cost the
    /// split rows do not cover).
    Unallocated,
    /// Cluster cost no client's tag claims: the control plane, node root volumes.
    Shared,
}

impl Pool {
    pub const ALL: [Pool; 4] = [Pool::Platform, Pool::Idle, Pool::Unallocated, Pool::Shared];

    pub fn as_str(self) -> &'static str {
        match self {
            Pool::Platform => "platform",
            Pool::Idle => "idle",
            Pool::Unallocated => "unallocated",
            Pool::Shared => "shared",
        }
    }
}

/// How a pool is divided among the clients that take part.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum ShareRule {
    /// In proportion to each client's GPU cost (split + unused of its accelerator rows).
    #[default]
    Gpu,
    /// In proportion to each client's direct cost (pods and tagged lines).
    Total,
    /// The same part for every client.
    Even,
}

impl ShareRule {
    pub fn as_str(self) -> &'static str {
        match self {
            ShareRule::Gpu => "gpu",
            ShareRule::Total => "total",
            ShareRule::Even => "even",
        }
    }
}

/// The rule of each pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct PoolRules {
    pub platform: ShareRule,
    pub idle: ShareRule,
    pub unallocated: ShareRule,
    pub shared: ShareRule,
}

impl PoolRules {
    pub fn rule(&self, pool: Pool) -> ShareRule {
        match pool {
            Pool::Platform => self.platform,
            Pool::Idle => self.idle,
            Pool::Unallocated => self.unallocated,
            Pool::Shared => self.shared,
        }
    }

    fn set(&mut self, pool: Pool, rule: ShareRule) {
        match pool {
            Pool::Platform => self.platform = rule,
            Pool::Idle => self.idle = rule,
            Pool::Unallocated => self.unallocated = rule,
            Pool::Shared => self.shared = rule,
        }
    }

    /// `gpu` when every pool has the same rule, else `platform:gpu idle:even …`.
    pub fn describe(&self) -> String {
        let rules: Vec<ShareRule> = Pool::ALL.iter().map(|p| self.rule(*p)).collect();
        if rules.iter().all(|r| *r == rules[0]) {
            return rules[0].as_str().to_string();
        }
        Pool::ALL
            .iter()
            .map(|p| format!("{}:{}", p.as_str(), self.rule(*p).as_str()))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// What a client's charge is based on: the amortized bill (the default), or the bill net of
/// AWS's discounts (EDP, private pricing, bundled discounts), passed on in proportion to what
/// the client is charged. Credits, refunds and tax are never passed on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum ChargeBasis {
    #[default]
    Amortized,
    Net,
}

impl ChargeBasis {
    pub const ALL: [ChargeBasis; 2] = [ChargeBasis::Amortized, ChargeBasis::Net];

    pub fn as_str(self) -> &'static str {
        match self {
            ChargeBasis::Amortized => "amortized",
            ChargeBasis::Net => "net",
        }
    }
}

parse_by_name!(ChargeBasis, "charge basis");

/// A client's billing terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ClientTerms {
    /// Markup on direct + shared cost, in basis points (1,250 = 12.5 %).
    pub markup_basis_points: i64,
    /// An exempt client takes no share of any pool: its shares stay with the house.
    pub exempt: bool,
    /// Versions saved before the basis existed read as amortized.
    #[serde(default)]
    pub basis: ChargeBasis,
}

/// The engine's settings as stored (the idle threshold and the platform namespaces).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EngineSettings {
    pub idle_threshold: f64,
    pub platform_namespaces: Vec<String>,
}

impl Default for EngineSettings {
    fn default() -> Self {
        let options = ComputeOptions::default();
        EngineSettings {
            idle_threshold: options.idle_threshold,
            platform_namespaces: options.platform_namespaces,
        }
    }
}

/// Everything in force for one period; recorded with its rollups.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Settings {
    pub clients: BTreeMap<String, ClientTerms>,
    pub pools: PoolRules,
    pub rules: Vec<ClientRule>,
    pub engine: EngineSettings,
    /// Where a pod's own labels may name its client (the `user_client` label, and `label`
    /// mapping rules): `*` (everywhere), `CLUSTER`, or `CLUSTER/NAMESPACE`. Empty (the
    /// default): nowhere, so a tenant cannot bill itself to another client by labelling its
    /// pods; clients then come from namespace rules only.
    #[serde(default)]
    pub client_labels: Vec<String>,
}

impl Settings {
    pub fn terms(&self, client: &str) -> ClientTerms {
        self.clients.get(client).copied().unwrap_or_default()
    }

    pub fn compute_options(&self) -> ComputeOptions {
        ComputeOptions {
            idle_threshold: self.engine.idle_threshold,
            platform_namespaces: self.engine.platform_namespaces.clone(),
        }
    }
}

/// What a stored version sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SettingKind {
    /// A client's [`ClientTerms`]; key = the client.
    Client,
    /// A pool's [`ShareRule`]; key = the pool.
    Pool,
    /// The mapping rules, the whole list; key empty.
    Mapping,
    /// [`EngineSettings`]; key empty.
    Engine,
    /// Where pods' own labels may name their client ([`Settings::client_labels`]); key
    /// empty, value the list of scopes.
    Labels,
    /// A client's monthly [`Budget`]; key = the client. Not part of [`Settings`]: a budget
    /// changes no computed number, only whether a month is flagged.
    Budget,
    /// The cost alerts' [`crate::alerts::Thresholds`]; key empty. Not part of [`Settings`]
    /// either: thresholds change no computed number.
    Alerts,
}

/// A client's monthly budget (zero: none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Budget {
    pub monthly: crate::money::Cents,
}

impl SettingKind {
    pub fn as_str(self) -> &'static str {
        match self {
            SettingKind::Client => "client",
            SettingKind::Pool => "pool",
            SettingKind::Mapping => "mapping",
            SettingKind::Engine => "engine",
            SettingKind::Budget => "budget",
            SettingKind::Labels => "labels",
            SettingKind::Alerts => "alerts",
        }
    }
}

impl FromStr for SettingKind {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "client" => Ok(SettingKind::Client),
            "pool" => Ok(SettingKind::Pool),
            "mapping" => Ok(SettingKind::Mapping),
            "engine" => Ok(SettingKind::Engine),
            "budget" => Ok(SettingKind::Budget),
            "labels" => Ok(SettingKind::Labels),
            "alerts" => Ok(SettingKind::Alerts),
            other => Err(format!("unknown setting kind {other:?}")),
        }
    }
}

/// The month a version takes effect: a period, or the beginning (before every period).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct EffectiveFrom(Option<Period>);

impl EffectiveFrom {
    pub const BEGINNING: EffectiveFrom = EffectiveFrom(None);

    pub fn month(period: Period) -> EffectiveFrom {
        EffectiveFrom(Some(period))
    }
}

impl fmt::Display for EffectiveFrom {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(period) => write!(f, "{period}"),
            None => Ok(()),
        }
    }
}

impl FromStr for EffectiveFrom {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        if text.is_empty() {
            return Ok(EffectiveFrom::BEGINNING);
        }
        text.parse::<Period>().map(EffectiveFrom::month).map_err(|e| e.to_string())
    }
}

impl Serialize for EffectiveFrom {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.to_string())
    }
}

/// One stored version of one setting.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SettingVersion {
    pub kind: SettingKind,
    pub key: String,
    pub effective_from: EffectiveFrom,
    /// The value as JSON.
    pub value: serde_json::Value,
    /// When it was saved (UTC epoch seconds).
    pub set_at: i64,
}

/// Every stored version of every setting.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SettingsHistory {
    pub versions: Vec<SettingVersion>,
}

impl SettingsHistory {
    /// The version of (kind, key) in force at `at`: the latest that takes effect by then.
    fn version_at(&self, kind: SettingKind, key: &str, at: EffectiveFrom) -> Option<&SettingVersion> {
        self.versions
            .iter()
            .filter(|v| v.kind == kind && v.key == key && v.effective_from <= at)
            .max_by_key(|v| v.effective_from)
    }

    fn value<T: serde::de::DeserializeOwned>(version: &SettingVersion) -> Result<T, String> {
        serde_json::from_value(version.value.clone()).map_err(|e| {
            format!(
                "stored {} setting {:?} from {:?} is not readable: {e}",
                version.kind.as_str(),
                version.key,
                version.effective_from.to_string()
            )
        })
    }

    /// The settings in force for `period`.
    pub fn in_force(&self, period: Period) -> Result<Settings, String> {
        let at = EffectiveFrom::month(period);
        let mut settings = Settings::default();
        let clients: std::collections::BTreeSet<&str> =
            self.versions.iter().filter(|v| v.kind == SettingKind::Client).map(|v| v.key.as_str()).collect();
        for client in clients {
            if let Some(version) = self.version_at(SettingKind::Client, client, at) {
                settings.clients.insert(client.to_string(), Self::value(version)?);
            }
        }
        for pool in Pool::ALL {
            if let Some(version) = self.version_at(SettingKind::Pool, pool.as_str(), at) {
                settings.pools.set(pool, Self::value(version)?);
            }
        }
        if let Some(version) = self.version_at(SettingKind::Mapping, "", at) {
            settings.rules = Self::value(version)?;
        }
        if let Some(version) = self.version_at(SettingKind::Engine, "", at) {
            settings.engine = Self::value(version)?;
        }
        if let Some(version) = self.version_at(SettingKind::Labels, "", at) {
            settings.client_labels = Self::value(version)?;
        }
        Ok(settings)
    }

    /// The value of (kind, key) in force from `from`, or `default` when none is.
    fn current<T: serde::de::DeserializeOwned>(
        &self,
        kind: SettingKind,
        key: &str,
        from: EffectiveFrom,
        default: T,
    ) -> Result<T, String> {
        self.version_at(kind, key, from).map_or(Ok(default), Self::value)
    }

    /// A client's terms from `from` on, changed by `change`: the version to save.
    pub fn client_version(
        &self,
        client: &str,
        from: EffectiveFrom,
        change: impl FnOnce(&mut ClientTerms),
    ) -> Result<SettingVersion, String> {
        let mut terms: ClientTerms =
            self.current(SettingKind::Client, client, from, ClientTerms::default())?;
        change(&mut terms);
        Ok(version(SettingKind::Client, client, from, &terms))
    }

    /// Where pods' labels may name their client from `from` on (each `*`, `CLUSTER` or
    /// `CLUSTER/NAMESPACE`; none: nowhere): the version to save.
    pub fn labels_version(&self, from: EffectiveFrom, scopes: &[String]) -> Result<SettingVersion, String> {
        for scope in scopes {
            let parts: Vec<&str> = scope.split('/').collect();
            if scope.is_empty()
                || parts.len() > 2
                || parts.iter().any(|p| p.is_empty())
                || (scope.contains('*') && scope != "*")
            {
                return Err(format!("{scope:?}: write *, CLUSTER or CLUSTER/NAMESPACE"));
            }
        }
        Ok(version(SettingKind::Labels, "", from, &scopes))
    }

    /// `client`'s monthly budget in force for `period`, if it has one.
    pub fn budget(&self, client: &str, period: Period) -> Result<Option<crate::money::Cents>, String> {
        let version = self.version_at(SettingKind::Budget, client, EffectiveFrom::month(period));
        let budget: Option<Budget> = version.map(Self::value).transpose()?;
        Ok(budget.map(|b| b.monthly).filter(|m| m.0 > 0))
    }

    /// `client`'s monthly budget from `from` on (zero removes it): the version to save.
    pub fn budget_version(
        &self,
        client: &str,
        from: EffectiveFrom,
        monthly: crate::money::Cents,
    ) -> SettingVersion {
        version(SettingKind::Budget, client, from, &Budget { monthly })
    }

    /// The alert thresholds in force for `period` (the defaults until some are set).
    pub fn alert_thresholds(&self, period: Period) -> Result<crate::alerts::Thresholds, String> {
        self.current(
            SettingKind::Alerts,
            "",
            EffectiveFrom::month(period),
            crate::alerts::Thresholds::default(),
        )
    }

    /// The alert thresholds from `from` on, changed by `change`: the version to save.
    pub fn alert_thresholds_version(
        &self,
        from: EffectiveFrom,
        change: impl FnOnce(&mut crate::alerts::Thresholds),
    ) -> Result<SettingVersion, String> {
        let mut thresholds =
            self.current(SettingKind::Alerts, "", from, crate::alerts::Thresholds::default())?;
        change(&mut thresholds);
        Ok(version(SettingKind::Alerts, "", from, &thresholds))
    }

    /// A pool's rule from `from` on: the version to save.
    pub fn pool_version(&self, pool: Pool, rule: ShareRule, from: EffectiveFrom) -> SettingVersion {
        version(SettingKind::Pool, pool.as_str(), from, &rule)
    }

    /// The engine's settings from `from` on, changed by `change`: the version to save.
    pub fn engine_version(
        &self,
        from: EffectiveFrom,
        change: impl FnOnce(&mut EngineSettings),
    ) -> Result<SettingVersion, String> {
        let mut engine: EngineSettings =
            self.current(SettingKind::Engine, "", from, EngineSettings::default())?;
        change(&mut engine);
        Ok(version(SettingKind::Engine, "", from, &engine))
    }

    /// The mapping lists to save when `change` applies from `from` on: the list in force at
    /// `from` (a new version there) and every later version, each changed.
    pub fn mapping_versions(
        &self,
        from: EffectiveFrom,
        change: impl Fn(&mut Vec<ClientRule>),
    ) -> Result<Vec<SettingVersion>, String> {
        let mut out = Vec::new();
        let mut at_from: Vec<ClientRule> = self.current(SettingKind::Mapping, "", from, Vec::new())?;
        change(&mut at_from);
        out.push(version(SettingKind::Mapping, "", from, &at_from));
        for later in
            self.versions.iter().filter(|v| v.kind == SettingKind::Mapping && v.effective_from > from)
        {
            let mut rules: Vec<ClientRule> = Self::value(later)?;
            change(&mut rules);
            out.push(version(SettingKind::Mapping, "", later.effective_from, &rules));
        }
        Ok(out)
    }
}

fn version(kind: SettingKind, key: &str, from: EffectiveFrom, value: &impl Serialize) -> SettingVersion {
    SettingVersion {
        kind,
        key: key.to_string(),
        effective_from: from,
        value: serde_json::to_value(value).unwrap_or_default(),
        set_at: chrono::Utc::now().timestamp(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn month(text: &str) -> Period {
        text.parse().unwrap()
    }

    #[test]
    fn a_period_takes_the_latest_version_that_covers_it() {
        let mut history = SettingsHistory::default();
        let base =
            history.client_version("acme", EffectiveFrom::BEGINNING, |t| t.markup_basis_points = 1_000);
        history.versions.push(base.unwrap());
        let raise =
            history.client_version("acme", EffectiveFrom::month(month("2026-09")), |t| t.exempt = true);
        history.versions.push(raise.unwrap());
        let terms = |p: &str| history.in_force(month(p)).unwrap().terms("acme");
        assert_eq!(
            terms("2026-08"),
            ClientTerms { markup_basis_points: 1_000, exempt: false, basis: ChargeBasis::Amortized }
        );
        // The September version started from what was in force then: the markup stays.
        assert_eq!(
            terms("2026-09"),
            ClientTerms { markup_basis_points: 1_000, exempt: true, basis: ChargeBasis::Amortized }
        );
        assert_eq!(
            terms("2027-01"),
            ClientTerms { markup_basis_points: 1_000, exempt: true, basis: ChargeBasis::Amortized }
        );
        assert_eq!(history.in_force(month("2026-09")).unwrap().terms("globex"), ClientTerms::default());
    }

    #[test]
    fn a_rule_added_from_a_month_reaches_every_later_list() {
        let rule = |client: &str| ClientRule {
            client: client.into(),
            match_kind: crate::store::MatchKind::Namespace,
            pattern: client.into(),
            label_key: String::new(),
            priority: 0,
        };
        let mut history = SettingsHistory::default();
        let november = EffectiveFrom::month(month("2026-11"));
        history.versions.extend(history.mapping_versions(november, |r| r.push(rule("a"))).unwrap());
        let september = EffectiveFrom::month(month("2026-09"));
        let changes = history.mapping_versions(september, |r| r.push(rule("b"))).unwrap();
        for change in changes {
            history
                .versions
                .retain(|v| !(v.kind == change.kind && v.effective_from == change.effective_from));
            history.versions.push(change);
        }
        let clients = |p: &str| -> Vec<String> {
            history.in_force(month(p)).unwrap().rules.iter().map(|r| r.client.clone()).collect()
        };
        assert_eq!(clients("2026-08"), Vec::<String>::new());
        assert_eq!(clients("2026-09"), vec!["b"]);
        assert_eq!(clients("2026-12"), vec!["a", "b"]);
    }
}
