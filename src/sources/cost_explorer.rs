//! AWS Cost Explorer's `GetCostAndUsage`: daily UnblendedCost, AmortizedCost and
//! NetAmortizedCost per SERVICE and LINKED_ACCOUNT, page by page (`NextPageToken`), amounts
//! parsed from Cost Explorer's decimal strings straight into nano-dollars.
//!
//! Every request costs the customer money (AWS charges per paginated request), so callers
//! ask only for the days they need and this module counts the requests it made.

use std::collections::BTreeMap;
use std::time::Duration;

pub use aws_sdk_costexplorer::types::SupportedSavingsPlansType as SavingsPlansType;
use aws_sdk_costexplorer::types::{
    DateInterval, DimensionValuesWithAttributes, Granularity, Group, GroupDefinition, GroupDefinitionType,
    LookbackPeriodInDays, MetricValue, PaymentOption, ResultByTime, SavingsPlansDetails,
    SavingsPlansPurchaseRecommendation, SavingsPlansPurchaseRecommendationDetail,
    SavingsPlansPurchaseRecommendationSummary, SupportedSavingsPlansType, TermInYears,
};
use chrono::NaiveDate;

use crate::money::nanos_from_decimal;
use crate::store::{CeCost, CeDay};

/// The metrics asked for, in the order [`CeCost`] keeps them.
pub const METRICS: [&str; 3] = ["UnblendedCost", "AmortizedCost", "NetAmortizedCost"];

/// How to reach Cost Explorer.
#[derive(Debug, Clone)]
pub struct CeOptions {
    /// A Cost Explorer-compatible endpoint (moto); the AWS endpoint when `None`.
    pub endpoint_url: Option<String>,
    /// Longest wait for a connection or a response.
    pub timeout: Duration,
}

impl Default for CeOptions {
    fn default() -> CeOptions {
        CeOptions { endpoint_url: None, timeout: Duration::from_secs(30) }
    }
}

/// What went wrong, with the request or the answer named.
#[derive(Debug, thiserror::Error)]
pub enum CeError {
    #[error("Cost Explorer request {request} (days {from} to {to}, end excluded) failed: {message}")]
    Request { request: u32, from: NaiveDate, to: NaiveDate, message: String },
    #[error("Cost Explorer's answer to request {request}: {message}")]
    Invalid { request: u32, message: String },
}

/// What Cost Explorer answered for a range of days.
#[derive(Debug, Clone, Default)]
pub struct Answer {
    /// Every day answered (also a day without cost), with its estimated flag; `fetched_at`
    /// is left to the caller.
    pub days: Vec<CeDay>,
    pub costs: Vec<CeCost>,
    /// Linked account id → name, where Cost Explorer named it.
    pub accounts: BTreeMap<String, String>,
    /// Requests made (pages).
    pub requests: u32,
}

/// A Cost Explorer client.
pub struct CostExplorer {
    pub(super) client: aws_sdk_costexplorer::Client,
}

/// UTC epoch seconds of a day's midnight.
pub fn day_start(day: NaiveDate) -> i64 {
    day.and_hms_opt(0, 0, 0).expect("midnight exists").and_utc().timestamp()
}

/// The day starting at `epoch` (UTC).
pub fn day_of(epoch: i64) -> NaiveDate {
    chrono::DateTime::from_timestamp(epoch, 0).expect("a stored day is a valid time").date_naive()
}

impl CostExplorer {
    /// A client with credentials from the default chain (environment, profile, IRSA on EKS).
    pub async fn connect(options: &CeOptions) -> CostExplorer {
        let shared = super::aws_config(3, Duration::from_millis(500), options.timeout).await;
        let mut builder = aws_sdk_costexplorer::config::Builder::from(&shared);
        if let Some(endpoint) = &options.endpoint_url {
            builder = builder.endpoint_url(endpoint);
        }
        // Cost Explorer answers in us-east-1 whatever the account's regions.
        if shared.region().is_none() {
            builder = builder.region(aws_sdk_costexplorer::config::Region::new("us-east-1"));
        }
        CostExplorer { client: aws_sdk_costexplorer::Client::from_conf(builder.build()) }
    }

