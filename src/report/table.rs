//! One renderer for the usage reports: a title, named columns and typed cells, printed as
//! an aligned table for people, or CSV / JSON (`{"period", "rows": [...]}`) for scripts.

use serde_json::{Map, Value, json};

use super::{OutputFormat, csv_cell};
pub use crate::money::Nanos;
use crate::period::human;

/// A cell, typed so each format shows it right.
#[derive(Debug, Clone)]
pub enum Cell {
    Text(String),
    /// GPU-hours and the like: 6 decimals in CSV/JSON, 1 in the table.
    Hours(f64),
    /// A fraction (0.724): shown as `72.4 %` in the table; `null`/empty when undefined.
    Ratio(Option<f64>),
    /// Requests, tokens: whole numbers.
    Count(f64),
    /// Dollars, exact: rounded once to the micro-dollar in CSV/JSON/XLSX and to the cent
    /// (`$1,234.56`) in the table; empty when undefined.
    Usd(Option<Nanos>),
    /// Dollars per unit (per inference): 12 significant decimals in CSV/JSON, 6 in the table.
    Rate(Option<f64>),
    /// Yes or no: `true`/`false` in JSON and CSV, `yes` or empty in the table.
    Flag(bool),
    /// An exact decimal as printed elsewhere (an invoice line's quantity or unit price): the
    /// same digits in CSV, grouped by thousands in the table, a number in JSON and XLSX;
    /// empty when empty.
    Decimal(String),
    /// An amount in the currency a column beside it names (a bill's own, unconverted): exact
    /// as `Usd` is in CSV and JSON, grouped to the hundredth without a dollar sign in the
    /// table; empty when undefined (bills in several currencies).
    Money(Option<Nanos>),
}

/// A report as rows of cells under column names.
#[derive(Debug, Clone)]
pub struct Table {
    pub title: String,
    /// JSON and CSV names, also the table's headings.
    pub columns: Vec<&'static str>,
    pub rows: Vec<Vec<Cell>>,
    /// Total lines under the rows (a Kubernetes total, other cost, the bill): printed after
    /// them, but in JSON kept apart as `"totals"`, so a script that sums `rows` never counts
    /// a total twice.
    pub totals: Vec<Vec<Cell>>,
}

/// How JSON writes an amount of money. The command-line reports keep the contract scripts
/// were given (numbers); the pages' JSON twins write every amount as an exact decimal string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MoneyJson {
    /// `1234.567891`: the nearest double to the micro-dollar decimal, which prints as it.
    Number,
    /// `"1234.567891"`: the micro-dollar decimal itself (rates: twelve decimals).
    Decimal,
}

impl MoneyJson {
    /// An exact amount, rounded once to the micro-dollar.
    pub fn usd(self, amount: Nanos) -> Value {
        match self {
            MoneyJson::Number => json!(micros_f64(amount)),
            MoneyJson::Decimal => json!(amount.decimal()),
        }
    }

    /// Dollars per unit (per inference, per million tokens), to twelve decimals.
    fn rate(self, rate: f64) -> Value {
        match self {
            MoneyJson::Number => json!((rate * 1e12).round() / 1e12),
            MoneyJson::Decimal => json!(format!("{rate:.12}")),
        }
    }
}

/// A field a report's JSON carries beside its rows.
#[derive(Debug, Clone)]
pub enum Extra {
    Json(Value),
    /// An amount, written as the report's money format says.
    Usd(Nanos),
    /// Another table's rows.
    Rows(Table),
}

impl From<Value> for Extra {
    fn from(value: Value) -> Extra {
        Extra::Json(value)
    }
}

/// The fields beside a report's rows, by name (a name given twice keeps the last value).
#[derive(Debug, Clone, Default)]
pub struct Extras(Vec<(String, Extra)>);

impl Extras {
    pub fn insert(&mut self, key: &str, value: impl Into<Extra>) {
        self.0.retain(|(k, _)| k != key);
        self.0.push((key.to_string(), value.into()));
    }

    /// An amount of money beside the rows.
    pub fn usd(&mut self, key: &str, nanos: i64) {
        self.insert(key, Extra::Usd(Nanos(nanos)));
    }

