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

use crate::domain::clients::ClientRule;
use crate::period::Period;

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

/// How a pool is named and told, everywhere: settings, reports, pages, invoices.
struct PoolTexts {
    /// Its name in settings and on the command line.
    name: &'static str,
    /// A client's share of it: the invoice line's category (`<…>_nanos` in a client rollup).
    category: &'static str,
    /// The invoice line's description.
    invoice: &'static str,
    /// The column of reports and the client page's trend.
    column: &'static str,
    /// The client page's card.
    card: &'static str,
    /// The client page's breakdown line.
    line: &'static str,
    /// In a sentence ("the platform, idle, unallocated EC2 and shared cluster pools").
    short: &'static str,
}

impl Pool {
    pub const ALL: [Pool; 4] = [Pool::Platform, Pool::Idle, Pool::Unallocated, Pool::Shared];

    fn texts(self) -> PoolTexts {
        match self {
            Pool::Platform => PoolTexts {
                name: "platform",
                category: "shared_platform",
                invoice: "Share of the shared platform (cluster services)",
                column: "shared_platform_cost",
                card: "Shared platform cost",
                line: "Shared platform",
                short: "platform",
            },
            Pool::Idle => PoolTexts {
                name: "idle",
                category: "shared_idle",
                invoice: "Share of idle capacity (reserved, not requested)",
                column: "shared_idle_cost",
                card: "Shared idle cost",
                line: "Shared idle capacity",
                short: "idle",
            },
            Pool::Unallocated => PoolTexts {
                name: "unallocated",
                category: "shared_unallocated",
                invoice: "Share of cluster nodes without pods",
                column: "shared_unallocated_cost",
                card: "Shared unallocated EC2",
                line: "Shared EC2 not allocated to pods",
                short: "unallocated EC2",
            },
            Pool::Shared => PoolTexts {
                name: "shared",
                category: "shared_infrastructure",
                invoice: "Share of shared non-Kubernetes cost (control plane, shared storage)",
                column: "shared_infrastructure_cost",
                card: "Shared cluster cost",
                line: "Shared cluster cost (control plane, root volumes)",
                short: "shared cluster",
            },
        }
    }

    pub fn as_str(self) -> &'static str {
        self.texts().name
    }

    /// A client's share of the pool as an invoice line: its category and description.
    pub fn invoice_line(self) -> (&'static str, &'static str) {
        let texts = self.texts();
        (texts.category, texts.invoice)
    }

    /// The column a client's share of the pool is reported in.
    pub fn column(self) -> &'static str {
        self.texts().column
    }

    /// The client page's card for a client's share of the pool.
    pub fn card(self) -> &'static str {
        self.texts().card
    }

    /// The client page's breakdown line for a client's share of the pool.
    pub fn line(self) -> &'static str {
        self.texts().line
    }

    /// Every pool in a sentence: "the platform, idle, unallocated EC2 and shared cluster pools".
    pub fn all_in_words() -> String {
        let names: Vec<&str> = Pool::ALL.iter().map(|p| p.texts().short).collect();
        let (last, rest) = names.split_last().expect("there are pools");
        format!("the {} and {last} pools", rest.join(", "))
    }
}

/// One value per pool, by name: a new pool does not compile until every use has its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct PerPool<T> {
    pub platform: T,
    pub idle: T,
    pub unallocated: T,
    pub shared: T,
}

impl<T> std::ops::Index<Pool> for PerPool<T> {
    type Output = T;

    fn index(&self, pool: Pool) -> &T {
        match pool {
            Pool::Platform => &self.platform,
            Pool::Idle => &self.idle,
            Pool::Unallocated => &self.unallocated,
            Pool::Shared => &self.shared,
        }
    }
}

impl<T> std::ops::IndexMut<Pool> for PerPool<T> {
    fn index_mut(&mut self, pool: Pool) -> &mut T {
        match pool {
            Pool::Platform => &mut self.platform,
            Pool::Idle => &mut self.idle,
            Pool::Unallocated => &mut self.unallocated,
            Pool::Shared => &mut self.shared,
        }
    }
}

impl<T: Copy> PerPool<T> {
    /// Each pool with its value, in [`Pool::ALL`] order.
    pub fn iter(self) -> impl Iterator<Item = (Pool, T)> {
        Pool::ALL.into_iter().map(move |pool| (pool, self[pool]))
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
    pub const ALL: [ShareRule; 3] = [ShareRule::Gpu, ShareRule::Total, ShareRule::Even];

    pub fn as_str(self) -> &'static str {
        match self {
            ShareRule::Gpu => "gpu",
            ShareRule::Total => "total",
            ShareRule::Even => "even",
        }
    }

    /// What a client under the rule takes, in a sentence with the pools named.
    fn sentence(self, pools: &str) -> String {
        match self {
            ShareRule::Gpu => format!("shares {pools} in proportion to its GPU cost"),
            ShareRule::Total => format!("shares {pools} in proportion to its direct cost"),
            ShareRule::Even => format!("takes an even share of {pools}"),
        }
    }
}

