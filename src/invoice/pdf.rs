//! A document as PDF, rendered in-process: A4, seller and buyer blocks, the number, dates
//! and period, the line table (its header repeated on every page), totals and notes, and
//! "number · page i of n" at the foot of each page. The text is DejaVu Sans (Bitstream Vera
//! licence, `assets/fonts`), embedded as a subset of the glyphs used with a ToUnicode map,
//! so the PDF looks the same everywhere and its text can be searched and copied.
//!
//! The same document renders to the same bytes: nothing in the PDF depends on the time of
//! rendering.

use std::collections::BTreeMap;
use std::io::Write;

use pdf_writer::types::{CidFontType, FontFlags, SystemInfo, UnicodeCmap};
use pdf_writer::{Content, Filter, Finish, Name, Pdf, Rect, Ref, Str, TextStr};

use super::{Invoice, Kind};

const REGULAR: &[u8] = include_bytes!("../../assets/fonts/DejaVuSans.ttf");
const BOLD: &[u8] = include_bytes!("../../assets/fonts/DejaVuSans-Bold.ttf");

/// A4 in points.
const WIDTH: f32 = 595.0;
const HEIGHT: f32 = 842.0;
const LEFT: f32 = 50.0;
const RIGHT: f32 = WIDTH - 50.0;
/// Below this the page is full; the foot sits under it.
const BOTTOM: f32 = 70.0;

/// Table columns: description from the left edge (wrapped to its width), the numbers
/// right-aligned at their right edges, the unit from its left edge.
const DESCRIPTION_WIDTH: f32 = 245.0;
const QUANTITY_RIGHT: f32 = 360.0;
const UNIT_LEFT: f32 = 368.0;
const PRICE_RIGHT: f32 = 465.0;
const AMOUNT_RIGHT: f32 = RIGHT;

/// One embedded font: its face, and the glyphs used so far (subset ids, in order of use).
struct Font {
    data: &'static [u8],
    face: ttf_parser::Face<'static>,
    remapper: subsetter::GlyphRemapper,
    /// Subset glyph id → (the character it shows, its advance in 1/1000 em).
    used: BTreeMap<u16, (char, f32)>,
    resource: &'static [u8],
    base_name: &'static [u8],
}

impl Font {
    fn new(data: &'static [u8], resource: &'static [u8], base_name: &'static [u8]) -> Result<Font, String> {
        let face = ttf_parser::Face::parse(data, 0).map_err(|e| format!("the embedded font: {e}"))?;
        Ok(Font {
            data,
            face,
            remapper: subsetter::GlyphRemapper::new(),
            used: BTreeMap::new(),
            resource,
            base_name,
        })
    }

    fn glyph(&self, c: char) -> ttf_parser::GlyphId {
        self.face.glyph_index(c).or_else(|| self.face.glyph_index('?')).unwrap_or(ttf_parser::GlyphId(0))
    }

    /// Advance of `glyph` in 1/1000 em.
    fn advance(&self, glyph: ttf_parser::GlyphId) -> f32 {
        let units = f32::from(self.face.glyph_hor_advance(glyph).unwrap_or(0));
        units * 1000.0 / f32::from(self.face.units_per_em())
    }

    /// Width of `text` at `size` points.
    fn width(&self, text: &str, size: f32) -> f32 {
        text.chars().map(|c| self.advance(self.glyph(c))).sum::<f32>() * size / 1000.0
    }