    /// The daily cost of `[from, to)` per service and linked account, every page read;
    /// `on_page` is told each request as it completes.
    pub async fn daily_costs(
        &self,
        from: NaiveDate,
        to: NaiveDate,
        on_page: &mut (dyn FnMut(u32) + Send),
    ) -> Result<Answer, CeError> {
        let interval = DateInterval::builder()
            .start(from.format("%Y-%m-%d").to_string())
            .end(to.format("%Y-%m-%d").to_string())
            .build()
            .expect("start and end are set");
        let group =
            |key: &str| GroupDefinition::builder().r#type(GroupDefinitionType::Dimension).key(key).build();
        let mut pages = Pages::new(from, to);
        let mut token: Option<String> = None;
        loop {
            let request = pages.requests + 1;
            let mut call = self
                .client
                .get_cost_and_usage()
                .time_period(interval.clone())
                .granularity(Granularity::Daily)
                .group_by(group("SERVICE"))
                .group_by(group("LINKED_ACCOUNT"))
                .set_next_page_token(token.take());
            for metric in METRICS {
                call = call.metrics(metric);
            }
            let page = call.send().await.map_err(|error| CeError::Request {
                request,
                from,
                to,
                message: aws_sdk_costexplorer::error::DisplayErrorContext(&error).to_string(),
            })?;
            on_page(request);
            pages.add(page.results_by_time(), page.dimension_value_attributes())?;
            match page.next_page_token() {
                Some(next) if !next.is_empty() => token = Some(next.to_string()),
                _ => break,
            }
        }
        Ok(pages.finish())
    }

    /// AWS's recommendation of one-year, No Upfront Savings Plans of `kind` (the Compute
    /// plan, or EC2 Instance plans per family and region) for the payer account over the last
    /// `lookback_days` (7, 30 or 60): one request.
    pub async fn savings_plans_recommendation(
        &self,
        kind: SupportedSavingsPlansType,
        lookback_days: u32,
    ) -> Result<PlanRecommendation, CeError> {
        let lookback = lookback_period(lookback_days);
        let today = chrono::Utc::now().date_naive();
        let answer = self
            .client
            .get_savings_plans_purchase_recommendation()
            .savings_plans_type(kind)
            .term_in_years(TermInYears::OneYear)
            .payment_option(PaymentOption::NoUpfront)
            .lookback_period_in_days(lookback)
            .send()
            .await
            .map_err(|error| CeError::Request {
                request: 1,
                from: today,
                to: today,
                message: aws_sdk_costexplorer::error::DisplayErrorContext(&error).to_string(),
            })?;
        let generated = answer.metadata().and_then(|m| m.generation_timestamp()).unwrap_or_default();
        match answer.savings_plans_purchase_recommendation() {
            Some(found) => plan_recommendation(found, generated, "Cost Explorer's recommendation"),
            None => Err(CeError::Invalid {
                request: 1,
                message: "GetSavingsPlansPurchaseRecommendation answered without a recommendation".into(),
            }),
        }
    }
}

/// AWS's Savings Plan recommendation (`GetSavingsPlansPurchaseRecommendation`, of the
/// Compute plan or of EC2 Instance plans): its terms and figures, rates as fractions (AWS
/// writes percentages).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PlanRecommendation {
    /// `COMPUTE_SP` or `EC2_INSTANCE_SP`, `ONE_YEAR`, `NO_UPFRONT` as AWS names them.
    pub savings_plans_type: String,
    pub term: String,
    pub payment_option: String,
    pub lookback_days: u32,
    /// Σ of the details' hourly commitments (0 when AWS recommends nothing).
    pub hourly_commitment: f64,
    /// Weighted by the details' commitments.
    pub estimated_average_utilization: Option<f64>,
    pub estimated_monthly_savings: Option<f64>,
    pub estimated_savings_percentage: Option<f64>,
    pub current_average_hourly_on_demand_spend: Option<f64>,
    pub generated_at: String,
    /// Each plan recommended (one for the Compute plan, one per family and region for EC2
    /// Instance plans).
    pub plans: Vec<RecommendedPlan>,
}

