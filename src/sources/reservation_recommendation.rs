//! AWS Cost Explorer's `GetReservationPurchaseRecommendation` for EC2: the reservations AWS
//! recommends buying (one-year, No Upfront, Standard), per instance type and region, asked
//! through the SDK (every page) or read from a saved answer (what `aws ce
//! get-reservation-purchase-recommendation` prints). Both are read by one function, so the
//! two give the same figures.

use aws_sdk_costexplorer::types::{
    AccountScope, Ec2InstanceDetails, Ec2Specification, InstanceDetails, OfferingClass, PaymentOption,
    ReservationPurchaseRecommendation, ReservationPurchaseRecommendationDetail, ServiceSpecification,
    TermInYears,
};
use serde_json::Value;

use super::cost_explorer::{CeError, CostExplorer, lookback_days, lookback_period, number};

/// Cost Explorer's name of the service whose reservations are recommended.
pub const EC2_SERVICE: &str = "Amazon Elastic Compute Cloud - Compute";

/// Hours in a month as AWS's monthly figures count them.
const MONTH_HOURS: f64 = 730.0;

/// AWS's recommendation of EC2 reservations.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ReservationRecommendation {
    /// `ONE_YEAR`, `NO_UPFRONT` as AWS names them.
    pub term: String,
    pub payment_option: String,
    pub lookback_days: u32,
    pub generated_at: String,
    /// One per instance type and region AWS recommends reserving.
    pub details: Vec<RecommendedReservation>,
}

/// The reservations AWS recommends of one instance type in one region.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RecommendedReservation {
    pub account_id: String,
    pub instance_type: String,
    pub region: String,
    /// `RecommendedNumberOfInstancesToPurchase`.
    pub count: f64,
    /// What the recommended reservations cost an hour: their recurring monthly cost ÷ 730
    /// plus their upfront cost spread over the term's hours.
    pub hourly_commitment: f64,
    /// Fractions where AWS writes percentages.
    pub average_utilization: Option<f64>,
    pub monthly_savings: Option<f64>,
    pub monthly_savings_percentage: Option<f64>,
    pub monthly_on_demand_cost: Option<f64>,
    pub average_instances_per_hour: Option<f64>,
    pub break_even_months: Option<f64>,
}

impl RecommendedReservation {
    /// One reservation's cost an hour.
    pub fn instance_rate(&self) -> Option<f64> {
        (self.count > 0.0).then(|| self.hourly_commitment / self.count)
    }
}

impl CostExplorer {
    /// AWS's recommendation of one-year, No Upfront, Standard EC2 reservations for the payer
    /// account over the last `lookback_days` (7, 30 or 60), every page read.
    pub async fn reservation_recommendation(
        &self,
        lookback_days: u32,
    ) -> Result<ReservationRecommendation, CeError> {
        let today = chrono::Utc::now().date_naive();
        let specification = ServiceSpecification::builder()
            .ec2_specification(Ec2Specification::builder().offering_class(OfferingClass::Standard).build())
            .build();
        let (mut found, mut generated, mut token, mut request) = (Vec::new(), String::new(), None, 0);
        loop {
            request += 1;
            let answer = self
                .client
                .get_reservation_purchase_recommendation()
                .service(EC2_SERVICE)
                .account_scope(AccountScope::Payer)
                .term_in_years(TermInYears::OneYear)
                .payment_option(PaymentOption::NoUpfront)
                .lookback_period_in_days(lookback_period(lookback_days))
                .service_specification(specification.clone())
                .set_next_page_token(token.take())
                .send()
                .await
                .map_err(|error| CeError::Request {
                    request,
                    from: today,
                    to: today,
                    message: aws_sdk_costexplorer::error::DisplayErrorContext(&error).to_string(),
                })?;
            if let Some(at) = answer.metadata().and_then(|m| m.generation_timestamp()) {
                generated = at.to_string();
            }
            found.extend(answer.recommendations().iter().cloned());
            match answer.next_page_token() {
                Some(next) if !next.is_empty() => token = Some(next.to_string()),
                _ => break,
            }
        }
        reservation_recommendation(&found, &generated, "Cost Explorer's recommendation")
    }
}