    /// `text` as two-byte codes of subset glyph ids (Identity-H), noting the glyphs used.
    fn encode(&mut self, text: &str) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(text.len() * 2);
        for c in text.chars() {
            let glyph = self.glyph(c);
            let id = self.remapper.remap(glyph.0);
            let advance = self.advance(glyph);
            self.used.entry(id).or_insert((c, advance));
            bytes.extend_from_slice(&id.to_be_bytes());
        }
        bytes
    }

    /// Writes the Type 0 font, its CID font, descriptor, subset font file and ToUnicode map.
    fn write(&self, pdf: &mut Pdf, ids: &mut impl FnMut() -> Ref, type0: Ref) -> Result<(), String> {
        let (cid, descriptor, file, cmap) = (ids(), ids(), ids(), ids());
        let system_info = SystemInfo { registry: Str(b"Adobe"), ordering: Str(b"Identity"), supplement: 0 };
        pdf.type0_font(type0)
            .base_font(Name(self.base_name))
            .encoding_predefined(Name(b"Identity-H"))
            .descendant_font(cid)
            .to_unicode(cmap);
        let mut cid_font = pdf.cid_font(cid);
        cid_font.subtype(CidFontType::Type2).base_font(Name(self.base_name)).system_info(system_info);
        cid_font.font_descriptor(descriptor).default_width(0.0).cid_to_gid_map_predefined(Name(b"Identity"));
        let count = self.remapper.num_gids();
        let widths: Vec<f32> = (0..count).map(|id| self.used.get(&id).map_or(0.0, |(_, w)| *w)).collect();
        cid_font.widths().consecutive(0, widths);
        cid_font.finish();
        let scale = |v: i16| f32::from(v) * 1000.0 / f32::from(self.face.units_per_em());
        let bbox = self.face.global_bounding_box();
        pdf.font_descriptor(descriptor)
            .name(Name(self.base_name))
            .flags(FontFlags::NON_SYMBOLIC)
            .bbox(Rect::new(scale(bbox.x_min), scale(bbox.y_min), scale(bbox.x_max), scale(bbox.y_max)))
            .italic_angle(0.0)
            .ascent(scale(self.face.ascender()))
            .descent(scale(self.face.descender()))
            .cap_height(scale(self.face.capital_height().unwrap_or(self.face.ascender())))
            .stem_v(80.0)
            .font_file2(file);
        let subset = subsetter::subset(self.data, 0, &self.remapper)
            .map_err(|e| format!("subsetting the font: {e}"))?;
        pdf.stream(file, &deflate(&subset))
            .filter(Filter::FlateDecode)
            .pair(Name(b"Length1"), subset.len() as i32);
        let mut unicode = UnicodeCmap::new(Name(b"Custom"), system_info);
        for (id, (c, _)) in &self.used {
            unicode.pair(*id, *c);
        }
        pdf.cmap(cmap, &unicode.finish()).name(Name(b"Custom")).system_info(system_info);
        Ok(())
    }
}

fn deflate(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(bytes).expect("writing to memory");
    encoder.finish().expect("writing to memory")
}

/// Pages being laid out, top to bottom.
struct Layout {
    fonts: [Font; 2],
    pages: Vec<Content>,
    y: f32,
}

/// Which table a page break falls in (its header is repeated on the new page).
#[derive(Clone, Copy, PartialEq, Eq)]
enum InTable {
    None,
    Lines,
    Detail,
}

/// The detail table's class column.
const DETAIL_CLASS_LEFT: f32 = 330.0;

const REGULAR_FONT: usize = 0;
const BOLD_FONT: usize = 1;

impl Layout {
    fn text(&mut self, font: usize, size: f32, x: f32, y: f32, text: &str) {
        let bytes = self.fonts[font].encode(text);
        let page = self.pages.last_mut().expect("a page");
        page.begin_text();
        page.set_font(Name(self.fonts[font].resource), size);
        page.next_line(x, y);
        page.show(Str(&bytes));
        page.end_text();
    }

    fn text_right(&mut self, font: usize, size: f32, right: f32, y: f32, text: &str) {
        let width = self.fonts[font].width(text, size);
        self.text(font, size, right - width, y, text);
    }

    fn rule(&mut self, y: f32, gray: f32) {
        let page = self.pages.last_mut().expect("a page");
        page.set_stroke_rgb(gray, gray, gray);
        page.set_line_width(0.6);
        page.move_to(LEFT, y);
        page.line_to(RIGHT, y);
        page.stroke();
    }

    /// `text` broken at spaces into lines no wider than `width`.
    fn wrap(&self, font: usize, size: f32, width: f32, text: &str) -> Vec<String> {
        let mut lines = vec![String::new()];
        for word in text.split(' ') {
            let last = lines.last_mut().expect("a line");
            let candidate = if last.is_empty() { word.to_string() } else { format!("{last} {word}") };
            if self.fonts[font].width(&candidate, size) <= width || last.is_empty() {
                *last = candidate;
            } else {
                lines.push(word.to_string());
            }
        }
        lines
    }