/// One plan of a recommendation (`SavingsPlansPurchaseRecommendationDetails`): an EC2
/// Instance plan's family and region (empty for the Compute plan), its commitment, and AWS's
/// estimates over the lookback, in dollars.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RecommendedPlan {
    pub instance_family: String,
    pub region: String,
    pub hourly_commitment: f64,
    pub estimated_average_utilization: Option<f64>,
    pub estimated_monthly_savings: Option<f64>,
    /// The plan's cost, the On-Demand cost it would leave, and the On-Demand cost without it.
    pub estimated_sp_cost: Option<f64>,
    pub estimated_on_demand_cost: Option<f64>,
    pub estimated_on_demand_cost_with_current_commitment: Option<f64>,
}

impl PlanRecommendation {
    /// The recommendation's plans of one EC2 instance family in one region (every region's
    /// when `region` is empty; none when AWS recommends none), their commitments and
    /// estimates summed.
    pub fn of_family(&self, family: &str, region: &str) -> PlanRecommendation {
        let plans: Vec<RecommendedPlan> = self
            .plans
            .iter()
            .filter(|p| p.instance_family == family && (region.is_empty() || p.region == region))
            .cloned()
            .collect();
        let hourly: f64 = plans.iter().map(|p| p.hourly_commitment).sum::<f64>() + 0.0;
        let sum = |f: &dyn Fn(&RecommendedPlan) -> Option<f64>| {
            plans.iter().map(f).try_fold(0.0, |t, v| v.map(|v| t + v))
        };
        let used = sum(&|p| p.estimated_average_utilization.map(|u| u * p.hourly_commitment));
        PlanRecommendation {
            hourly_commitment: hourly,
            estimated_average_utilization: used.filter(|_| hourly > 0.0).map(|u| u / hourly),
            estimated_monthly_savings: sum(&|p| p.estimated_monthly_savings),
            estimated_savings_percentage: None,
            current_average_hourly_on_demand_spend: None,
            plans,
            ..self.clone()
        }
    }

    /// The discount AWS's estimate implies: 1 − the commitment its plans would use (each
    /// one's cost × its utilization) ÷ the On-Demand cost they would cover (the On-Demand cost
    /// without them less what they leave). AWS writes the utilization to 0.01 %, so the
    /// discount is as close; none when a plan lacks a figure or nothing would be covered.
    pub fn discount(&self) -> Option<f64> {
        let (mut used, mut covered) = (0.0, 0.0);
        for p in &self.plans {
            used += p.estimated_sp_cost? * p.estimated_average_utilization?;
            covered += p.estimated_on_demand_cost_with_current_commitment? - p.estimated_on_demand_cost?;
        }
        (covered > 0.0 && used > 0.0).then(|| 1.0 - used / covered)
    }
}