    pub fn get(&self, key: &str) -> Option<&Extra> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    pub fn clear(&mut self) {
        self.0.clear();
    }

    /// As JSON fields, amounts written as `money` says.
    pub fn to_map(&self, money: MoneyJson) -> Map<String, Value> {
        self.0
            .iter()
            .map(|(key, extra)| {
                let value = match extra {
                    Extra::Json(value) => value.clone(),
                    Extra::Usd(amount) => money.usd(*amount),
                    Extra::Rows(table) => table.json_rows(money),
                };
                (key.clone(), value)
            })
            .collect()
    }
}

impl Table {
    /// Rows as JSON objects keyed by column.
    fn objects(&self, rows: &[Vec<Cell>], money: MoneyJson) -> Value {
        Value::Array(
            rows.iter()
                .map(|row| {
                    let fields = self
                        .columns
                        .iter()
                        .zip(row)
                        .map(|(c, cell)| (c.to_string(), json_value(cell, money)));
                    Value::Object(fields.collect())
                })
                .collect(),
        )
    }

    /// The rows as a JSON array of objects, as `json` writes them under `rows`.
    pub fn json_rows(&self, money: MoneyJson) -> Value {
        self.objects(&self.rows, money)
    }

    /// `{"period", "rows", "totals"?}` and the `extra` fields.
    pub fn json(&self, period: &str, extra: Map<String, Value>, money: MoneyJson) -> Value {
        let mut top = Map::new();
        top.insert("period".into(), json!(period));
        top.insert("rows".into(), self.objects(&self.rows, money));
        if !self.totals.is_empty() {
            top.insert("totals".into(), self.objects(&self.totals, money));
        }
        top.extend(extra);
        Value::Object(top)
    }

    /// A check's output (`report cross-check`, `report split-check`): its own JSON contract,
    /// or its table with money as exact decimals (CSV) or dollars (table, with the check's
    /// sentence under it).
    pub fn render_check(
        format: OutputFormat,
        period: &str,
        json: impl FnOnce() -> Value,
        table: impl Fn(fn(i64) -> String) -> Table,
        summary: impl FnOnce() -> String,
    ) -> String {
        match format {
            OutputFormat::Json => serde_json::to_string_pretty(&json()).unwrap_or_default() + "\n",
            OutputFormat::Csv => table(crate::money::usd_decimal).render(format, period, Map::new()),
            OutputFormat::Table => {
                let mut out = table(crate::money::format_usd).render(format, period, Map::new());
                out.push_str(&summary());
                out.push('\n');
                out
            }
        }
    }

    /// Prints in `format`; `extra` fields join `period` and `rows` at the JSON top level
    /// (amounts as JSON numbers: the command-line contract).
    pub fn render(&self, format: OutputFormat, period: &str, extra: Map<String, Value>) -> String {
        match format {
            OutputFormat::Json => {
                let json = self.json(period, extra, MoneyJson::Number);
                serde_json::to_string_pretty(&json).unwrap_or_default() + "\n"
            }
            OutputFormat::Csv => {
                let mut out = self.columns.join(",") + "\n";
                for row in self.all_rows() {
                    out.push_str(&row.iter().map(csv_text).collect::<Vec<_>>().join(","));
                    out.push('\n');
                }
                out
            }
            OutputFormat::Table => {
                let mut lines = vec![self.columns.iter().map(|c| c.replace('_', " ")).collect::<Vec<_>>()];
                lines.extend(self.all_rows().map(|row| row.iter().map(table_text).collect()));
                let widths: Vec<usize> = (0..self.columns.len())
                    .map(|i| lines.iter().map(|l| l[i].chars().count()).max().unwrap_or(0))
                    .collect();
                // Numbers align right, text left, as the first row's cells say.
                let right: Vec<bool> = (0..self.columns.len())
                    .map(|i| self.rows.first().is_some_and(|r| !matches!(r[i], Cell::Text(_))))
                    .collect();
                let mut out = format!("{}, {period}\n", self.title);
                for line in &lines {
                    let cells: Vec<String> = line
                        .iter()
                        .enumerate()
                        .map(|(i, cell)| {
                            let w = widths[i];
                            if right[i] { format!("{cell:>w$}") } else { format!("{cell:<w$}") }
                        })
                        .collect();
                    out.push_str(cells.join("  ").trim_end());
                    out.push('\n');
                }
                out
            }
        }
    }
}

