//! `gpuledger invoice` and `gpuledger clients billing`: drafts, issuing, notes, exports, and
//! the details printed on the documents.

use anyhow::Context;

use crate::auth::AuditEntry;
use crate::cli::{ActorArgs, ClientBillingArgs, ExportFormat, InvoiceCommand, SellerArgs};
use crate::invoice::ledger::{self, InvoiceError};
use crate::invoice::{BillingDetails, Invoice, format_number};
use crate::report::OutputFormat;
use crate::store::Store;

pub(super) async fn run(store: &dyn Store, command: InvoiceCommand) -> anyhow::Result<()> {
    match command {
        InvoiceCommand::Draft { client, period, format } => {
            let view = ledger::draft_view(store, &client, period).await.map_err(refusal)?;
            match format {
                OutputFormat::Json => println!("{}", serde_json::to_string_pretty(&view.json())?),
                format => {
                    print!("{}", view.draft.table().render(format, &view.draft.period, Default::default()));
                    if let (Some(standing), Some(delta)) = (&view.standing, &view.delta) {
                        eprintln!(
                            "invoice {} stands for {client} in {period} at {}: the charge differs by {} (gpuledger invoice adjust)",
                            standing.invoice.number,
                            standing.total().usd(),
                            delta.total.usd()
                        );
                    }
                }
            }
        }
        InvoiceCommand::Issue { of, allow_open } => {
            let actor = actor_name(&of.actor);
            let invoice =
                ledger::issue(store, &of.client, of.period, &actor, allow_open).await.map_err(refusal)?;
            issued(store, &invoice, &actor).await?;
        }
        InvoiceCommand::Adjust(of) => {
            let actor = actor_name(&of.actor);
            let note = ledger::adjust(store, &of.client, of.period, &actor).await.map_err(refusal)?;
            issued(store, &note, &actor).await?;
        }
        InvoiceCommand::Credit { number, reason, actor } => {
            let actor = actor_name(&actor);
            let note = ledger::credit(store, &number, &reason, &actor).await.map_err(refusal)?;
            issued(store, &note, &actor).await?;
        }
        InvoiceCommand::List { client, period, format } => {
            let period = period.map(|p| p.to_string());
            let documents = store.documents(client.as_deref(), period.as_deref()).await?;
            match format {
                OutputFormat::Json => println!("{}", serde_json::to_string_pretty(&documents)?),
                format => print!(
                    "{}",
                    crate::invoice::register_table(&documents).render(
                        format,
                        period.as_deref().unwrap_or("every period"),
                        Default::default()
                    )
                ),
            }
        }
        InvoiceCommand::Show { number, format } => {
            let document = find(store, &number).await?;
            match format {
                OutputFormat::Json => println!("{}", serde_json::to_string_pretty(&document)?),
                format => print!("{}", document.table().render(format, &document.period, Default::default())),
            }
        }
        InvoiceCommand::Export { number, format, out } => {
            let document = find(store, &number).await?;
            let bytes = match format {
                ExportFormat::Pdf => {
                    store.document_pdf(&number).await?.context("the stored PDF is missing")?
                }
                ExportFormat::Csv => crate::invoice::csv(&document).into_bytes(),
                ExportFormat::Xlsx => document.xlsx()?,
                ExportFormat::Json => serde_json::to_vec_pretty(&document)?,
            };
            std::fs::write(&out, &bytes).with_context(|| format!("writing {}", out.display()))?;
            eprintln!("wrote {} ({} bytes)", out.display(), bytes.len());
        }
        InvoiceCommand::Seller(args) => seller(store, args).await?,
    }
    Ok(())
}

/// A refusal or a missing thing is the user's to fix: its message alone, exit code 1.
fn refusal(error: InvoiceError) -> anyhow::Error {
    anyhow::Error::msg(error.to_string())
}

fn actor_name(args: &ActorArgs) -> String {
    args.actor
        .clone()
        .or_else(|| std::env::var("USER").ok())
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "cli".into())
}

async fn find(store: &dyn Store, number: &str) -> anyhow::Result<Invoice> {
    store.document(number).await?.with_context(|| format!("no invoice or note numbered {number}"))
}

/// Records an issued document in the audit log and prints its number (stdout) and what it
/// is (stderr).
async fn issued(store: &dyn Store, document: &Invoice, actor: &str) -> anyhow::Result<()> {
    let action = match document.kind {
        crate::invoice::Kind::Invoice => "invoice.issue",
        _ if document.full_credit => "invoice.void",
        _ => "invoice.adjust",
    };
    let detail =
        format!("{} {} {} {}", document.number, document.client, document.period, document.total.decimal());
    let entry = AuditEntry::new(&format!("cli:{actor}"), "", action, &detail);
    store.audit(&entry).await?;
    eprintln!(
        "issued {} {} for {} {}: {} {}",
        document.kind.title().to_lowercase(),
        document.number,
        document.client,
        document.period,
        document.currency,
        document.total.decimal()
    );
    println!("{}", document.number);
    Ok(())
}

/// `clients billing NAME ...`: changes the details given, keeps the rest.
pub(super) async fn billing(store: &dyn Store, args: ClientBillingArgs) -> anyhow::Result<()> {
    let mut details = store.billing_details().await?.remove(&args.name).unwrap_or_default();
    if let Some(currency) = args.currency {
        details.currency =
            BillingDetails::currency_code(&currency).map_err(|e| anyhow::anyhow!("--currency: {e}"))?;
    }
    if let Some(days) = args.payment_terms_days {
        details.payment_terms_days =
            BillingDetails::terms_days(days).map_err(|e| anyhow::anyhow!("--payment-terms-days: {e}"))?;
    }
    if let Some(percent) = args.tax_percent {
        details.tax_ppm = BillingDetails::tax_ppm_from_percent(percent)
            .map_err(|e| anyhow::anyhow!("--tax-percent: {e}"))?;
    }
    let text = |value: Option<String>, field: &mut String| {
        if let Some(value) = value {
            *field = value.replace("\\n", "\n");
        }
    };
    text(args.legal_name, &mut details.legal_name);
    text(args.address, &mut details.address);
    text(args.tax_id, &mut details.tax_id);
    text(args.po, &mut details.po_number);
    details.check().map_err(|(field, e)| anyhow::anyhow!("--{}: {e}", field.replace('_', "-")))?;
    store.set_billing_details(&args.name, &details, chrono::Utc::now().timestamp()).await?;
    println!("{}", serde_json::to_string_pretty(&details)?);
    Ok(())
}

async fn seller(store: &dyn Store, args: SellerArgs) -> anyhow::Result<()> {
    let mut seller = store.seller().await?;
    if let Some(format) = args.number_format {
        format_number(&format, 1, 2026).map_err(anyhow::Error::msg)?;
        seller.number_format = format;
    }
    for (value, field) in [
        (args.name, &mut seller.name),
        (args.address, &mut seller.address),
        (args.tax_id, &mut seller.tax_id),
        (args.email, &mut seller.email),
    ] {
        if let Some(value) = value {
            *field = value.replace("\\n", "\n");
        }
    }
    store.set_seller(&seller).await?;
    println!("{}", serde_json::to_string_pretty(&seller)?);
    Ok(())
}