/// The recommendation of an answer, its numbers parsed (`what` names the answer in errors).
fn plan_recommendation(
    recommendation: &SavingsPlansPurchaseRecommendation,
    generated_at: &str,
    what: &str,
) -> Result<PlanRecommendation, CeError> {
    let number = |field: &str, text: Option<&str>| number(what, field, text);
    let details = recommendation.savings_plans_purchase_recommendation_details();
    let (mut hourly, mut weighted_use, mut monthly) = (0.0, 0.0, None::<f64>);
    let mut plans = Vec::new();
    for detail in details {
        let commitment =
            number("HourlyCommitmentToPurchase", detail.hourly_commitment_to_purchase())?.unwrap_or(0.0);
        hourly += commitment;
        let utilization = number("EstimatedAverageUtilization", detail.estimated_average_utilization())?
            .map(|percent| percent / 100.0);
        if let Some(utilization) = utilization {
            weighted_use += commitment * utilization;
        }
        let saved = number("EstimatedMonthlySavingsAmount", detail.estimated_monthly_savings_amount())?;
        if let Some(saved) = saved {
            monthly = Some(monthly.unwrap_or(0.0) + saved);
        }
        let plan = detail.savings_plans_details();
        plans.push(RecommendedPlan {
            instance_family: plan.and_then(|p| p.instance_family()).unwrap_or_default().to_string(),
            region: plan.and_then(|p| p.region()).unwrap_or_default().to_string(),
            hourly_commitment: commitment,
            estimated_average_utilization: utilization,
            estimated_monthly_savings: saved,
            estimated_sp_cost: number("EstimatedSPCost", detail.estimated_sp_cost())?,
            estimated_on_demand_cost: number("EstimatedOnDemandCost", detail.estimated_on_demand_cost())?,
            estimated_on_demand_cost_with_current_commitment: number(
                "EstimatedOnDemandCostWithCurrentCommitment",
                detail.estimated_on_demand_cost_with_current_commitment(),
            )?,
        });
    }
    let summary = recommendation.savings_plans_purchase_recommendation_summary();
    let lookback = recommendation.lookback_period_in_days().map(|l| l.as_str()).unwrap_or_default();
    Ok(PlanRecommendation {
        savings_plans_type: recommendation
            .savings_plans_type()
            .map(|t| t.as_str().to_string())
            .unwrap_or_default(),
        term: recommendation.term_in_years().map(|t| t.as_str().to_string()).unwrap_or_default(),
        payment_option: recommendation.payment_option().map(|t| t.as_str().to_string()).unwrap_or_default(),
        lookback_days: lookback_days(what, lookback)?,
        hourly_commitment: hourly,
        estimated_average_utilization: (hourly > 0.0).then(|| weighted_use / hourly),
        estimated_monthly_savings: monthly,
        estimated_savings_percentage: number(
            "EstimatedSavingsPercentage",
            summary.and_then(|s| s.estimated_savings_percentage()),
        )?
        .map(|p| p / 100.0),
        current_average_hourly_on_demand_spend: details
            .first()
            .map(|d| number("CurrentAverageHourlyOnDemandSpend", d.current_average_hourly_on_demand_spend()))
            .transpose()?
            .flatten(),
        generated_at: generated_at.to_string(),
        plans,
    })
}

/// A number Cost Explorer wrote as text (none when empty), `field` of `what` named when it is
/// not one.
pub(super) fn number(what: &str, field: &str, text: Option<&str>) -> Result<Option<f64>, CeError> {
    match text.map(str::trim).filter(|t| !t.is_empty()) {
        None => Ok(None),
        Some(t) => t.parse::<f64>().map(Some).map_err(|_| CeError::Invalid {
            request: 0,
            message: format!("{what}: {field} {t:?} is not a number"),
        }),
    }
}

/// The days a recommendation looked back over (`LookbackPeriodInDays`).
pub(super) fn lookback_days(what: &str, lookback: &str) -> Result<u32, CeError> {
    match lookback {
        "SEVEN_DAYS" => Ok(7),
        "THIRTY_DAYS" => Ok(30),
        "SIXTY_DAYS" => Ok(60),
        other => Err(CeError::Invalid {
            request: 0,
            message: format!(
                "{what}: LookbackPeriodInDays {other:?} is none of SEVEN_DAYS, THIRTY_DAYS, SIXTY_DAYS"
            ),
        }),
    }
}

/// Cost Explorer's lookback for `days` (7, 60, else 30).
pub(super) fn lookback_period(days: u32) -> LookbackPeriodInDays {
    match days {
        7 => LookbackPeriodInDays::SevenDays,
        60 => LookbackPeriodInDays::SixtyDays,
        _ => LookbackPeriodInDays::ThirtyDays,
    }
}