impl Table {
    /// Column headings for people: `gpu_hours` → `Gpu hours` reads badly, so acronyms stay.
    /// Orders the rows by `column` (numbers by value, text alphabetically, empty cells last
    /// either way), descending when asked; totals stay under them. Returns the new order as
    /// the old rows' indices (to carry anything kept beside the rows), or `None` when the
    /// table has no such column.
    pub fn sort_by_column(&mut self, column: &str, descending: bool) -> Option<Vec<usize>> {
        let index = self.column(column)?;
        let mut order: Vec<usize> = (0..self.rows.len()).collect();
        order.sort_by(|&a, &b| {
            cell_order(self.rows[a].get(index), self.rows[b].get(index), descending).then(a.cmp(&b))
        });
        let rows = std::mem::take(&mut self.rows);
        let mut slots: Vec<Option<Vec<Cell>>> = rows.into_iter().map(Some).collect();
        self.rows = order.iter().map(|&i| slots[i].take().unwrap_or_default()).collect();
        Some(order)
    }

    /// The columns in words a reader uses: `unallocated_ec2_cost` → "Unallocated EC2 cost".
    pub fn headings(&self) -> Vec<String> {
        self.columns.iter().map(|c| heading(c)).collect()
    }

    /// The table as an XLSX workbook of one sheet named `sheet` to hand on: the `heading`
    /// lines above it (what the table is, its period or range and filters, the data's as-of
    /// time; the first in bold is also the workbook's title), a blank row, then a bold header
    /// row of human column names that stays in view and repeats on printed pages, an
    /// autofilter, and numbers as numbers (dollars rounded to the micro-dollar as in CSV, shown
    /// with cents; ratios as percentages); the totals under the rows. Text is always written
    /// as text, so a cell can never become a formula.
    pub fn xlsx(&self, sheet: &str, heading: &[String]) -> Result<Vec<u8>, rust_xlsxwriter::XlsxError> {
        use rust_xlsxwriter::{DocProperties, Format, Workbook};
        let mut workbook = Workbook::new();
        let title = heading.first().cloned().unwrap_or_else(|| self.title.clone());
        workbook.set_properties(&DocProperties::new().set_title(title));
        let header = Format::new().set_bold();
        let formats = [
            Format::new().set_num_format("#,##0.0"),
            Format::new().set_num_format("0.0%"),
            Format::new().set_num_format("#,##0"),
            Format::new().set_num_format("$#,##0.00"),
            Format::new().set_num_format("$0.000000"),
            // Exact decimals: as many digits as the number holds.
            Format::new(),
        ];
        // Rows are streamed to a temporary file as they are written (in order), the strings
        // kept in one shared table: memory stays flat however long the table.
        let worksheet = workbook.add_worksheet_with_low_memory();
        worksheet.set_name(sheet)?;
        for (col, width) in self.column_widths(heading).into_iter().enumerate() {
            worksheet.set_column_width(col as u16, width)?;
        }
        for (r, line) in heading.iter().enumerate() {
            match r {
                0 => worksheet.write_string_with_format(0, 0, line, &header)?,
                _ => worksheet.write_string(r as u32, 0, line)?,
            };
        }
        // The header row: under the heading and a blank row, or the first row without one.
        let top = if heading.is_empty() { 0 } else { heading.len() as u32 + 1 };
        for (col, name) in self.headings().iter().enumerate() {
            worksheet.write_string_with_format(top, col as u16, name, &header)?;
        }
        for (r, row) in self.all_rows().enumerate() {
            let r = top + r as u32 + 1;
            for (col, cell) in row.iter().enumerate() {
                let col = col as u16;
                let number = match cell {
                    Cell::Text(text) => {
                        worksheet.write_string(r, col, text)?;
                        continue;
                    }
                    Cell::Flag(flag) => {
                        worksheet.write_boolean(r, col, *flag)?;
                        continue;
                    }
                    Cell::Hours(x) => Some((round6(*x), &formats[0])),
                    Cell::Ratio(x) => x.map(|x| (x, &formats[1])),
                    Cell::Count(x) => Some((x.round(), &formats[2])),
                    Cell::Usd(x) => x.map(|x| (micros_f64(x), &formats[3])),
                    Cell::Rate(x) => x.map(|x| ((x * 1e12).round() / 1e12, &formats[4])),
                    Cell::Decimal(text) => text.parse().ok().map(|x| (x, &formats[5])),
                    Cell::Money(x) => x.map(|x| (micros_f64(x), &formats[5])),
                };
                if let Some((value, format)) = number {
                    worksheet.write_number_with_format(r, col, value, format)?;
                }
            }
        }
        let last_col = self.columns.len().saturating_sub(1) as u16;
        worksheet.set_freeze_panes(top + 1, 0)?;
        worksheet.set_repeat_rows(top, top)?;
        worksheet.set_landscape();
        // The filter covers the rows, not the totals under them.
        worksheet.autofilter(top, 0, top + self.rows.len() as u32, last_col)?;
        workbook.save_to_buffer()
    }

