//! Row identity: no row of a delivery counted twice.
//!
//! Comparing whole files finds a copy, but not the same rows in other bytes: a data file
//! rewritten with another compression and listed beside the original, a `.csv` beside its
//! `.csv.gz`, one row repeated inside a file. Each row read gets an identity, 96 bits of
//! XXH3-128 over the values that tell two lines of a bill apart (what each source hashes is
//! said where it builds its [`RowKey`]), kept with the row's number in its delivery (32 bits)
//! in one `u128`. A row equal to the row before it is refused at once (a file of one row
//! repeated millions of times stops at its second row); the others are compared once the
//! delivery is read: the identities, kept in one list as they are read, are sorted in two
//! halves on two threads and walked side by side, so equal identities meet. A delivery of 10
//! million rows holds 160 MB of them.
//!
//! Two different rows share 96 bits of XXH3-128 with a probability of about n²/2⁹⁷: 6·10⁻¹⁶ for
//! a month of 10 million rows.

use super::cur::{CurError, invalid};

/// The bytes a row is identified by, built value by value and hashed once.
#[derive(Default)]
pub struct RowKey {
    bytes: Vec<u8>,
}

impl RowKey {
    pub fn clear(&mut self) -> &mut RowKey {
        self.bytes.clear();
        self
    }

    /// A text, after its length (so `"ab", "c"` and `"a", "bc"` differ).
    pub fn text(&mut self, text: &str) -> &mut RowKey {
        self.bytes.extend_from_slice(&(text.len() as u32).to_le_bytes());
        self.bytes.extend_from_slice(text.as_bytes());
        self
    }

    pub fn int(&mut self, value: i64) -> &mut RowKey {
        self.bytes.extend_from_slice(&value.to_le_bytes());
        self
    }

    /// A number by its value: `-0.0` is `0.0`, and a missing one differs from every number.
    pub fn number(&mut self, value: Option<f64>) -> &mut RowKey {
        match value {
            None => self.bytes.push(0),
            Some(value) => {
                self.bytes.push(1);
                let value = if value == 0.0 { 0.0 } else { value };
                self.bytes.extend_from_slice(&value.to_bits().to_le_bytes());
            }
        }
        self
    }

    /// The identity: the hash's first 96 bits, the row's number left out (zero).
    pub fn identity(&self) -> u128 {
        xxhash_rust::xxh3::xxh3_128(&self.bytes) & !u128::from(u32::MAX)
    }
}

/// The identities of one delivery's rows (or of one file's, added to the delivery's later).
#[derive(Debug, Default)]
pub struct RowIdentities {
    /// Each row's identity with its number in the delivery in the low 32 bits.
    entries: Vec<u128>,
    /// Each file: where it is (for messages) and the number of its first row in the delivery.
    files: Vec<(String, u64)>,
    /// Rows numbered so far.
    rows: u64,
    /// The last row's identity and number, for the repeated row caught at once.
    last: Option<(u128, u64)>,
}

impl RowIdentities {
    /// The rows that follow are `location`'s, counted from its first.
    pub fn begin_file(&mut self, location: &str) {
        self.files.push((location.to_string(), self.rows));
        self.last = None;
    }

    /// Adds the next row of the current file, `row` counted from 0 in its file (rows must come
    /// in order, each once). A row equal to the one just before it is refused here.
    pub fn add(&mut self, identity: u128, row: usize) -> Result<(), CurError> {
        let start = self.files.last().map_or(0, |(_, start)| *start);
        let number = start + row as u64;
        if number > u64::from(u32::MAX) {
            return Err(too_many(self.files.last().map_or("", |(location, _)| location.as_str())));
        }
        if let Some((last, last_number)) = self.last
            && last == identity
        {
            return Err(self.repeated(last_number, number));
        }
        self.last = Some((identity, number));
        self.rows = self.rows.max(number + 1);
        self.entries.push(identity | u128::from(number as u32));
        Ok(())
    }

    /// Adds another reading's identities (read apart, one file or more), as the files after
    /// this one's.
    pub fn append(&mut self, other: RowIdentities) -> Result<(), CurError> {
        let offset = self.rows;
        if offset + other.rows > u64::from(u32::MAX) + 1 {
            return Err(too_many(other.files.first().map_or("", |(location, _)| location.as_str())));
        }
        for (location, start) in other.files {
            self.files.push((location, start + offset));
        }
        self.entries.extend(other.entries.into_iter().map(|entry| entry + u128::from(offset as u32)));
        self.rows += other.rows;
        self.last = None;
        Ok(())
    }

    /// Refuses the delivery if two of its rows are the same, naming both (the first repeat
    /// in the delivery's order). Frees the identities.
    pub fn check(&mut self) -> Result<(), CurError> {
        let mut entries = std::mem::take(&mut self.entries);
        let half = entries.len() / 2;
        let (left, right) = entries.split_at_mut(half);
        std::thread::scope(|scope| {
            scope.spawn(|| left.sort_unstable());
            right.sort_unstable();
        });
        let (left, right) = entries.split_at(half);
        match first_repeat(left, right) {
            // The earliest place of that row: a row may be held three times.
            Some((first, repeat)) => Err(self.repeated(first, repeat)),
            None => Ok(()),
        }
    }

