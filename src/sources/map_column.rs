//! Map columns (the CUR's `resource_tags` and `product`, FOCUS's `Tags`) read from Parquet
//! without building them.
//!
//! polars decodes a map column into a list of key/value structs: every entry of every row
//! becomes two string views. On a churny month that was a third of the ingest's reading
//! time, though the ingest looks at a row's tags only when it meets a new pod, instance or
//! other line: a few rows in a hundred. Here a row group's map column is read once into
//! dictionary ids (its levels walked, its string dictionary kept), and a row's pairs are
//! looked up only when asked for.
//!
//! The Parquet encodings AWS and our generator write are handled: dictionary pages, RLE
//! dictionary data pages and PLAIN fallback pages, v1 and v2 data pages, a `MAP` or a
//! `list<struct<key,value>>`. Anything else is refused with [`Unsupported`]; the reader then
//! lets polars decode that row group's column as before.

use std::borrow::Cow;
use std::fs::File;
use std::io::Cursor;
use std::os::unix::fs::FileExt;

use polars_parquet::parquet::encoding::Encoding;
use polars_parquet::parquet::encoding::hybrid_rle::HybridRleDecoder;
use polars_parquet::parquet::metadata::{ColumnChunkMetadata, RowGroupMetadata};
use polars_parquet::parquet::page::{DataPage, split_buffer};
use polars_parquet::parquet::read::{BasicDecompressor, PageMetaData, PageReader};
use polars_parquet::parquet::schema::Repetition;
use polars_parquet::parquet::schema::types::PhysicalType;

/// Why a column chunk was not read here (polars reads it instead).
#[derive(Debug)]
pub struct Unsupported(pub String);

fn unsupported(message: impl std::fmt::Display) -> Unsupported {
    Unsupported(message.to_string())
}

impl<E: std::error::Error> From<E> for Unsupported {
    fn from(error: E) -> Unsupported {
        unsupported(error)
    }
}

/// The value id of an absent (null) key or value.
const ABSENT: u32 = u32::MAX;

/// One row group's map column: each row's entries as ids into two string tables.
pub struct MapChunk {
    /// Where each row's entries start; one more than the rows.
    starts: Vec<u32>,
    keys: Vec<u32>,
    values: Vec<u32>,
    key_strings: Strings,
    value_strings: Strings,
    /// Data pages read of each encoding (dictionary ids, PLAIN text), both fields.
    pub pages: (usize, usize),
}

impl MapChunk {
    /// Reads `column`'s map of one row group from `file`.
    pub fn read(file: &File, group: &RowGroupMetadata, column: &str) -> Result<MapChunk, Unsupported> {
        let leaves: Vec<&ColumnChunkMetadata> = group
            .columns_under_root_iter(column)
            .ok_or_else(|| unsupported(format!("no column {column}")))?
            .collect();
        let leaf = |name: &str| {
            leaves
                .iter()
                .copied()
                .find(|c| c.descriptor().path_in_schema.last().is_some_and(|p| p.as_str() == name))
                .ok_or_else(|| unsupported(format!("{column} has no {name} field")))
        };
        if leaves.len() != 2 {
            return Err(unsupported(format!(
                "{column} has {} leaf columns, not a key and a value",
                leaves.len()
            )));
        }
        let (keys, starts) = read_leaf(file, leaf("key")?, true)?;
        let (values, _) = read_leaf(file, leaf("value")?, false)?;
        if keys.ids.len() != values.ids.len() {
            return Err(unsupported(format!(
                "{column}: {} keys but {} values",
                keys.ids.len(),
                values.ids.len()
            )));
        }
        if starts.len() != group.num_rows() + 1 {
            return Err(unsupported(format!(
                "{column}: {} rows in the levels, {} in the row group",
                starts.len().saturating_sub(1),
                group.num_rows()
            )));
        }
        Ok(MapChunk {
            starts,
            keys: keys.ids,
            values: values.ids,
            key_strings: keys.strings,
            value_strings: values.strings,
            pages: (keys.pages.0 + values.pages.0, keys.pages.1 + values.pages.1),
        })
    }

    /// The pairs of row `row` (of the row group); absent keys and values are empty.
    pub fn pairs(&self, row: usize) -> Result<super::columns::Pairs<'_>, std::str::Utf8Error> {
        let (start, end) = (self.starts[row] as usize, self.starts[row + 1] as usize);
        (start..end)
            .map(|i| {
                Ok((
                    Cow::Borrowed(self.key_strings.text(self.keys[i])?),
                    Cow::Borrowed(self.value_strings.text(self.values[i])?),
                ))
            })
            .collect()
    }
}

/// Byte strings back to back; string `i` ends at `ends[i]`.
#[derive(Default)]
struct Strings {
    bytes: Vec<u8>,
    ends: Vec<u32>,
}

impl Strings {
    fn len(&self) -> usize {
        self.ends.len()
    }

    fn push(&mut self, text: &[u8]) -> Result<u32, Unsupported> {
        self.bytes.extend_from_slice(text);
        let end = u32::try_from(self.bytes.len()).map_err(|_| unsupported("over 4 GiB of map text"))?;
        self.ends.push(end);
        Ok(self.ends.len() as u32 - 1)
    }

    /// Appends the `count` PLAIN-encoded byte arrays of `data` (each a little-endian u32
    /// length, then the bytes); returns their ids.
    fn push_plain(&mut self, mut data: &[u8], count: usize, ids: &mut Vec<u32>) -> Result<(), Unsupported> {
        for _ in 0..count {
            let (length, rest) = data
                .split_first_chunk::<4>()
                .ok_or_else(|| unsupported("a PLAIN string runs past its page"))?;
            let length = u32::from_le_bytes(*length) as usize;
            if rest.len() < length {
                return Err(unsupported("a PLAIN string runs past its page"));
            }
            ids.push(self.push(&rest[..length])?);
            data = &rest[length..];
        }
        Ok(())
    }