    /// Column widths in characters, as the cells print, from the header and the first 500
    /// rows (fitting every row of an 80,000-row table costs more than writing it); the heading
    /// lines widen column A, every column to 42 characters (about 300 px) at most.
    fn column_widths(&self, heading: &[String]) -> Vec<f64> {
        let mut widths: Vec<usize> = self.headings().iter().map(|h| h.chars().count()).collect();
        if let Some(first) = widths.first_mut() {
            *first = heading.iter().map(|h| h.chars().count()).fold(*first, usize::max);
        }
        for row in self.rows.iter().take(500).chain(&self.totals) {
            for (width, cell) in widths.iter_mut().zip(row) {
                *width = (*width).max(table_text(cell).chars().count());
            }
        }
        widths.into_iter().map(|w| (w + 2).min(42) as f64).collect()
    }

    /// The rows, then the totals.
    pub fn all_rows(&self) -> impl Iterator<Item = &Vec<Cell>> {
        self.rows.iter().chain(&self.totals)
    }

    /// The index of a column by name: pages read cells by name, so a reordered column can
    /// never put another number in its place.
    pub fn column(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| *c == name)
    }

    /// Cells as people read them, each with whether it is a number (aligned right): the rows
    /// in `shown` (a page of a long table), then the totals, which always cover every row.
    /// Values of the columns that hold gpuledger's own names (an opportunity's kind, an
    /// alert's rule, a line's category, …) read as words (`spot_training` → "Spot training");
    /// CSV, JSON and XLSX keep the names scripts match on. A cell that is a month, a day or a
    /// time reads as people write it (`Oct 2026`); the downloads keep ISO 8601.
    pub fn display_rows(&self, shown: std::ops::Range<usize>) -> Vec<Vec<(String, bool)>> {
        const NAMED: [&str; 7] =
            ["kind", "rule", "category", "workload_class", "severity", "state", "status"];
        let worded: Vec<bool> = self.columns.iter().map(|c| NAMED.contains(c)).collect();
        let end = shown.end.min(self.rows.len());
        let start = shown.start.min(end);
        self.rows[start..end]
            .iter()
            .chain(&self.totals)
            .map(|row| {
                row.iter()
                    .enumerate()
                    .map(|(col, cell)| match cell {
                        Cell::Text(text) if worded.get(col) == Some(&true) => (heading(text), false),
                        Cell::Text(text) => (human::within(text), false),
                        _ => (table_text(cell), !matches!(cell, Cell::Text(_))),
                    })
                    .collect()
            })
            .collect()
    }
}

/// How a sorted column orders two of its cells: numbers by the value they show (empty cells
/// last either way), text case-folded; descending when asked. Ties are the caller's to break.
pub fn cell_order(a: Option<&Cell>, b: Option<&Cell>, descending: bool) -> std::cmp::Ordering {
    let key = |cell: Option<&Cell>| -> (Option<f64>, String) {
        match cell {
            Some(Cell::Text(t)) => (None, t.to_lowercase()),
            Some(Cell::Hours(v) | Cell::Count(v)) => (Some(*v), String::new()),
            Some(Cell::Ratio(v) | Cell::Rate(v)) => (*v, String::new()),
            Some(Cell::Usd(v) | Cell::Money(v)) => (v.map(Nanos::usd_f64), String::new()),
            Some(Cell::Flag(b)) => (Some(f64::from(u8::from(*b))), String::new()),
            Some(Cell::Decimal(text)) => (text.parse().ok(), String::new()),
            None => (None, String::new()),
        }
    };
    let direction = |o: std::cmp::Ordering| if descending { o.reverse() } else { o };
    let (ka, kb) = (key(a), key(b));
    if matches!(a, Some(c) if !matches!(c, Cell::Text(_))) {
        match (ka.0, kb.0) {
            (Some(x), Some(y)) => direction(x.total_cmp(&y)),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => std::cmp::Ordering::Equal,
        }
    } else {
        direction(ka.1.cmp(&kb.1))
    }
}