    /// The file and its data row (counted from 1) of a row's number in the delivery.
    fn place(&self, number: u64) -> (&str, u64) {
        let index = self.files.partition_point(|(_, start)| *start <= number).saturating_sub(1);
        let (location, start) = self.files.get(index).map_or(("", 0), |(l, s)| (l.as_str(), *s));
        (location, number - start + 1)
    }

    fn repeated(&self, first: u64, repeat: u64) -> CurError {
        let (first_file, first_row) = self.place(first);
        let (file, row) = self.place(repeat);
        let earlier = if first_file == file {
            format!("data row {first_row} of the same file")
        } else {
            format!("data row {first_row} of {first_file}")
        };
        invalid(
            file,
            format!(
                "data row {row} is {earlier} again (the same line of the bill): the delivery holds a row \
                 twice and would count its cost twice. Nothing was ingested; check the export (a file \
                 listed twice in other bytes, or rows repeated)"
            ),
        )
    }
}

/// The row of a pair of equal identities that comes latest in the delivery, the earliest such
/// (with the earliest row equal to it): `left` and `right` each sorted, walked side by side.
fn first_repeat(left: &[u128], right: &[u128]) -> Option<(u64, u64)> {
    let same = |a: u128, b: u128| a >> 32 == b >> 32;
    let number = |entry: u128| u64::from(entry as u32);
    let mut best: Option<(u64, u64)> = None;
    let mut note = |a: u128, b: u128| {
        let (first, repeat) = (number(a).min(number(b)), number(a).max(number(b)));
        if best.is_none_or(|(_, later)| repeat < later) {
            best = Some((first, repeat));
        }
    };
    let (mut i, mut j) = (0, 0);
    let mut previous: Option<u128> = None;
    while i < left.len() || j < right.len() {
        let next = match (left.get(i), right.get(j)) {
            (Some(&a), Some(&b)) if a <= b => {
                i += 1;
                a
            }
            (Some(&a), None) => {
                i += 1;
                a
            }
            (_, Some(&b)) => {
                j += 1;
                b
            }
            (None, None) => break,
        };
        if let Some(before) = previous
            && same(before, next)
        {
            note(before, next);
        }
        previous = Some(next);
    }
    best
}

fn too_many(location: &str) -> CurError {
    invalid(
        location,
        format!("more than {} rows in one delivery: gpuledger cannot check them for repeats", u32::MAX),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(text: &str) -> u128 {
        RowKey::default().text(text).identity()
    }

    #[test]
    fn a_row_again_in_another_file_is_refused_naming_both_places() {
        let mut rows = RowIdentities::default();
        rows.begin_file("a.csv");
        for (i, text) in ["x", "y", "z"].iter().enumerate() {
            rows.add(id(text), i).unwrap();
        }
        rows.begin_file("b.csv.gz");
        rows.add(id("w"), 0).unwrap();
        rows.add(id("y"), 1).unwrap();
        let message = rows.check().unwrap_err().to_string();
        assert!(message.starts_with("b.csv.gz: data row 2 is data row 2 of a.csv again"), "{message}");
    }

    #[test]
    fn a_row_repeated_at_once_is_refused_at_its_second_row() {
        let mut rows = RowIdentities::default();
        rows.begin_file("one.parquet");
        rows.add(id("x"), 0).unwrap();
        let message = rows.add(id("x"), 1).unwrap_err().to_string();
        assert!(
            message.starts_with("one.parquet: data row 2 is data row 1 of the same file again"),
            "{message}"
        );
    }

    #[test]
    fn distinct_rows_pass_and_files_read_apart_keep_their_places() {
        let mut first = RowIdentities::default();
        first.begin_file("a");
        first.add(id("1"), 0).unwrap();
        first.add(id("2"), 1).unwrap();
        let mut second = RowIdentities::default();
        second.begin_file("b");
        second.add(id("3"), 0).unwrap();
        second.add(id("4"), 1).unwrap();
        second.add(id("1"), 2).unwrap();
        let mut whole = RowIdentities::default();
        whole.append(first).unwrap();
        whole.append(second).unwrap();
        let message = whole.check().unwrap_err().to_string();
        assert!(message.starts_with("b: data row 3 is data row 1 of a again"), "{message}");

        let mut clean = RowIdentities::default();
        clean.begin_file("c");
        for i in 0..10_000 {
            clean.add(id(&i.to_string()), i).unwrap();
        }
        assert!(clean.check().is_ok());
    }

    #[test]
    fn keys_tell_texts_numbers_and_missing_values_apart() {
        let texts = |a: &str, b: &str| RowKey::default().text(a).text(b).identity();
        let number = |value: Option<f64>| RowKey::default().number(value).identity();
        assert_ne!(texts("ab", "c"), texts("a", "bc"));
        assert_eq!(number(Some(0.0)), number(Some(-0.0)));
        assert_ne!(number(Some(0.0)), number(None));
        assert_eq!(number(Some(1.5)) as u32, 0, "the row's number is left out");
    }
}
