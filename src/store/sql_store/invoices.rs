//! Billing details, the seller and the number series, and issued documents.

use std::collections::BTreeMap;

use sqlx::{Database, Encode, Executor, IntoArguments, Type};

use super::{Backend, SqlStore};
use crate::domain::invoices as invoice;
use crate::store::sql::ReadRow;
use crate::store::*;

const SELECT_BILLING: &str = "SELECT client, details FROM client_billing ORDER BY client";

const UPSERT_BILLING: &str = "INSERT INTO client_billing (client, details, updated_at) VALUES ($1, $2, $3) \
     ON CONFLICT (client) DO UPDATE SET details = excluded.details, updated_at = excluded.updated_at";

const SELECT_SELLER: &str = "SELECT seller FROM invoice_series WHERE id = 1";

const SELECT_ISSUERS: &str = "SELECT issuers FROM invoice_series WHERE id = 1";

const UPDATE_ISSUERS: &str = "UPDATE invoice_series SET issuers = $1 WHERE id = 1";

const SELECT_SERIES: &str = "SELECT last_seq, seller FROM invoice_series WHERE id = 1";

const UPDATE_SELLER: &str = "UPDATE invoice_series SET seller = $1 WHERE id = 1";

/// Takes the next number. On Postgres the row stays locked until the transaction ends, so a
/// second issuer waits here; SQLite's write transaction already excludes it.
const NEXT_SEQ: &str =
    "UPDATE invoice_series SET last_seq = last_seq + 1 WHERE id = 1 RETURNING last_seq, seller";

const SELECT_DOCUMENTS: &str = "SELECT document FROM invoices \
     WHERE ($1 = '' OR client = $1) AND ($2 = '' OR period = $2) ORDER BY seq";

const SELECT_FAMILY: &str = "SELECT client, period FROM invoices WHERE number = $1";

const SELECT_PDF: &str = "SELECT pdf FROM invoices WHERE number = $1";

const INSERT_DOCUMENT: &str = "INSERT INTO invoices (seq, number, kind, refers_to, client, period, issued_at, \
     actor, total_cents, document, pdf, pdf_sha256) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)";

fn parse<T: serde::de::DeserializeOwned>(what: &str, text: &str) -> Result<T, sqlx::Error> {
    serde_json::from_str(text).map_err(|e| sqlx::Error::Decode(format!("{what}: {e}").into()))
}