/// To six decimals, and never `-0.0` (a float sum of nothing is −0, which JSON prints so).
pub fn round6(x: f64) -> f64 {
    (x * 1e6).round() / 1e6 + 0.0
}

/// An exact amount rounded once to the micro-dollar, as the nearest double.
fn micros_f64(amount: Nanos) -> f64 {
    amount.micros() as f64 / 1e6
}

fn json_value(cell: &Cell, money: MoneyJson) -> Value {
    match cell {
        Cell::Text(text) => json!(text),
        Cell::Flag(flag) => json!(flag),
        Cell::Hours(x) => json!(round6(*x)),
        Cell::Ratio(x) => x.map_or(Value::Null, |x| json!(round6(x))),
        // The nearest double to a micro-dollar decimal prints as that decimal (up to $9
        // billion), so the number a script reads is the exact rounded amount.
        Cell::Usd(x) | Cell::Money(x) => x.map_or(Value::Null, |x| money.usd(x)),
        Cell::Count(x) => json!(x.round()),
        Cell::Rate(x) => x.map_or(Value::Null, |x| money.rate(x)),
        Cell::Decimal(text) => text.parse::<f64>().map_or(Value::Null, |x| json!(x)),
    }
}

fn csv_text(cell: &Cell) -> String {
    match cell {
        Cell::Text(text) => csv_cell(text),
        Cell::Flag(flag) => flag.to_string(),
        Cell::Hours(x) => format!("{x:.6}"),
        Cell::Ratio(x) => x.map(|x| format!("{x:.6}")).unwrap_or_default(),
        Cell::Usd(x) | Cell::Money(x) => x.map(Nanos::decimal).unwrap_or_default(),
        Cell::Count(x) => format!("{:.0}", x.round()),
        Cell::Rate(x) => x.map(|x| format!("{x:.12}")).unwrap_or_default(),
        Cell::Decimal(text) => text.clone(),
    }
}

fn table_text(cell: &Cell) -> String {
    match cell {
        Cell::Text(text) => text.clone(),
        Cell::Flag(flag) => {
            if *flag {
                "yes".into()
            } else {
                String::new()
            }
        }
        Cell::Hours(x) => thousands(*x, 1),
        Cell::Ratio(x) => x.map(|x| format!("{:.1} %", x * 100.0)).unwrap_or_else(|| "n/a".into()),
        Cell::Count(x) => thousands(*x, 0),
        Cell::Usd(x) => x.map(Nanos::usd).unwrap_or_else(|| "n/a".into()),
        Cell::Rate(x) => x.map(|x| format!("${x:.6}")).unwrap_or_else(|| "n/a".into()),
        Cell::Decimal(text) => grouped(text),
        Cell::Money(x) => {
            x.map(|x| grouped(&crate::money::Cents::from_nanos(x.0).decimal())).unwrap_or_default()
        }
    }
}

/// `-1234567.8912` → `-1,234,567.8912`: the digits kept, the whole part grouped by thousands.
pub fn grouped(text: &str) -> String {
    crate::text::grouped(text)
}