    fn text(&self, id: u32) -> Result<&str, std::str::Utf8Error> {
        if id == ABSENT {
            return Ok("");
        }
        let end = self.ends[id as usize] as usize;
        let start = if id == 0 { 0 } else { self.ends[id as usize - 1] as usize };
        std::str::from_utf8(&self.bytes[start..end])
    }
}

/// A leaf's entries: the id of each entry's text ([`ABSENT`] for null), in entry order.
struct Leaf {
    ids: Vec<u32>,
    strings: Strings,
    pages: (usize, usize),
}

/// Bits of a level of at most `max`.
fn level_bits(max: u16) -> u32 {
    u16::BITS - max.leading_zeros()
}

/// Reads one leaf (`key` or `value`) of a map column chunk: its entries' ids and, with
/// `rows`, where each row's entries start.
fn read_leaf(file: &File, column: &ColumnChunkMetadata, rows: bool) -> Result<(Leaf, Vec<u32>), Unsupported> {
    let descriptor = &column.descriptor().descriptor;
    if column.physical_type() != PhysicalType::ByteArray {
        return Err(unsupported("a map field that is not text"));
    }
    let (max_def, max_rep) = (descriptor.max_def_level as u16, descriptor.max_rep_level as u16);
    if max_rep != 1 || max_def < 1 {
        return Err(unsupported(format!("levels rep {max_rep}, def {max_def}: not a flat map")));
    }
    // An entry exists from the level of the group that holds the field (one below the
    // field's own level when the field is optional).
    let entry_def =
        max_def - u16::from(descriptor.primitive_type.field_info.repetition == Repetition::Optional);
    let range = column.byte_range();
    let mut bytes = vec![0; (range.end - range.start) as usize];
    file.read_exact_at(&mut bytes, range.start)?;
    let meta = PageMetaData::new(0, column.num_values(), column.compression(), descriptor.clone());
    let reader = PageReader::new_with_page_meta(Cursor::new(bytes.into()), meta, Vec::new(), usize::MAX);
    let mut pages = BasicDecompressor::new(reader, Vec::new());
    let mut strings = Strings::default();
    let mut dictionary = Vec::new();
    if let Some(page) = pages.read_dict_page()? {
        strings.push_plain(&page.buffer, page.num_values, &mut dictionary)?;
    }
    let dictionary_len = strings.len() as u32;
    // At most one entry per level slot (as the metadata counts them; capped, should it lie).
    let mut leaf_ids = Vec::with_capacity(usize::try_from(column.num_values()).unwrap_or(0).min(1 << 26));
    let mut starts = Vec::new();
    let (mut reps, mut defs, mut page_ids) = (Vec::new(), Vec::new(), Vec::new());
    let mut pages_read = (0, 0);
    while let Some(item) = pages.next() {
        let page: DataPage = item?.decompress(&mut pages)?;
        if page.definition_level_encoding() != Encoding::Rle
            || page.repetition_level_encoding() != Encoding::Rle
        {
            return Err(unsupported("levels not RLE-encoded"));
        }
        let slots = page.num_values();
        let split = split_buffer(&page)?;
        reps.clear();
        defs.clear();
        decode_levels(split.rep, level_bits(max_rep), slots, &mut reps)?;
        decode_levels(split.def, level_bits(max_def), slots, &mut defs)?;
        let present = defs.iter().filter(|&&d| d == u32::from(max_def)).count();
        page_ids.clear();
        match page.encoding() {
            _ if present == 0 => {}
            Encoding::RleDictionary | Encoding::PlainDictionary => {
                let (&width, indices) = split
                    .values
                    .split_first()
                    .ok_or_else(|| unsupported("a dictionary page without indices"))?;
                decode_levels(indices, u32::from(width), present, &mut page_ids)?;
                pages_read.0 += 1;
                if page_ids.iter().any(|&id| id >= dictionary_len) {
                    return Err(unsupported("a dictionary index past the dictionary"));
                }
            }
            Encoding::Plain => {
                strings.push_plain(split.values, present, &mut page_ids)?;
                pages_read.1 += 1;
            }
            other => return Err(unsupported(format!("map text encoded {other:?}"))),
        }
        let mut next = page_ids.iter();
        for (&rep, &def) in reps.iter().zip(&defs) {
            if rows && rep == 0 {
                starts.push(leaf_ids.len() as u32);
            }
            if def < u32::from(entry_def) {
                continue;
            }
            leaf_ids.push(if def == u32::from(max_def) {
                *next.next().ok_or_else(|| unsupported("fewer values than levels"))?
            } else {
                ABSENT
            });
        }
        pages.reuse_page_buffer(page);
    }
    if rows {
        starts.push(leaf_ids.len() as u32);
    }
    if leaf_ids.len() > u32::MAX as usize - 1 {
        return Err(unsupported("over 4 billion map entries in a row group"));
    }
    Ok((Leaf { ids: leaf_ids, strings, pages: pages_read }, starts))
}

/// Decodes `count` RLE/bit-packed hybrid values of `bits` bits into `into` (appended).
fn decode_levels(data: &[u8], bits: u32, count: usize, into: &mut Vec<u32>) -> Result<(), Unsupported> {
    let before = into.len();
    if bits == 0 {
        into.resize(before + count, 0);
        return Ok(());
    }
    let decoded = HybridRleDecoder::new(data, bits, count).collect()?;
    if decoded.len() != count {
        return Err(unsupported(format!("{} of {count} levels or indices decoded", decoded.len())));
    }
    into.extend_from_slice(&decoded);
    Ok(())
}