    fn new_page(&mut self) {
        self.pages.push(Content::new());
        self.y = HEIGHT - 60.0;
    }

    /// The line table's header, at the current position.
    fn table_header(&mut self) {
        let y = self.y;
        self.text(BOLD_FONT, 9.0, LEFT, y, "Description");
        self.text_right(BOLD_FONT, 9.0, QUANTITY_RIGHT, y, "Quantity");
        self.text(BOLD_FONT, 9.0, UNIT_LEFT, y, "Unit");
        self.text_right(BOLD_FONT, 9.0, PRICE_RIGHT, y, "Unit price");
        self.text_right(BOLD_FONT, 9.0, AMOUNT_RIGHT, y, "Amount");
        self.rule(y - 5.0, 0.2);
        self.y -= 20.0;
    }

    /// The workload detail's header, at the current position.
    fn detail_header(&mut self) {
        let y = self.y;
        self.text(BOLD_FONT, 9.0, LEFT, y, "Namespace / workload");
        self.text(BOLD_FONT, 9.0, DETAIL_CLASS_LEFT, y, "Class");
        self.text_right(BOLD_FONT, 9.0, PRICE_RIGHT, y, "GPU-hours");
        self.text_right(BOLD_FONT, 9.0, AMOUNT_RIGHT, y, "Amount");
        self.rule(y - 5.0, 0.2);
        self.y -= 20.0;
    }

    /// Starts a new page (with the header of the table in progress again) unless `height`
    /// more fits.
    fn room_for(&mut self, height: f32, table: InTable) {
        if self.y - height < BOTTOM {
            self.new_page();
            if table != InTable::None {
                self.text(REGULAR_FONT, 8.0, LEFT, self.y + 18.0, "(continued)");
            }
            match table {
                InTable::Lines => self.table_header(),
                InTable::Detail => self.detail_header(),
                InTable::None => {}
            }
        }
    }
}

/// The PDF of `invoice`.
pub fn render(invoice: &Invoice) -> Result<Vec<u8>, String> {
    let fonts = [
        Font::new(REGULAR, b"F1", b"GLAAAA+DejaVuSans")?,
        Font::new(BOLD, b"F2", b"GLAAAB+DejaVuSans-Bold")?,
    ];
    let mut layout = Layout { fonts, pages: Vec::new(), y: 0.0 };
    layout.new_page();
    head(&mut layout, invoice);
    layout.table_header();
    for line in &invoice.lines {
        let description = layout.wrap(REGULAR_FONT, 9.0, DESCRIPTION_WIDTH, &line.description);
        layout.room_for(13.0 * description.len() as f32 + 4.0, InTable::Lines);
        let y = layout.y;
        for (i, text) in description.iter().enumerate() {
            layout.text(REGULAR_FONT, 9.0, LEFT, y - 13.0 * i as f32, text);
        }
        if let Some(quantity) = line.quantity {
            layout.text_right(
                REGULAR_FONT,
                9.0,
                QUANTITY_RIGHT,
                y,
                &crate::report::table::thousands(quantity, 2),
            );
        }
        if let Some(unit) = &line.unit {
            layout.text(REGULAR_FONT, 9.0, UNIT_LEFT, y, unit);
        }
        if let Some(price) = &line.unit_price {
            layout.text_right(REGULAR_FONT, 9.0, PRICE_RIGHT, y, price);
        }
        layout.text_right(REGULAR_FONT, 9.0, AMOUNT_RIGHT, y, &line.amount.decimal());
        layout.y -= 13.0 * description.len() as f32 + 4.0;
    }
    layout.room_for(80.0, InTable::None);
    layout.rule(layout.y + 8.0, 0.2);
    let currency = invoice.currency.clone();
    let totals = [
        ("Subtotal", invoice.subtotal, REGULAR_FONT),
        ("Markup", invoice.markup, REGULAR_FONT),
        ("Tax", invoice.tax, REGULAR_FONT),
        ("Total", invoice.total, BOLD_FONT),
    ];
    // A markup stands on documents issued before it was folded into the prices.
    for (label, amount, font) in
        totals.into_iter().filter(|(label, amount, _)| *label != "Markup" || amount.0 != 0)
    {
        let y = layout.y - 6.0;
        let label = if label == "Total" { format!("Total ({currency})") } else { label.to_string() };
        layout.text_right(font, 10.0, PRICE_RIGHT, y, &label);
        layout.text_right(font, 10.0, AMOUNT_RIGHT, y, &amount.decimal());
        layout.y -= 16.0;
    }
    layout.y -= 16.0;
    for note in invoice.notes() {
        for text in layout.wrap(REGULAR_FONT, 8.0, RIGHT - LEFT, &note) {
            layout.room_for(12.0, InTable::None);
            let y = layout.y;
            layout.text(REGULAR_FONT, 8.0, LEFT, y, &text);
            layout.y -= 11.0;
        }
    }
    if !invoice.detail.is_empty() {
        detail(&mut layout, invoice);
    }
    foot(&mut layout, invoice);
    write(layout, invoice)
}

