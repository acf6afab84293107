//! Invoices and credit or debit notes as documents: what an issued one holds, frozen. How a
//! draft is computed, numbered and printed is in [`crate::invoice`].

use serde::{Deserialize, Serialize};

use crate::money::Cents;

/// What a document is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Invoice,
    /// Takes money back: a void (the whole standing amount) or a restatement that lowered
    /// the charge.
    CreditNote,
    /// Charges more: a restatement that raised the charge.
    DebitNote,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Invoice => "invoice",
            Kind::CreditNote => "credit_note",
            Kind::DebitNote => "debit_note",
        }
    }

    /// The document's title for people.
    pub fn title(self) -> &'static str {
        match self {
            Kind::Invoice => "Invoice",
            Kind::CreditNote => "Credit note",
            Kind::DebitNote => "Debit note",
        }
    }
}

/// Where a document stands. Stored documents never change: the status is derived from the
/// notes that refer to them ([`with_status`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Computed on demand, not numbered, not stored.
    Draft,
    Issued,
    /// Voided: a full credit note refers to it. A new invoice may be issued for its client
    /// and period.
    Credited,
    /// A restatement note refers to it: what the client owes is the invoice plus its notes.
    Superseded,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Draft => "draft",
            Status::Issued => "issued",
            Status::Credited => "credited",
            Status::Superseded => "superseded",
        }
    }
}

/// One line of a document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Line {
    /// A stable key (`gpu_training`, `shared_idle`, `markup`, `tax`, ...): notes compare
    /// lines by it.
    pub category: String,
    pub description: String,
    /// GPU-hours for GPU lines, vCPU-hours and GB-hours for the pods' CPU and memory; none
    /// where the bill gives no unit.
    pub quantity: Option<f64>,
    pub unit: Option<String>,
    /// Amount ÷ quantity as printed, with the fewest decimals (at least four) at which the
    /// printed quantity × this price rounds to the amount.
    pub unit_price: Option<String>,
    pub amount: Cents,
}

/// The client's billing details: what an invoice's buyer block shows and how it is taxed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct BillingDetails {
    pub legal_name: String,
    /// Lines separated by newlines.
    pub address: String,
    pub tax_id: String,
    pub po_number: String,
    pub currency: String,
    pub payment_terms_days: i64,
    /// Tax in parts per million of the subtotal with markup (200,000 = 20 %, 88,750 =
    /// 8.875 %).
    pub tax_ppm: i64,
}

impl Default for BillingDetails {
    fn default() -> Self {
        BillingDetails {
            legal_name: String::new(),
            address: String::new(),
            tax_id: String::new(),
            po_number: String::new(),
            currency: "USD".into(),
            payment_terms_days: 30,
            tax_ppm: 0,
        }
    }
}

impl BillingDetails {
    /// Payment terms in days, refused outside 0–365.
    pub fn terms_days(days: i64) -> Result<i64, String> {
        if (0..=365).contains(&days) {
            Ok(days)
        } else {
            Err(format!("payment terms are 0 to 365 days, not {days}"))
        }
    }

    /// An invoice currency as written (`eur`): its ISO 4217 code, three capital letters. An
    /// invoice in another currency than the reporting one converts at the rate in force for
    /// its period (`gpuledger fx set`), fixed when it is issued.
    pub fn currency_code(text: &str) -> Result<String, String> {
        crate::domain::fx::currency_code(text).map_err(|e| e.to_string())
    }

    /// A tax rate in percent (`20`, `8.875`) in parts per million, refused unless 0–100.
    pub fn tax_ppm_from_percent(percent: f64) -> Result<i64, String> {
        if percent.is_finite() && (0.0..=100.0).contains(&percent) {
            Ok((percent * 10_000.0).round() as i64)
        } else {
            Err(format!("the tax rate is a percentage from 0 to 100, not {percent}"))
        }
    }

    /// The text fields within what an invoice prints (legal name 200 characters, address 500,
    /// tax id and PO number 64 each): the first field too long, named, when one is.
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        for (field, value, limit) in [
            ("legal_name", &self.legal_name, 200),
            ("address", &self.address, 500),
            ("tax_id", &self.tax_id, 64),
            ("po_number", &self.po_number, 64),
        ] {
            if value.chars().count() > limit {
                return Err((field, format!("at most {limit} characters")));
            }
        }
        Ok(())
    }
}