/// Reads a saved `GetSavingsPlansPurchaseRecommendation` answer (what `aws ce
/// get-savings-plans-purchase-recommendation` prints).
pub fn read_saved_recommendation(text: &str, location: &str) -> Result<PlanRecommendation, CeError> {
    let invalid =
        |message: String| CeError::Invalid { request: 0, message: format!("{location}: {message}") };
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|e| invalid(format!("not JSON: {e}")))?;
    let text_of = |v: &serde_json::Value, key: &str| v.get(key).and_then(|t| t.as_str()).map(str::to_string);
    let found = value.get("SavingsPlansPurchaseRecommendation").ok_or_else(|| {
        invalid(
            "no SavingsPlansPurchaseRecommendation: not an answer of GetSavingsPlansPurchaseRecommendation"
                .into(),
        )
    })?;
    let mut builder = SavingsPlansPurchaseRecommendation::builder()
        .set_savings_plans_type(
            text_of(found, "SavingsPlansType").map(|t| SupportedSavingsPlansType::from(t.as_str())),
        )
        .set_term_in_years(text_of(found, "TermInYears").map(|t| TermInYears::from(t.as_str())))
        .set_payment_option(text_of(found, "PaymentOption").map(|t| PaymentOption::from(t.as_str())))
        .set_lookback_period_in_days(
            text_of(found, "LookbackPeriodInDays").map(|t| LookbackPeriodInDays::from(t.as_str())),
        );
    for detail in found
        .get("SavingsPlansPurchaseRecommendationDetails")
        .and_then(|d| d.as_array())
        .into_iter()
        .flatten()
    {
        builder = builder.savings_plans_purchase_recommendation_details(
            SavingsPlansPurchaseRecommendationDetail::builder()
                .set_hourly_commitment_to_purchase(text_of(detail, "HourlyCommitmentToPurchase"))
                .set_estimated_average_utilization(text_of(detail, "EstimatedAverageUtilization"))
                .set_estimated_monthly_savings_amount(text_of(detail, "EstimatedMonthlySavingsAmount"))
                .set_current_average_hourly_on_demand_spend(text_of(
                    detail,
                    "CurrentAverageHourlyOnDemandSpend",
                ))
                .set_estimated_sp_cost(text_of(detail, "EstimatedSPCost"))
                .set_estimated_on_demand_cost(text_of(detail, "EstimatedOnDemandCost"))
                .set_estimated_on_demand_cost_with_current_commitment(text_of(
                    detail,
                    "EstimatedOnDemandCostWithCurrentCommitment",
                ))
                .set_savings_plans_details(detail.get("SavingsPlansDetails").map(|plan| {
                    SavingsPlansDetails::builder()
                        .set_region(text_of(plan, "Region"))
                        .set_instance_family(text_of(plan, "InstanceFamily"))
                        .set_offering_id(text_of(plan, "OfferingId"))
                        .build()
                }))
                .build(),
        );
    }
    if let Some(summary) = found.get("SavingsPlansPurchaseRecommendationSummary") {
        builder = builder.savings_plans_purchase_recommendation_summary(
            SavingsPlansPurchaseRecommendationSummary::builder()
                .set_estimated_savings_percentage(text_of(summary, "EstimatedSavingsPercentage"))
                .build(),
        );
    }
    let generated = value.get("Metadata").and_then(|m| text_of(m, "GenerationTimestamp")).unwrap_or_default();
    plan_recommendation(&builder.build(), &generated, location)
}