parse_by_name!(ShareRule, "share rule");

/// A client's share policy as a chargeback row records it (`exempt`, one rule for every
/// pool, or `platform:gpu idle:even …`), in a sentence for a page.
pub fn policy_text(policy: &str) -> String {
    let pools = Pool::all_in_words();
    match policy.parse::<ShareRule>() {
        _ if policy == EXEMPT => {
            format!("is exempt: it takes no share of {pools} (the house keeps its shares)")
        }
        Ok(rule) => rule.sentence(&pools),
        Err(_) => format!("shares each pool by the pool's rule ({policy})"),
    }
}

/// The share policy of a client that takes no share of any pool.
pub const EXEMPT: &str = "exempt";

/// The rule of each pool.
pub type PoolRules = PerPool<ShareRule>;

impl PoolRules {
    pub fn rule(&self, pool: Pool) -> ShareRule {
        self[pool]
    }

    fn set(&mut self, pool: Pool, rule: ShareRule) {
        self[pool] = rule;
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

impl ClientTerms {
    /// A markup in percent as people write it (`12.5`) in basis points (1,250), refused unless
    /// it is a number from 0 to 1,000 %.
    pub fn markup_from_percent(percent: f64) -> Result<i64, String> {
        if !(percent.is_finite() && (0.0..=1_000.0).contains(&percent)) {
            return Err(format!("the markup is a percentage from 0 to 1000, not {percent}"));
        }
        Ok((percent * 100.0).round() as i64)
    }

    /// `12.5 %`.
    pub fn markup_percent(&self) -> String {
        let points = self.markup_basis_points;
        let text = format!("{}.{:02}", points / 100, (points % 100).abs());
        format!("{} %", text.trim_end_matches('0').trim_end_matches('.'))
    }
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
    /// The cost alerts' [`crate::domain::alerts::Thresholds`]; key empty. Not part of [`Settings`]
    /// either: thresholds change no computed number.
    Alerts,
    /// How far a re-delivered bill may move without `--force` ([`IngestBounds`]); key empty.
    /// Not part of [`Settings`]: the bounds change no computed number, only which deliveries
    /// are refused.
    Ingest,
}

/// How far a re-delivery of a stored bill (a CUR period, a FOCUS bill) may move before it is
/// refused unless forced: a broken export and the same rows counted twice both look like a
/// real delivery, new execution id and all.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct IngestBounds {
    /// The largest fall of the bill's total, in percent of the stored one; 100 accepts any.
    pub max_drop_percent: u32,
    /// The largest rise of the days the stored bill already covers (all but its last, which
    /// may still be filling), in percent of what it had for them. New days are never a rise.
    pub max_rise_percent: u32,
}

impl IngestBounds {
    /// In force until the operator sets others.
    pub const DEFAULT: IngestBounds = IngestBounds { max_drop_percent: 50, max_rise_percent: 50 };
}

impl Default for IngestBounds {
    fn default() -> Self {
        IngestBounds::DEFAULT
    }
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
            SettingKind::Ingest => "ingest",
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
            "ingest" => Ok(SettingKind::Ingest),
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