/// Who issues the invoices, and how their numbers read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Seller {
    pub name: String,
    pub address: String,
    pub tax_id: String,
    pub email: String,
    /// `{year}` (of the issue date) and `{seq}` or `{seq:04}` (the series' number, zero
    /// padded to 4): `GL-{year}-{seq:04}` gives `GL-2026-0007`.
    pub number_format: String,
}

impl Default for Seller {
    fn default() -> Self {
        Seller {
            name: String::new(),
            address: String::new(),
            tax_id: String::new(),
            email: String::new(),
            number_format: DEFAULT_NUMBER_FORMAT.into(),
        }
    }
}

pub const DEFAULT_NUMBER_FORMAT: &str = "GL-{year}-{seq:04}";

/// Who may issue, adjust and void invoices (an administrator's setting).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Issuers {
    /// Finance and administrators.
    #[default]
    Finance,
    /// Finance, administrators, and agency managers for the clients their account sees.
    Managers,
}

impl Issuers {
    pub const ALL: [Issuers; 2] = [Issuers::Finance, Issuers::Managers];

    pub fn as_str(self) -> &'static str {
        match self {
            Issuers::Finance => "finance",
            Issuers::Managers => "managers",
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            Issuers::Finance => "Finance and administrators",
            Issuers::Managers => "Finance, administrators, and managers for their own clients",
        }
    }

    pub fn parse(text: &str) -> Result<Issuers, String> {
        Issuers::ALL
            .into_iter()
            .find(|i| i.as_str() == text)
            .ok_or_else(|| format!("{text:?}: write finance or managers"))
    }

    /// Whether `role` may issue for a client its account sees.
    pub fn allow(self, role: crate::domain::users::Role) -> bool {
        use crate::domain::users::Role;
        matches!(role, Role::Admin | Role::Finance) || (self == Issuers::Managers && role == Role::Manager)
    }
}

/// An invoice or note, as issued (or as a draft would be). The names of the JSON are an
/// interface: keep them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Invoice {
    /// Empty for a draft.
    pub number: String,
    pub kind: Kind,
    /// The invoice a note corrects.
    pub refers_to: Option<String>,
    pub client: String,
    pub period: String,
    pub status: Status,
    /// `YYYY-MM-DD` (UTC); none for a draft.
    pub issued_at: Option<String>,
    pub due_at: Option<String>,
    pub currency: String,
    pub lines: Vec<Line>,
    /// The lines before markup and tax.
    pub subtotal: Cents,
    pub markup: Cents,
    pub tax: Cents,
    /// subtotal + markup + tax = the sum of every line.
    pub total: Cents,
    /// The CUR delivery and the compute the amounts come from.
    pub data_version: String,
    /// The settings in force for the period (markup, pools, mapping), by digest.
    pub settings_version: String,
    pub pdf_sha256: Option<String>,
    pub buyer: BillingDetails,
    pub seller: Seller,
    /// Who issued it (a user, `--actor`, or the OS user).
    #[serde(default)]
    pub actor: String,
    /// Why a note was issued.
    #[serde(default)]
    pub reason: String,
    /// A void: this credit note takes back everything its invoice still stood for.
    #[serde(default)]
    pub full_credit: bool,
    /// Where the pods' lines (GPU compute, CPU and memory) came from: one row per workload,
    /// adding up to those lines exactly. Empty on notes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub detail: Vec<DetailRow>,
    /// For a document in another currency than the reporting one, the rate its amounts were
    /// converted with: the version in force for the period when the invoice was issued,
    /// frozen with it (its notes carry the same). Absent in the reporting currency.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exchange_rate: Option<crate::domain::fx::FxRate>,
    /// The rates the bills behind its lines were converted to USD at, one sentence per
    /// provider billing in another currency ("Azure's bill is in EUR, …"), printed with it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conversions: Vec<String>,
}

/// One workload's part of an invoice's pod lines.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DetailRow {
    pub namespace: String,
    pub workload: String,
    pub workload_class: String,
    pub gpu_hours: f64,
    pub amount: Cents,
}

/// `documents` (every document of some clients and periods) with each one's status.
pub fn with_status(mut documents: Vec<Invoice>) -> Vec<Invoice> {
    let notes: Vec<(String, bool)> =
        documents.iter().filter_map(|d| d.refers_to.clone().map(|r| (r, d.full_credit))).collect();
    for document in documents.iter_mut() {
        let mine: Vec<bool> =
            notes.iter().filter(|(r, _)| *r == document.number).map(|(_, full)| *full).collect();
        document.status = if mine.iter().any(|full| *full) {
            Status::Credited
        } else if !mine.is_empty() {
            Status::Superseded
        } else {
            Status::Issued
        };
    }
    documents
}