/// The recommendations of an answer, their numbers parsed (`what` names the answer in
/// errors). An answer with no recommendation recommends no reservation.
fn reservation_recommendation(
    recommendations: &[ReservationPurchaseRecommendation],
    generated_at: &str,
    what: &str,
) -> Result<ReservationRecommendation, CeError> {
    let number = |field: &str, text: Option<&str>| number(what, field, text);
    let mut answer =
        ReservationRecommendation { generated_at: generated_at.to_string(), ..Default::default() };
    for recommendation in recommendations {
        answer.term = recommendation.term_in_years().map(|t| t.as_str().to_string()).unwrap_or_default();
        answer.payment_option =
            recommendation.payment_option().map(|t| t.as_str().to_string()).unwrap_or_default();
        let lookback = recommendation.lookback_period_in_days().map(|l| l.as_str()).unwrap_or_default();
        answer.lookback_days = lookback_days(what, lookback)?;
        let term_hours = if answer.term == "THREE_YEARS" { 3.0 } else { 1.0 } * 12.0 * MONTH_HOURS;
        for detail in recommendation.recommendation_details() {
            let Some(ec2) = detail.instance_details().and_then(|d| d.ec2_instance_details()) else {
                continue;
            };
            let count = number(
                "RecommendedNumberOfInstancesToPurchase",
                detail.recommended_number_of_instances_to_purchase(),
            )?
            .unwrap_or(0.0);
            let recurring = number("RecurringStandardMonthlyCost", detail.recurring_standard_monthly_cost())?;
            let upfront = number("UpfrontCost", detail.upfront_cost())?.unwrap_or(0.0);
            let percent =
                |field: &str, text: Option<&str>| Ok::<_, CeError>(number(field, text)?.map(|p| p / 100.0));
            answer.details.push(RecommendedReservation {
                account_id: detail.account_id().unwrap_or_default().to_string(),
                instance_type: ec2.instance_type().unwrap_or_default().to_string(),
                region: ec2.region().unwrap_or_default().to_string(),
                count,
                hourly_commitment: recurring.unwrap_or(0.0) / MONTH_HOURS + upfront / term_hours,
                average_utilization: percent("AverageUtilization", detail.average_utilization())?,
                monthly_savings: number(
                    "EstimatedMonthlySavingsAmount",
                    detail.estimated_monthly_savings_amount(),
                )?,
                monthly_savings_percentage: percent(
                    "EstimatedMonthlySavingsPercentage",
                    detail.estimated_monthly_savings_percentage(),
                )?,
                monthly_on_demand_cost: number(
                    "EstimatedMonthlyOnDemandCost",
                    detail.estimated_monthly_on_demand_cost(),
                )?,
                average_instances_per_hour: number(
                    "AverageNumberOfInstancesUsedPerHour",
                    detail.average_number_of_instances_used_per_hour(),
                )?,
                break_even_months: number(
                    "EstimatedBreakEvenInMonths",
                    detail.estimated_break_even_in_months(),
                )?,
            });
        }
    }
    Ok(answer)
}