/// A column name in words: underscores are spaces, the first letter is a capital, and
/// abbreviations are written as people write them (GPU, CPU, EC2, AWS, P95, ID).
pub fn heading(column: &str) -> String {
    const ABBREVIATIONS: [(&str, &str); 9] = [
        ("gpu", "GPU"),
        ("gpuless", "GPU-less"),
        ("gpus", "GPUs"),
        ("cpu", "CPU"),
        ("vcpu", "vCPU"),
        ("ec2", "EC2"),
        ("aws", "AWS"),
        ("p95", "P95"),
        ("id", "ID"),
    ];
    let words: Vec<String> = column
        .split('_')
        .filter(|word| !word.is_empty())
        .enumerate()
        .map(|(i, word)| match ABBREVIATIONS.iter().find(|(short, _)| *short == word) {
            Some((_, written)) => written.to_string(),
            None if i == 0 => {
                let mut chars = word.chars();
                chars
                    .next()
                    .map(|first| first.to_uppercase().collect::<String>() + chars.as_str())
                    .unwrap_or_default()
            }
            None => word.to_string(),
        })
        .collect();
    words.join(" ")
}

/// `1234567.891` with 1 decimal → `1,234,567.9`.
pub fn thousands(x: f64, decimals: usize) -> String {
    let text = format!("{:.*}", decimals, x.abs());
    // No sign on a value that rounds to zero (`-0.0` reads as a negative).
    let negative = x < 0.0 && text.chars().any(|c| c.is_ascii_digit() && c != '0');
    if negative { format!("-{}", grouped(&text)) } else { grouped(&text) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn column_names_read_as_words_with_abbreviations_as_people_write_them() {
        assert_eq!(heading("unallocated_ec2_cost"), "Unallocated EC2 cost");
        assert_eq!(heading("cpu_and_memory_cost"), "CPU and memory cost");
        assert_eq!(heading("gpu_hours_allocated"), "GPU hours allocated");
        assert_eq!(heading("vcpu_hours"), "vCPU hours");
        assert_eq!(heading("usage_account_id"), "Usage account ID");
        assert_eq!(heading("p95_cost_per_inference"), "P95 cost per inference");
        assert_eq!(heading("gpuless_idle"), "GPU-less idle");
        // A word that only begins like an abbreviation stays a word.
        assert_eq!(heading("identity"), "Identity");
    }

    #[test]
    fn a_sum_of_nothing_is_zero_not_minus_zero() {
        // What `Sum` gives for no floats.
        let nothing = -0.0_f64;
        assert_eq!(json_value(&Cell::Hours(nothing), MoneyJson::Decimal).to_string(), "0.0");
        assert_eq!(json_value(&Cell::Ratio(Some(nothing)), MoneyJson::Number).to_string(), "0.0");
    }

    #[test]
    fn an_amount_in_a_bills_currency_is_money_without_a_dollar_sign() {
        // EUR 5,080.582060: exact in CSV and on the pages' twins, a number for scripts.
        let euros = Cell::Money(Some(Nanos(5_080_582_060_000)));
        assert_eq!(csv_text(&euros), "5080.582060");
        assert_eq!(table_text(&euros), "5,080.58");
        assert_eq!(json_value(&euros, MoneyJson::Decimal), json!("5080.582060"));
        assert_eq!(json_value(&euros, MoneyJson::Number), json!(5080.58206));
        // Bills in several currencies have no one amount.
        assert_eq!(
            (table_text(&Cell::Money(None)), json_value(&Cell::Money(None), MoneyJson::Decimal)),
            (String::new(), Value::Null)
        );
    }

    #[test]
    fn an_exact_decimal_keeps_its_digits_grouped_in_the_table_and_is_a_number_for_scripts() {
        assert_eq!(grouped("-1234567.8912"), "-1,234,567.8912");
        assert_eq!(grouped("521406.48"), "521,406.48");
        assert_eq!(grouped("999.5"), "999.5");
        assert_eq!(grouped("1000"), "1,000");
        let price = Cell::Decimal("0.0111474".into());
        assert_eq!(csv_text(&price), "0.0111474");
        assert_eq!(table_text(&price), "0.0111474");
        assert_eq!(json_value(&price, MoneyJson::Decimal), json!(0.0111474));
        assert_eq!(json_value(&Cell::Decimal(String::new()), MoneyJson::Decimal), Value::Null);
    }

    #[test]
    fn cells_print_for_people_and_for_scripts() {
        assert_eq!(thousands(1_234_567.891, 1), "1,234,567.9");
        assert_eq!(thousands(-12.0, 0), "-12");
        assert_eq!(thousands(-0.04, 1), "0.0", "no sign on what rounds to zero");
        assert_eq!(thousands(-1234.0, 0), "-1,234");
        assert_eq!(table_text(&Cell::Ratio(Some(0.7244))), "72.4 %");
        let table = Table {
            title: "t".into(),
            totals: Vec::new(),
            columns: vec!["namespace", "utilization"],
            rows: vec![vec![Cell::Text("=a".into()), Cell::Ratio(None)]],
        };
        assert_eq!(table.render(OutputFormat::Csv, "2026-10", Map::new()), "namespace,utilization\n'=a,\n");
        let json: Value =
            serde_json::from_str(&table.render(OutputFormat::Json, "2026-10", Map::new())).unwrap();
        assert_eq!(json["rows"][0]["utilization"], Value::Null);
    }

    #[test]
    fn page_json_writes_money_as_decimal_strings_and_reports_as_numbers() {
        let table = Table {
            title: "t".into(),
            totals: vec![vec![Cell::Usd(Some(Nanos(-70_000_000))), Cell::Rate(None)]],
            columns: vec!["total_cost", "cost_per_inference"],
            // $1,234.5678914 rounds once to 1234.567891; 1.23456789e-5 per inference to 12 decimals.
            rows: vec![vec![Cell::Usd(Some(Nanos(1_234_567_891_400))), Cell::Rate(Some(1.23456789e-5))]],
        };
        let mut extra = Extras::default();
        extra.usd("kubernetes_total", 1_234_567_891_400);
        let page = table.json("2026-10", extra.to_map(MoneyJson::Decimal), MoneyJson::Decimal);
        assert_eq!(page["rows"][0]["total_cost"], "1234.567891");
        assert_eq!(page["rows"][0]["cost_per_inference"], "0.000012345679");
        assert_eq!(page["totals"][0]["total_cost"], "-0.070000");
        assert_eq!(page["totals"][0]["cost_per_inference"], Value::Null);
        assert_eq!(page["kubernetes_total"], "1234.567891");
        let script = table.json("2026-10", extra.to_map(MoneyJson::Number), MoneyJson::Number);
        assert_eq!(script["rows"][0]["total_cost"], 1234.567891);
        assert_eq!(script["rows"][0]["cost_per_inference"], 0.000012345679);
        assert_eq!(script["kubernetes_total"], 1234.567891);
    }

    #[test]
    fn xlsx_keeps_numbers_as_numbers_and_text_as_text() {
        use std::io::Read;
        let table = Table {
            title: "t".into(),
            totals: Vec::new(),
            columns: vec!["namespace", "total_cost", "utilization"],
            rows: vec![vec![
                Cell::Text("=HYPERLINK(\"x\")".into()),
                // Rounded to the micro-dollar like CSV: 1234.5678914 → 1234.567891.
                Cell::Usd(Some(Nanos(1_234_567_891_400))),
                Cell::Ratio(None),
            ]],
        };
        let bytes = table
            .xlsx("costs", &["Costs, 2026-10".into(), "Data as of 2026-11-01 06:00 UTC".into()])
            .unwrap();
        let mut archive = zip::ZipArchive::new(std::io::Cursor::new(bytes)).unwrap();
        let mut sheet = String::new();
        archive.by_name("xl/worksheets/sheet1.xml").unwrap().read_to_string(&mut sheet).unwrap();
        assert!(sheet.contains("<v>1234.567891</v>"), "{sheet}");
        assert!(!sheet.contains("<f>"), "text never becomes a formula: {sheet}");
        // Two heading lines and a blank row: the header is row 4, the first row 5.
        assert!(sheet.contains("<c r=\"B5\""), "{sheet}");
        assert!(!sheet.contains("r=\"C5\""), "an undefined ratio is an empty cell: {sheet}");
        assert!(
            sheet.contains("<pane ySplit=\"4\" topLeftCell=\"A5\""),
            "the header row stays in view: {sheet}"
        );
        assert!(sheet.contains("<autoFilter ref=\"A4:C5\"/>"), "{sheet}");
        let mut workbook = String::new();
        archive.by_name("xl/workbook.xml").unwrap().read_to_string(&mut workbook).unwrap();
        assert!(workbook.contains("name=\"costs\""), "{workbook}");
    }
}