#[async_trait::async_trait]
impl<B: Backend> InvoiceStore for SqlStore<B>
where
    <B::Db as Database>::Row: ReadRow,
    for<'c> &'c mut <B::Db as Database>::Connection: Executor<'c, Database = B::Db>,
    for<'q> <B::Db as Database>::Arguments<'q>: IntoArguments<'q, B::Db> + Default,
    for<'q> i64: Encode<'q, B::Db> + Type<B::Db>,
    for<'q> Option<i64>: Encode<'q, B::Db> + Type<B::Db>,
    for<'q> f64: Encode<'q, B::Db> + Type<B::Db>,
    for<'q> String: Encode<'q, B::Db> + Type<B::Db>,
    for<'q> &'q str: Encode<'q, B::Db> + Type<B::Db>,
    for<'q> &'q [u8]: Encode<'q, B::Db> + Type<B::Db>,
    for<'q> Option<&'q str>: Encode<'q, B::Db> + Type<B::Db>,
    for<'q> Vec<u8>: Encode<'q, B::Db> + Type<B::Db>,
{
    async fn billing_details(&self) -> StoreResult<BTreeMap<String, BillingDetails>> {
        const CONTEXT: &str = "reading clients' billing details";
        let rows = sqlx::query(SELECT_BILLING).fetch_all(&self.pool).await.context(CONTEXT)?;
        rows.iter()
            .map(|row| Ok((row.text("client")?, parse("billing details", &row.text("details")?)?)))
            .collect::<Result<_, sqlx::Error>>()
            .context(CONTEXT)
    }

    async fn set_billing_details(&self, client: &str, details: &BillingDetails, at: i64) -> StoreResult<()> {
        const CONTEXT: &str = "saving a client's billing details";
        let text = serde_json::to_string(details).expect("billing details serialize");
        let mut tx = self.pool.begin_with(B::WRITE_BEGIN).await.context(CONTEXT)?;
        sqlx::query(UPSERT_BILLING)
            .bind(client)
            .bind(text)
            .bind(at)
            .execute(&mut *tx)
            .await
            .context(CONTEXT)?;
        // The client's own page reads in its invoices' currency: a new revision tells the
        // dashboards' caches.
        Self::next_revision(&mut tx).await.context(CONTEXT)?;
        tx.commit().await.context(CONTEXT)
    }

    async fn seller(&self) -> StoreResult<Seller> {
        const CONTEXT: &str = "reading the seller's details";
        let row = sqlx::query(SELECT_SELLER).fetch_one(&self.pool).await.context(CONTEXT)?;
        row.text("seller").and_then(|text| parse("the seller", &text)).context(CONTEXT)
    }

    async fn set_seller(&self, seller: &Seller) -> StoreResult<()> {
        let text = serde_json::to_string(seller).expect("the seller serializes");
        sqlx::query(UPDATE_SELLER)
            .bind(text)
            .execute(&self.pool)
            .await
            .context("saving the seller's details")
            .map(|_| ())
    }

    async fn issue_documents(
        &self,
        batch: &[(String, String)],
        build: &BatchBuilder,
    ) -> StoreResult<Vec<Invoice>> {
        const CONTEXT: &str = "issuing a document";
        let mut tx = self.pool.begin_with(B::WRITE_BEGIN).await.context(CONTEXT)?;
        let mut issued = Vec::with_capacity(batch.len());
        for (i, (client, period)) in batch.iter().enumerate() {
            let row = sqlx::query(NEXT_SEQ).fetch_one(&mut *tx).await.context(CONTEXT)?;
            let seq = row.int("last_seq").context(CONTEXT)?;
            let seller: Seller =
                row.text("seller").and_then(|text| parse("the seller", &text)).context(CONTEXT)?;
            let rows = sqlx::query(SELECT_DOCUMENTS)
                .bind(client)
                .bind(period)
                .fetch_all(&mut *tx)
                .await
                .context(CONTEXT)?;
            let existing = documents_of(&rows).context(CONTEXT)?;
            // A refusal rolls the transaction back (every number with it) when `tx` is dropped.
            let (mut document, pdf) = build(i, seq, &seller, &existing).map_err(StoreError::Invalid)?;
            let sha256 = crate::text::sha256_hex(&pdf);
            document.pdf_sha256 = Some(sha256.clone());
            document.status = invoice::Status::Issued;
            let issued_at = chrono::Utc::now().timestamp();
            sqlx::query(INSERT_DOCUMENT)
                .bind(seq)
                .bind(document.number.as_str())
                .bind(document.kind.as_str())
                .bind(document.refers_to.clone().unwrap_or_default())
                .bind(client)
                .bind(period)
                .bind(issued_at)
                .bind(document.actor.as_str())
                .bind(document.total.0)
                .bind(serde_json::to_string(&document).expect("a document serializes"))
                .bind(pdf)
                .bind(sha256)
                .execute(&mut *tx)
                .await
                .context(CONTEXT)?;
            issued.push(document);
        }
        // New documents change pages (the client's months, the register): a new revision
        // tells the dashboards' caches.
        Self::next_revision(&mut tx).await.context(CONTEXT)?;
        tx.commit().await.context(CONTEXT)?;
        Ok(issued)
    }

    async fn issuers(&self) -> StoreResult<invoice::Issuers> {
        const CONTEXT: &str = "reading who may issue invoices";
        let row = sqlx::query(SELECT_ISSUERS).fetch_one(&self.pool).await.context(CONTEXT)?;
        let text = row.text("issuers").context(CONTEXT)?;
        invoice::Issuers::parse(&text).map_err(StoreError::Invalid)
    }

    async fn set_issuers(&self, issuers: invoice::Issuers) -> StoreResult<()> {
        sqlx::query(UPDATE_ISSUERS)
            .bind(issuers.as_str())
            .execute(&self.pool)
            .await
            .context("saving who may issue invoices")
            .map(|_| ())
    }

    async fn series(&self) -> StoreResult<(i64, Seller)> {
        const CONTEXT: &str = "reading the invoice series";
        let row = sqlx::query(SELECT_SERIES).fetch_one(&self.pool).await.context(CONTEXT)?;
        let seller = row.text("seller").and_then(|text| parse("the seller", &text)).context(CONTEXT)?;
        Ok((row.int("last_seq").context(CONTEXT)?, seller))
    }

    async fn documents(&self, client: Option<&str>, period: Option<&str>) -> StoreResult<Vec<Invoice>> {
        const CONTEXT: &str = "reading invoices";
        let rows = sqlx::query(SELECT_DOCUMENTS)
            .bind(client.unwrap_or(""))
            .bind(period.unwrap_or(""))
            .fetch_all(&self.pool)
            .await
            .context(CONTEXT)?;
        documents_of(&rows).context(CONTEXT)
    }

    async fn document(&self, number: &str) -> StoreResult<Option<Invoice>> {
        const CONTEXT: &str = "reading an invoice";
        let Some(row) =
            sqlx::query(SELECT_FAMILY).bind(number).fetch_optional(&self.pool).await.context(CONTEXT)?
        else {
            return Ok(None);
        };
        let (client, period) = (row.text("client").context(CONTEXT)?, row.text("period").context(CONTEXT)?);
        let family = self.documents(Some(&client), Some(&period)).await?;
        Ok(family.into_iter().find(|d| d.number == number))
    }

    async fn document_pdf(&self, number: &str) -> StoreResult<Option<Vec<u8>>> {
        const CONTEXT: &str = "reading an invoice's PDF";
        let row = sqlx::query(SELECT_PDF).bind(number).fetch_optional(&self.pool).await.context(CONTEXT)?;
        row.map(|row| row.bytes("pdf")).transpose().context(CONTEXT)
    }
}

/// Documents from their stored JSON, with statuses.
fn documents_of(rows: &[impl ReadRow]) -> Result<Vec<Invoice>, sqlx::Error> {
    let documents = rows
        .iter()
        .map(|row| parse::<Invoice>("an invoice", &row.text("document")?))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(invoice::with_status(documents))
}
