//! Row identity: no row of a delivery counted twice.
//!
//! Comparing whole files finds a copy, but not the same rows in other bytes: a data file
//! rewritten with another compression and listed beside the original, a `.csv` beside its
//! `.csv.gz`, one row repeated inside a file. Each row read gets an identity, 96 bits of
//! XXH3-128 over the values that tell two lines of a bill apart (what each source hashes is
//! said where it builds its [`RowKey`]), kept with the row's number in its delivery (32 bits)
//! in one `u128`. A row equal to the row before it is refused at once (a file of one row
//! repeated millions of times stops at its second row); the others are compared once the
//! delivery is read. Each file's identities, kept in a list as they are read, are laid out by
//! their first byte on a thread of their own once the file ends (one pass, in place), while
//! the next file is read; the check then takes each first byte's part of every file together,
//! sorts it (by its second byte, then each small part), half the parts on a second thread,
//! and walks it, so equal identities meet. A delivery of 10 million rows holds 160 MB of them.
//!
//! Two different rows share 96 bits of XXH3-128 with a probability of about n²/2⁹⁷: 6·10⁻¹⁶ for
//! a month of 10 million rows.

use super::{SourceError, invalid};

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
    /// The current file's rows: each one's identity with its number in the delivery in the
    /// low 32 bits, in the order read.
    entries: Vec<u128>,
    /// The ended files' rows, laid out by first byte (or being laid out), each list with the
    /// number to add to its rows' numbers (files read apart and appended).
    runs: Vec<(Run, u32)>,
    /// Each file: where it is (for messages) and the number of its first row in the delivery.
    files: Vec<(String, u64)>,
    /// Rows numbered so far.
    rows: u64,
    /// The last row's identity and number, for the repeated row caught at once.
    last: Option<(u128, u64)>,
}

/// A list of identities laid out by first byte ([`partition`]) on a thread of its own, or
/// laid out already.
#[derive(Debug)]
enum Run {
    LayingOut(std::thread::JoinHandle<Vec<u128>>),
    LaidOut(Vec<u128>),
}

/// A file of at least this many rows has its identities laid out on a thread of its own.
const ON_ITS_OWN: usize = 1 << 16;

impl Run {
    /// Lays `entries` out on a thread of its own; here if they are few (a thread would cost
    /// more) or no thread can be had.
    fn lay_out(mut entries: Vec<u128>) -> Run {
        if entries.len() < ON_ITS_OWN {
            partition(&mut entries);
            return Run::LaidOut(entries);
        }
        let (sender, receiver) = std::sync::mpsc::channel::<Vec<u128>>();
        let spawned = std::thread::Builder::new().name("row-identities".into()).spawn(move || {
            let mut entries = receiver.recv().unwrap_or_default();
            partition(&mut entries);
            entries
        });
        match spawned {
            Ok(handle) if sender.send(std::mem::take(&mut entries)).is_ok() => Run::LayingOut(handle),
            _ => {
                partition(&mut entries);
                Run::LaidOut(entries)
            }
        }
    }

    fn laid_out(self) -> Result<Vec<u128>, SourceError> {
        match self {
            Run::LaidOut(entries) => Ok(entries),
            Run::LayingOut(handle) => handle.join().map_err(|_| {
                invalid("ingest", "laying out the rows' identities failed; nothing was ingested")
            }),
        }
    }
}

impl RowIdentities {
    /// The rows that follow are `location`'s, counted from its first.
    pub fn begin_file(&mut self, location: &str) {
        self.end_file();
        self.files.push((location.to_string(), self.rows));
        self.last = None;
    }

    /// The current file's identities go to be laid out, while the next is read.
    fn end_file(&mut self) {
        if !self.entries.is_empty() {
            self.runs.push((Run::lay_out(std::mem::take(&mut self.entries)), 0));
        }
    }