/// The appendix: the pod lines by workload, adding up to them.
fn detail(layout: &mut Layout, invoice: &Invoice) {
    layout.room_for(70.0, InTable::None);
    layout.y -= 14.0;
    let y = layout.y;
    layout.text(BOLD_FONT, 11.0, LEFT, y, "Detail: the pods' cost by workload");
    layout.y -= 14.0;
    let y = layout.y;
    let total: crate::money::Cents = invoice.detail.iter().map(|r| r.amount).sum();
    let caption =
        format!("These rows add up to the GPU compute and CPU and memory lines above: {}.", total.decimal());
    layout.text(REGULAR_FONT, 8.0, LEFT, y, &caption);
    layout.y -= 20.0;
    layout.detail_header();
    for row in &invoice.detail {
        let name = layout.wrap(
            REGULAR_FONT,
            9.0,
            DETAIL_CLASS_LEFT - LEFT - 8.0,
            &format!("{} / {}", row.namespace, row.workload),
        );
        layout.room_for(13.0 * name.len() as f32 + 4.0, InTable::Detail);
        let y = layout.y;
        for (i, text) in name.iter().enumerate() {
            layout.text(REGULAR_FONT, 9.0, LEFT, y - 13.0 * i as f32, text);
        }
        layout.text(REGULAR_FONT, 9.0, DETAIL_CLASS_LEFT, y, &row.workload_class);
        layout.text_right(REGULAR_FONT, 9.0, PRICE_RIGHT, y, &format!("{:.2}", row.gpu_hours));
        layout.text_right(REGULAR_FONT, 9.0, AMOUNT_RIGHT, y, &row.amount.decimal());
        layout.y -= 13.0 * name.len() as f32 + 4.0;
    }
}

/// Title, seller, buyer, number and dates.
fn head(layout: &mut Layout, invoice: &Invoice) {
    let top = layout.y;
    let seller = &invoice.seller;
    let seller_name = if seller.name.is_empty() { "gpuledger" } else { &seller.name };
    layout.text(BOLD_FONT, 14.0, LEFT, top, seller_name);
    let mut y = top - 15.0;
    let seller_lines = seller.address.lines().map(str::to_string).chain(
        [
            (!seller.tax_id.is_empty()).then(|| format!("Tax id {}", seller.tax_id)),
            (!seller.email.is_empty()).then(|| seller.email.clone()),
        ]
        .into_iter()
        .flatten(),
    );
    for text in seller_lines.collect::<Vec<_>>() {
        layout.text(REGULAR_FONT, 9.0, LEFT, y, &text);
        y -= 12.0;
    }
    let title = match (invoice.kind, invoice.number.is_empty()) {
        (Kind::Invoice, true) => "DRAFT invoice".to_string(),
        (kind, _) => kind.title().to_string(),
    };
    layout.text_right(BOLD_FONT, 18.0, RIGHT, top, &title);
    let facts = [
        (
            "Number",
            if invoice.number.is_empty() { "(not issued)".to_string() } else { invoice.number.clone() },
        ),
        // Dates as people write them (`27 Nov 2026`, `Oct 2026`); the JSON and CSV keep ISO.
        ("Issued", invoice.issued_at.as_deref().map_or_else(|| "-".into(), people)),
        ("Due", invoice.due_at.as_deref().map_or_else(|| "-".into(), people)),
        ("Billing period", people(&invoice.period)),
        ("Refers to", invoice.refers_to.clone().unwrap_or_default()),
        ("PO number", invoice.buyer.po_number.clone()),
    ];
    let mut facts_y = top - 22.0;
    for (label, value) in facts.into_iter().filter(|(_, v)| !v.is_empty()) {
        layout.text_right(REGULAR_FONT, 9.0, RIGHT - 120.0, facts_y, label);
        layout.text_right(BOLD_FONT, 9.0, RIGHT, facts_y, &value);
        facts_y -= 12.0;
    }
    y = y.min(facts_y) - 18.0;
    layout.text(BOLD_FONT, 9.0, LEFT, y, "Bill to");
    y -= 13.0;
    let buyer = &invoice.buyer;
    let name = if buyer.legal_name.is_empty() { invoice.client.clone() } else { buyer.legal_name.clone() };
    let buyer_lines = std::iter::once(name)
        .chain(buyer.address.lines().map(str::to_string))
        .chain((!buyer.tax_id.is_empty()).then(|| format!("Tax id {}", buyer.tax_id)))
        .chain(std::iter::once(format!("Client {}", invoice.client)));
    for text in buyer_lines.collect::<Vec<_>>() {
        layout.text(REGULAR_FONT, 10.0, LEFT, y, &text);
        y -= 13.0;
    }
    layout.y = y - 20.0;
}