    /// Every client a version names: with terms, a budget, or a mapping rule.
    pub fn client_names(&self) -> std::collections::BTreeSet<String> {
        let mut names = std::collections::BTreeSet::new();
        for version in &self.versions {
            match version.kind {
                SettingKind::Client | SettingKind::Budget => {
                    names.insert(version.key.clone());
                }
                SettingKind::Mapping => {
                    let rules: Vec<ClientRule> = Self::value(version).unwrap_or_default();
                    names.extend(rules.into_iter().map(|r| r.client));
                }
                _ => {}
            }
        }
        names
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

    /// `client`'s terms in force for `period`.
    pub fn terms_in_force(&self, client: &str, period: Period) -> Result<ClientTerms, String> {
        self.current(SettingKind::Client, client, EffectiveFrom::month(period), ClientTerms::default())
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
    pub fn alert_thresholds(&self, period: Period) -> Result<crate::domain::alerts::Thresholds, String> {
        self.current(
            SettingKind::Alerts,
            "",
            EffectiveFrom::month(period),
            crate::domain::alerts::Thresholds::default(),
        )
    }

    /// The alert thresholds from `from` on, changed by `change`: the version to save.
    pub fn alert_thresholds_version(
        &self,
        from: EffectiveFrom,
        change: impl FnOnce(&mut crate::domain::alerts::Thresholds),
    ) -> Result<SettingVersion, String> {
        let mut thresholds =
            self.current(SettingKind::Alerts, "", from, crate::domain::alerts::Thresholds::default())?;
        change(&mut thresholds);
        Ok(version(SettingKind::Alerts, "", from, &thresholds))
    }

    /// The re-delivery bounds in force for `period` ([`IngestBounds::DEFAULT`] until some are set).
    pub fn ingest_bounds(&self, period: Period) -> Result<IngestBounds, String> {
        self.current(SettingKind::Ingest, "", EffectiveFrom::month(period), IngestBounds::DEFAULT)
    }

    /// The re-delivery bounds from `from` on, changed by `change`: the version to save.
    pub fn ingest_bounds_version(
        &self,
        from: EffectiveFrom,
        change: impl FnOnce(&mut IngestBounds),
    ) -> Result<SettingVersion, String> {
        let mut bounds = self.current(SettingKind::Ingest, "", from, IngestBounds::DEFAULT)?;
        change(&mut bounds);
        if bounds.max_drop_percent > 100 {
            return Err(format!(
                "--max-drop is a percent from 0 to 100 (100 accepts any fall), not {}",
                bounds.max_drop_percent
            ));
        }
        Ok(version(SettingKind::Ingest, "", from, &bounds))
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

/// The engine's part of the settings in force for a period ([`crate::domain::settings::Settings`]).
#[derive(Debug, Clone)]
pub struct ComputeOptions {
    /// Hourly mean utilization below which allocated GPU-hours are idle.
    pub idle_threshold: f64,
    pub platform_namespaces: Vec<String>,
}

impl Default for ComputeOptions {
    fn default() -> Self {
        ComputeOptions {
            idle_threshold: 0.10,
            platform_namespaces: crate::domain::clients::DEFAULT_PLATFORM_NAMESPACES
                .iter()
                .map(|s| s.to_string())
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_share_policy_reads_as_the_sentence_the_client_page_always_showed() {
        let pools = "the platform, idle, unallocated EC2 and shared cluster pools";
        assert_eq!(Pool::all_in_words(), pools);
        assert_eq!(
            policy_text("exempt"),
            format!("is exempt: it takes no share of {pools} (the house keeps its shares)")
        );
        assert_eq!(policy_text("gpu"), format!("shares {pools} in proportion to its GPU cost"));
        assert_eq!(policy_text("total"), format!("shares {pools} in proportion to its direct cost"));
        assert_eq!(policy_text("even"), format!("takes an even share of {pools}"));
        let mixed = PoolRules { idle: ShareRule::Even, ..PoolRules::default() }.describe();
        assert_eq!(mixed, "platform:gpu idle:even unallocated:gpu shared:gpu");
        assert_eq!(policy_text(&mixed), format!("shares each pool by the pool's rule ({mixed})"));
    }

    #[test]
    fn each_pool_has_its_own_value_and_its_own_names() {
        let mut shares = PerPool::<i64>::default();
        shares[Pool::Idle] += 5;
        shares[Pool::Shared] = 7;
        assert_eq!(
            shares.iter().collect::<Vec<_>>(),
            [(Pool::Platform, 0), (Pool::Idle, 5), (Pool::Unallocated, 0), (Pool::Shared, 7)]
        );
        let columns: Vec<&str> = Pool::ALL.map(Pool::column).to_vec();
        assert_eq!(
            columns,
            [
                "shared_platform_cost",
                "shared_idle_cost",
                "shared_unallocated_cost",
                "shared_infrastructure_cost"
            ]
        );
        assert_eq!(Pool::Shared.invoice_line().0, "shared_infrastructure");
    }

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
    fn re_delivery_bounds_hold_from_their_month_and_start_from_what_was_in_force() {
        let mut history = SettingsHistory::default();
        assert_eq!(history.ingest_bounds(month("2026-01")).unwrap(), IngestBounds::DEFAULT);
        let march = EffectiveFrom::month(month("2026-03"));
        let strict = history.ingest_bounds_version(march, |b| b.max_rise_percent = 5).unwrap();
        history.versions.push(strict);
        let june = EffectiveFrom::month(month("2026-06"));
        let looser = history.ingest_bounds_version(june, |b| b.max_drop_percent = 80).unwrap();
        history.versions.push(looser);
        let bounds = |p: &str| history.ingest_bounds(month(p)).unwrap();
        assert_eq!(bounds("2026-02"), IngestBounds { max_drop_percent: 50, max_rise_percent: 50 });
        assert_eq!(bounds("2026-03"), IngestBounds { max_drop_percent: 50, max_rise_percent: 5 });
        // June's version started from March's: the rise bound stays at 5 %.
        assert_eq!(bounds("2026-07"), IngestBounds { max_drop_percent: 80, max_rise_percent: 5 });
        let refused = history.ingest_bounds_version(june, |b| b.max_drop_percent = 101);
        assert!(refused.unwrap_err().contains("from 0 to 100"));
    }

    #[test]
    fn a_rule_added_from_a_month_reaches_every_later_list() {
        let rule = |client: &str| ClientRule {
            client: client.into(),
            match_kind: crate::domain::clients::MatchKind::Namespace,
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