    /// Adds the next row of the current file, `row` counted from 0 in its file (rows must come
    /// in order, each once). A row equal to the one just before it is refused here.
    pub fn add(&mut self, identity: u128, row: usize) -> Result<(), SourceError> {
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
    pub fn append(&mut self, mut other: RowIdentities) -> Result<(), SourceError> {
        let offset = self.rows;
        if offset + other.rows > u64::from(u32::MAX) + 1 {
            return Err(too_many(other.files.first().map_or("", |(location, _)| location.as_str())));
        }
        self.end_file();
        other.end_file();
        for (location, start) in other.files {
            self.files.push((location, start + offset));
        }
        // Adding the same number to every row's number keeps each in its part.
        self.runs.extend(other.runs.into_iter().map(|(run, added)| (run, added + offset as u32)));
        self.rows += other.rows;
        self.last = None;
        Ok(())
    }

    /// Refuses the delivery if two of its rows are the same, naming both (the first repeat
    /// in the delivery's order). Frees the identities.
    pub fn check(&mut self) -> Result<(), SourceError> {
        self.end_file();
        let mut runs = Vec::with_capacity(self.runs.len());
        for (run, offset) in std::mem::take(&mut self.runs) {
            let mut entries = run.laid_out()?;
            if offset > 0 {
                entries.iter_mut().for_each(|entry| *entry += u128::from(offset));
            }
            runs.push(entries);
        }
        match first_repeat_of(&runs) {
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

    fn repeated(&self, first: u64, repeat: u64) -> SourceError {
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

/// Lays identities out by their first byte, part after part (American flag sort, in place;
/// each part in no order), and says where each part ends. Their first bits are uniform, so a
/// month's 10 million make parts of about 40,000.
fn partition(entries: &mut [u128]) -> [usize; 256] {
    let mut ends = [0usize; 256];
    for &entry in entries.iter() {
        ends[first_byte(entry)] += 1;
    }
    let mut sum = 0;
    for end in ends.iter_mut() {
        sum += *end;
        *end = sum;
    }
    let mut next = [0usize; 256];
    next[1..].copy_from_slice(&ends[..255]);
    for this in 0..256 {
        while next[this] < ends[this] {
            // Carry the entry found here to its part, taking the one there, until one belongs here.
            let mut entry = entries[next[this]];
            let mut to = first_byte(entry);
            while to != this {
                std::mem::swap(&mut entry, &mut entries[next[to]]);
                next[to] += 1;
                to = first_byte(entry);
            }
            entries[next[this]] = entry;
            next[this] += 1;
        }
    }
    ends
}

fn first_byte(entry: u128) -> usize {
    (entry >> 120) as usize
}

/// Sorts one first byte's part: placed by the second byte into `scratch` (which it fits in a
/// core's cache), then each small part sorted.
fn sort_part(part: &mut Vec<u128>, scratch: &mut Vec<u128>) {
    let second = |entry: u128| ((entry >> 112) & 0xff) as usize;
    let mut starts = [0usize; 257];
    for &entry in part.iter() {
        starts[second(entry) + 1] += 1;
    }
    for byte in 0..256 {
        starts[byte + 1] += starts[byte];
    }
    scratch.clear();
    scratch.resize(part.len(), 0);
    let mut next = starts;
    for &entry in part.iter() {
        let byte = second(entry);
        scratch[next[byte]] = entry;
        next[byte] += 1;
    }
    for byte in 0..256 {
        scratch[starts[byte]..starts[byte + 1]].sort_unstable();
    }
    std::mem::swap(part, scratch);
}

/// [`first_repeat`] over lists laid out by [`partition`]: each first byte's part of every
/// list taken together and sorted, half the parts on a second thread.
fn first_repeat_of(runs: &[Vec<u128>]) -> Option<(u64, u64)> {
    let bounds: Vec<Vec<usize>> = runs
        .iter()
        .map(|run| (0..=256).map(|part| run.partition_point(|&e| first_byte(e) < part)).collect())
        .collect();
    let walk = |parts: std::ops::Range<usize>| {
        let (mut merged, mut scratch) = (Vec::new(), Vec::new());
        let mut earliest: Option<(u64, u64)> = None;
        for part in parts {
            merged.clear();
            for (run, bounds) in runs.iter().zip(&bounds) {
                merged.extend_from_slice(&run[bounds[part]..bounds[part + 1]]);
            }
            sort_part(&mut merged, &mut scratch);
            if let Some(found) = first_repeat(&merged)
                && earliest.is_none_or(|(_, repeat)| found.1 < repeat)
            {
                earliest = Some(found);
            }
        }
        earliest
    };
    let (low, high) = std::thread::scope(|scope| {
        let low = scope.spawn(|| walk(0..128));
        let high = walk(128..256);
        (low.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)), high)
    });
    [low, high].into_iter().flatten().min_by_key(|&(_, repeat)| repeat)
}

/// The row of a pair of equal identities that comes latest in the delivery, the earliest such
/// (with the row before it equal to it): in `sorted`, equal identities are side by side, in
/// the order of their rows.
fn first_repeat(sorted: &[u128]) -> Option<(u64, u64)> {
    let number = |entry: u128| u64::from(entry as u32);
    sorted
        .windows(2)
        .filter(|pair| pair[0] >> 32 == pair[1] >> 32)
        .map(|pair| (number(pair[0]), number(pair[1])))
        .min_by_key(|&(_, repeat)| repeat)
}

fn too_many(location: &str) -> SourceError {
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
    fn of_a_row_held_three_times_the_earliest_repeat_is_named() {
        let mut rows = RowIdentities::default();
        rows.begin_file("a");
        rows.add(id("x"), 0).unwrap();
        rows.add(id("y"), 1).unwrap();
        rows.begin_file("b");
        rows.add(id("z"), 0).unwrap();
        rows.add(id("y"), 1).unwrap();
        rows.begin_file("c");
        rows.add(id("x"), 0).unwrap();
        rows.add(id("y"), 1).unwrap();
        let message = rows.check().unwrap_err().to_string();
        assert!(message.starts_with("b: data row 2 is data row 2 of a again"), "{message}");
    }

    #[test]
    fn a_large_files_identities_laid_out_on_a_thread_of_their_own_meet_the_next_files() {
        let mut rows = RowIdentities::default();
        rows.begin_file("large");
        for i in 0..ON_ITS_OWN {
            rows.add(id(&i.to_string()), i).unwrap();
        }
        rows.begin_file("small");
        rows.add(id("x"), 0).unwrap();
        rows.add(id("12345"), 1).unwrap();
        assert!(matches!(rows.runs[0].0, Run::LayingOut(_)));
        let message = rows.check().unwrap_err().to_string();
        assert!(message.starts_with("small: data row 2 is data row 12346 of large again"), "{message}");
    }

    #[test]
    fn identities_laid_out_and_sorted_by_parts_sort_as_a_plain_sort_does() {
        let mut entries: Vec<u128> = (0..50_000u64)
            .map(|i| RowKey::default().int((i % 20_000) as i64).identity() | u128::from(i as u32))
            .collect();
        entries.extend([0, u128::MAX, 1 << 127, (1 << 127) - 1, 1 << 112]);
        let mut expected = entries.clone();
        expected.sort_unstable();
        let ends = partition(&mut entries);
        let (mut sorted, mut scratch, mut start) = (Vec::new(), Vec::new(), 0);
        for end in ends {
            let mut part = entries[start..end].to_vec();
            assert!(part.iter().all(|&e| first_byte(e) == first_byte(part[0])));
            sort_part(&mut part, &mut scratch);
            sorted.extend(part);
            start = end;
        }
        assert_eq!(sorted, expected);
        assert_eq!(partition(&mut []), [0; 256]);
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