/// "number · page i of n" under every page.
fn foot(layout: &mut Layout, invoice: &Invoice) {
    let count = layout.pages.len();
    let number = if invoice.number.is_empty() { "Draft".to_string() } else { invoice.number.clone() };
    for index in 0..count {
        let text = format!("{number} · {} · page {} of {count}", invoice.client, index + 1);
        let bytes = layout.fonts[REGULAR_FONT].encode(&text);
        let width = layout.fonts[REGULAR_FONT].width(&text, 8.0);
        let page = &mut layout.pages[index];
        page.set_fill_rgb(0.35, 0.35, 0.35);
        page.begin_text();
        page.set_font(Name(b"F1"), 8.0);
        page.next_line(RIGHT - width, 40.0);
        page.show(Str(&bytes));
        page.end_text();
    }
}

/// The catalog, the pages and the fonts.
fn write(layout: Layout, invoice: &Invoice) -> Result<Vec<u8>, String> {
    let mut next = 0;
    let mut ids = || {
        next += 1;
        Ref::new(next)
    };
    let (catalog, tree, info) = (ids(), ids(), ids());
    let font_ids = [ids(), ids()];
    let page_ids: Vec<(Ref, Ref)> = layout.pages.iter().map(|_| (ids(), ids())).collect();
    let mut pdf = Pdf::new();
    pdf.catalog(catalog).pages(tree);
    pdf.pages(tree).kids(page_ids.iter().map(|(page, _)| *page)).count(page_ids.len() as i32);
    let title = format!(
        "{} {} {} {}",
        invoice.kind.title(),
        if invoice.number.is_empty() { "draft" } else { &invoice.number },
        invoice.client,
        invoice.period
    );
    pdf.document_info(info).title(TextStr(&title)).producer(TextStr("gpuledger"));
    for ((page_id, content_id), content) in page_ids.iter().zip(layout.pages) {
        let mut page = pdf.page(*page_id);
        page.media_box(Rect::new(0.0, 0.0, WIDTH, HEIGHT)).parent(tree).contents(*content_id);
        let mut resources = page.resources();
        let mut fonts = resources.fonts();
        for (font, id) in layout.fonts.iter().zip(font_ids) {
            fonts.pair(Name(font.resource), id);
        }
        fonts.finish();
        resources.finish();
        page.finish();
        pdf.stream(*content_id, &deflate(&content.finish())).filter(Filter::FlateDecode);
    }
    for (font, id) in layout.fonts.iter().zip(font_ids) {
        font.write(&mut pdf, &mut ids, id)?;
    }
    Ok(pdf.finish())
}

/// A date or month in words, as printed on the document; anything else as it is.
fn people(text: &str) -> String {
    crate::period::human::text(text).unwrap_or_else(|| text.to_string())
}