/// Reads a saved `GetCostAndUsage` answer (what `aws ce get-cost-and-usage --granularity
/// DAILY --metrics UnblendedCost AmortizedCost NetAmortizedCost --group-by
/// Type=DIMENSION,Key=SERVICE Type=DIMENSION,Key=LINKED_ACCOUNT` prints, one page or the
/// pages' `ResultsByTime` joined): the days it covers, `[first, last + 1)`, and its answer.
pub fn read_saved(text: &str, location: &str) -> Result<(NaiveDate, NaiveDate, Answer), CeError> {
    let invalid =
        |message: String| CeError::Invalid { request: 0, message: format!("{location}: {message}") };
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|e| invalid(format!("not JSON: {e}")))?;
    let text_of = |v: &serde_json::Value, key: &str| v.get(key).and_then(|t| t.as_str()).map(str::to_string);
    let mut results = Vec::new();
    for result in value
        .get("ResultsByTime")
        .and_then(|r| r.as_array())
        .ok_or_else(|| invalid("no ResultsByTime".into()))?
    {
        let period = result.get("TimePeriod").ok_or_else(|| invalid("a result without TimePeriod".into()))?;
        let interval = DateInterval::builder()
            .set_start(text_of(period, "Start"))
            .set_end(text_of(period, "End"))
            .build()
            .map_err(|e| invalid(format!("a TimePeriod: {e}")))?;
        let mut builder = ResultByTime::builder()
            .time_period(interval)
            .estimated(result.get("Estimated").and_then(|e| e.as_bool()).unwrap_or(false));
        for group in result.get("Groups").and_then(|g| g.as_array()).into_iter().flatten() {
            let mut built = Group::builder();
            for key in group.get("Keys").and_then(|k| k.as_array()).into_iter().flatten() {
                built = built.keys(key.as_str().unwrap_or_default());
            }
            for (name, metric) in group.get("Metrics").and_then(|m| m.as_object()).into_iter().flatten() {
                let value = MetricValue::builder()
                    .set_amount(text_of(metric, "Amount"))
                    .set_unit(text_of(metric, "Unit"))
                    .build();
                built = built.metrics(name, value);
            }
            builder = builder.groups(built.build());
        }
        results.push(builder.build());
    }
    let mut attributes = Vec::new();
    for value in value.get("DimensionValueAttributes").and_then(|a| a.as_array()).into_iter().flatten() {
        let mut built = DimensionValuesWithAttributes::builder().set_value(text_of(value, "Value"));
        for (key, text) in value.get("Attributes").and_then(|a| a.as_object()).into_iter().flatten() {
            built = built.attributes(key, text.as_str().unwrap_or_default());
        }
        attributes.push(built.build());
    }
    let day = |r: &ResultByTime| {
        r.time_period().and_then(|p| NaiveDate::parse_from_str(p.start(), "%Y-%m-%d").ok())
    };
    let first =
        results.iter().filter_map(day).min().ok_or_else(|| invalid("no day in ResultsByTime".into()))?;
    let last = results.iter().filter_map(day).max().unwrap_or(first);
    let to = last.succ_opt().expect("a next day exists");
    let mut pages = Pages::new(first, to);
    pages.add(&results, &attributes).map_err(|e| invalid(e.to_string()))?;
    let mut answer = pages.finish();
    answer.requests = 0;
    Ok((first, to, answer))
}

/// Pages of one range of days, read into one answer.
struct Pages {
    from: NaiveDate,
    to: NaiveDate,
    requests: u32,
    days: BTreeMap<i64, bool>,
    costs: BTreeMap<(i64, String, String), [i64; 3]>,
    accounts: BTreeMap<String, String>,
}

impl Pages {
    fn new(from: NaiveDate, to: NaiveDate) -> Pages {
        Pages {
            from,
            to,
            requests: 0,
            days: BTreeMap::new(),
            costs: BTreeMap::new(),
            accounts: BTreeMap::new(),
        }
    }

    /// Reads one page; a day split over two pages is summed, and estimated if either says so.
    fn add(
        &mut self,
        results: &[ResultByTime],
        attributes: &[DimensionValuesWithAttributes],
    ) -> Result<(), CeError> {
        self.requests += 1;
        let request = self.requests;
        let invalid = |message: String| CeError::Invalid { request, message };
        for result in results {
            let start = result
                .time_period()
                .map(|period| period.start())
                .ok_or_else(|| invalid("a result without a time period".into()))?;
            let day = NaiveDate::parse_from_str(start, "%Y-%m-%d")
                .map_err(|_| invalid(format!("a result starts on {start:?}, not a YYYY-MM-DD day")))?;
            if day < self.from || day >= self.to {
                return Err(invalid(format!("a result for {day}, outside the days asked for")));
            }
            let epoch = day_start(day);
            *self.days.entry(epoch).or_default() |= result.estimated();
            for group in result.groups() {
                let (service, account) = match group.keys() {
                    [service, account] => (service.clone(), account.clone()),
                    keys => {
                        return Err(invalid(format!(
                            "{day}: a group keyed {keys:?}, not by service and account"
                        )));
                    }
                };
                let metrics = group.metrics();
                let mut amounts = [0i64; 3];
                for (slot, metric) in amounts.iter_mut().zip(METRICS) {
                    let value = metrics.and_then(|m| m.get(metric)).ok_or_else(|| {
                        invalid(format!("{day}, {service}, account {account}: no {metric}"))
                    })?;
                    let unit = value.unit().unwrap_or("USD");
                    if unit != "USD" {
                        return Err(invalid(format!(
                            "{day}, {service}, account {account}: {metric} is in {unit}; gpuledger reads USD only"
                        )));
                    }
                    let text = value.amount().unwrap_or("");
                    *slot = nanos_from_decimal(text).ok_or_else(|| {
                        invalid(format!(
                            "{day}, {service}, account {account}: {metric} {text:?} is not an amount"
                        ))
                    })?;
                }
                let sums = self.costs.entry((epoch, service, account)).or_default();
                for (sum, amount) in sums.iter_mut().zip(amounts) {
                    *sum += amount;
                }
            }
        }
        for value in attributes {
            if let (Some(id), Some(name)) =
                (value.value(), value.attributes().and_then(|a| a.get("description")))
            {
                self.accounts.insert(id.to_string(), name.clone());
            }
        }
        Ok(())
    }