/// Reads a saved `GetReservationPurchaseRecommendation` answer.
pub fn read_saved(text: &str, location: &str) -> Result<ReservationRecommendation, CeError> {
    let invalid =
        |message: String| CeError::Invalid { request: 0, message: format!("{location}: {message}") };
    let value: Value = serde_json::from_str(text).map_err(|e| invalid(format!("not JSON: {e}")))?;
    let text_of = |v: &Value, key: &str| v.get(key).and_then(|t| t.as_str()).map(str::to_string);
    let found = value.get("Recommendations").and_then(|r| r.as_array()).ok_or_else(|| {
        invalid("no Recommendations: not an answer of GetReservationPurchaseRecommendation".into())
    })?;
    let mut recommendations = Vec::new();
    for r in found {
        let mut builder = ReservationPurchaseRecommendation::builder()
            .set_term_in_years(text_of(r, "TermInYears").map(|t| TermInYears::from(t.as_str())))
            .set_payment_option(text_of(r, "PaymentOption").map(|t| PaymentOption::from(t.as_str())))
            .set_lookback_period_in_days(
                text_of(r, "LookbackPeriodInDays")
                    .map(|t| aws_sdk_costexplorer::types::LookbackPeriodInDays::from(t.as_str())),
            );
        for detail in r.get("RecommendationDetails").and_then(|d| d.as_array()).into_iter().flatten() {
            let ec2 = detail.get("InstanceDetails").and_then(|d| d.get("EC2InstanceDetails"));
            let instance = ec2.map(|ec2| {
                InstanceDetails::builder()
                    .ec2_instance_details(
                        Ec2InstanceDetails::builder()
                            .set_instance_type(text_of(ec2, "InstanceType"))
                            .set_family(text_of(ec2, "Family"))
                            .set_region(text_of(ec2, "Region"))
                            .build(),
                    )
                    .build()
            });
            let field = |key: &str| text_of(detail, key);
            builder = builder.recommendation_details(
                ReservationPurchaseRecommendationDetail::builder()
                    .set_account_id(field("AccountId"))
                    .set_instance_details(instance)
                    .set_recommended_number_of_instances_to_purchase(field(
                        "RecommendedNumberOfInstancesToPurchase",
                    ))
                    .set_recurring_standard_monthly_cost(field("RecurringStandardMonthlyCost"))
                    .set_upfront_cost(field("UpfrontCost"))
                    .set_average_utilization(field("AverageUtilization"))
                    .set_estimated_monthly_savings_amount(field("EstimatedMonthlySavingsAmount"))
                    .set_estimated_monthly_savings_percentage(field("EstimatedMonthlySavingsPercentage"))
                    .set_estimated_monthly_on_demand_cost(field("EstimatedMonthlyOnDemandCost"))
                    .set_average_number_of_instances_used_per_hour(field(
                        "AverageNumberOfInstancesUsedPerHour",
                    ))
                    .set_estimated_break_even_in_months(field("EstimatedBreakEvenInMonths"))
                    .build(),
            );
        }
        recommendations.push(builder.build());
    }
    let generated = value.get("Metadata").and_then(|m| text_of(m, "GenerationTimestamp")).unwrap_or_default();
    reservation_recommendation(&recommendations, &generated, location)
}

/// Whether a saved Cost Explorer answer is one of `GetReservationPurchaseRecommendation`
/// (else it is read as a Savings Plan recommendation).
pub fn is_reservation_answer(text: &str) -> bool {
    serde_json::from_str::<Value>(text).is_ok_and(|v| v.get("Recommendations").is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// AWS's documented answer shape: two g5.12xlarge for $5,132.79 a month is $7.0312 an
    /// hour, $3.5156 each; percentages become fractions.
    #[test]
    fn a_saved_answer_gives_each_types_reservations_and_their_rate() {
        let saved = r#"{"Metadata": {"GenerationTimestamp": "2026-11-01T00:00:00Z"},
          "Recommendations": [{"LookbackPeriodInDays": "THIRTY_DAYS", "TermInYears": "ONE_YEAR",
            "PaymentOption": "NO_UPFRONT", "RecommendationDetails": [{
              "AccountId": "111122223333",
              "InstanceDetails": {"EC2InstanceDetails": {"InstanceType": "g5.12xlarge", "Region": "us-east-1"}},
              "RecommendedNumberOfInstancesToPurchase": "2", "RecurringStandardMonthlyCost": "5132.776",
              "UpfrontCost": "0.0", "AverageUtilization": "97.50", "EstimatedMonthlySavingsAmount": "1800.5"}]}]}"#;
        assert!(is_reservation_answer(saved));
        let answer = read_saved(saved, "saved.json").unwrap();
        assert_eq!((answer.lookback_days, answer.term.as_str()), (30, "ONE_YEAR"));
        let d = &answer.details[0];
        assert_eq!((d.instance_type.as_str(), d.region.as_str(), d.count), ("g5.12xlarge", "us-east-1", 2.0));
        assert!((d.hourly_commitment - 5132.776 / 730.0).abs() < 1e-12);
        assert!((d.instance_rate().unwrap() - 3.5156).abs() < 1e-9);
        assert_eq!((d.average_utilization, d.monthly_savings), (Some(0.975), Some(1800.5)));
        let wrong = saved.replace("\"2\"", "\"two\"");
        let error = read_saved(&wrong, "saved.json").unwrap_err().to_string();
        assert!(
            error.contains("saved.json: RecommendedNumberOfInstancesToPurchase \"two\" is not a number"),
            "{error}"
        );
    }
}