    fn finish(self) -> Answer {
        Answer {
            days: self
                .days
                .into_iter()
                .map(|(day, estimated)| CeDay { day, fetched_at: 0, estimated })
                .collect(),
            costs: self
                .costs
                .into_iter()
                .map(|((day, service, usage_account_id), [unblended, amortized, net])| CeCost {
                    day,
                    service,
                    usage_account_id,
                    unblended_nanos: unblended,
                    amortized_nanos: amortized,
                    net_amortized_nanos: net,
                })
                .collect(),
            accounts: self.accounts,
            requests: self.requests,
        }
    }
}

/// The CUR product code a Cost Explorer service name stands for, so the two can be compared
/// (Cost Explorer splits EC2 into instances and "EC2 - Other"; both are `AmazonEC2` in the
/// CUR). A name not known here is kept as it is and shows on the cross-check as a service
/// the CUR does not have.
pub fn cur_service(name: &str) -> &str {
    match name {
        "Amazon Elastic Compute Cloud - Compute" | "EC2 - Other" => "AmazonEC2",
        "Amazon Elastic Container Service for Kubernetes" | "Amazon Elastic Kubernetes Service" => {
            "AmazonEKS"
        }
        "Amazon Simple Storage Service" => "AmazonS3",
        "AWS Data Transfer" => "AWSDataTransfer",
        "AmazonCloudWatch" | "Amazon CloudWatch" => "AmazonCloudWatch",
        "Savings Plans for AWS Compute usage" => "ComputeSavingsPlans",
        "Amazon Elastic File System" => "AmazonEFS",
        "Amazon FSx" => "AmazonFSx",
        "Amazon Elastic Load Balancing" => "AWSELB",
        "Amazon Virtual Private Cloud" => "AmazonVPC",
        "Amazon EC2 Container Registry (ECR)" | "Amazon Elastic Container Registry" => "AmazonECR",
        "Amazon Relational Database Service" => "AmazonRDS",
        "Amazon DynamoDB" => "AmazonDynamoDB",
        "Amazon Route 53" => "AmazonRoute53",
        "AWS Key Management Service" => "awskms",
        "AWS Lambda" => "AWSLambda",
        "Amazon Simple Queue Service" => "AWSQueueService",
        "Amazon Simple Notification Service" => "AmazonSNS",
        "AWS Secrets Manager" => "AWSSecretsManager",
        "Amazon SageMaker" => "AmazonSageMaker",
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cost_explorer_names_map_to_cur_product_codes() {
        assert_eq!(cur_service("Amazon Elastic Compute Cloud - Compute"), "AmazonEC2");
        assert_eq!(cur_service("EC2 - Other"), "AmazonEC2");
        assert_eq!(cur_service("Tax"), "Tax");
        assert_eq!(cur_service("Some New Service"), "Some New Service");
    }

    #[test]
    fn days_are_utc_midnights() {
        let day = NaiveDate::from_ymd_opt(2026, 10, 1).unwrap();
        assert_eq!(day_start(day), 1_790_812_800);
        assert_eq!(day_of(1_790_812_800), day);
    }
}
