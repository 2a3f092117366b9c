//! The write-ahead log's on-disk format: segment files of framed records, and reading them back with
//! a torn tail detected.
//!
//! A segment file starts with [`SEGMENT_MAGIC`] and holds records, each framed as
//! `payload length u32 | CRC-32 of the payload u32 | payload`, little endian. A payload is
//! `kind u8 | number u64 | body`:
//!
//! - [`KIND_SAMPLES`]: `number` is the batch's log sequence number; the body is
//!   `rows u32 | flags u8` (bit 0: weights, bit 1: served scores), then `width u32` if served, then per
//!   row `label f64 | (weight f64, NaN = none) | (served f64 × width, NaN = none) | nnz u32 |
//!   indices u32 × nnz | values f64 × nnz` (the weight only if the batch has weights; the scores the
//!   learners served before a late label only if it has them, `SampleBlock::served`).
//! - [`KIND_NAMES`]: feature names the dictionary gave indices to, written before the first batch that
//!   may use them; `number` is the dictionary index of the first, the body `count u32` then each name
//!   as `bytes u32 | UTF-8`.
//! - [`KIND_HASHING`]: the segment's named features were hashed (`ingest.feature_names = "hashed"`);
//!   `number` is the hash's seed, the body `bits u32`. The first record of every segment a daemon
//!   with hashed names writes, so a replay under other bits, another seed or the dictionary is refused.
//!
//! A record is checked whole before anything of it is used: a length past the end of the file, or a
//! checksum that does not match (a process killed mid-write, a disk that lost the last page) ends the
//! readable log there, and [`Reader`] reports where, so the torn tail can be cut off.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;

use crate::sample::{ByteReader, Sample, SampleBlock};

/// The first bytes of every segment file.
pub const SEGMENT_MAGIC: &[u8; 8] = b"THRWAL1\n";
/// Bytes of a record's frame before its payload.
pub const FRAME: usize = 8;
/// A record of a batch of samples.
pub const KIND_SAMPLES: u8 = 1;
/// A record of new feature names.
pub const KIND_NAMES: u8 = 2;
/// A record of the hashing of names (bits and seed).
pub const KIND_HASHING: u8 = 3;
/// Bytes of a payload before its body (kind and number).
const PAYLOAD_HEAD: usize = 9;

/// One record read back.
#[derive(Debug, Clone, PartialEq)]
pub enum Record {
    Samples { seq: u64, block: SampleBlock },
    Names { start: u64, names: Vec<String> },
    Hashing { bits: u32, seed: u64 },
}

/// A framed samples record, its sequence number still to be set by [`seal`] (the sequence is given
/// under the log's lock; encoding, the costly part, is done before taking it).
pub fn encode_samples(block: &SampleBlock) -> Vec<u8> {
    let weighted = (0..block.len()).any(|i| block.weight(i).is_some());
    let per_row = if weighted { 20 } else { 12 } + 8 * block.served_width();
    let mut out =
        Vec::with_capacity(FRAME + PAYLOAD_HEAD + 5 + block.len() * per_row + block.nnz() * 12);
    out.extend_from_slice(&[0; FRAME]);
    out.push(KIND_SAMPLES);
    out.extend_from_slice(&0u64.to_le_bytes());
    out.extend_from_slice(&(block.len() as u32).to_le_bytes());
    let width = block.served_width();
    out.push(u8::from(weighted) | (u8::from(width > 0) << 1));
    if width > 0 {
        out.extend_from_slice(&(width as u32).to_le_bytes());
    }
    for (i, s) in block.iter().enumerate() {
        out.extend_from_slice(&s.label.to_le_bytes());
        if weighted {
            out.extend_from_slice(&s.weight.unwrap_or(f64::NAN).to_le_bytes());
        }
        for slot in 0..width {
            let served = block.served(i, slot).unwrap_or(f64::NAN);
            out.extend_from_slice(&served.to_le_bytes());
        }
        out.extend_from_slice(&(s.indices.len() as u32).to_le_bytes());
        for j in s.indices {
            out.extend_from_slice(&j.to_le_bytes());
        }
        for v in s.values {
            out.extend_from_slice(&v.to_le_bytes());
        }
    }
    out
}

/// A framed names record: `names` got dictionary indices `start ..`.
pub fn encode_names(start: u64, names: &[String]) -> Vec<u8> {
    let mut out = Vec::with_capacity(
        FRAME + PAYLOAD_HEAD + 4 + names.iter().map(|n| 4 + n.len()).sum::<usize>(),
    );
    out.extend_from_slice(&[0; FRAME]);
    out.push(KIND_NAMES);
    out.extend_from_slice(&start.to_le_bytes());
    out.extend_from_slice(&(names.len() as u32).to_le_bytes());
    for n in names {
        out.extend_from_slice(&(n.len() as u32).to_le_bytes());
        out.extend_from_slice(n.as_bytes());
    }
    seal(&mut out, start);
    out
}

/// A framed hashing record: names hashed to `bits` bits with `seed`.
pub fn encode_hashing(bits: u32, seed: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(FRAME + PAYLOAD_HEAD + 4);
    out.extend_from_slice(&[0; FRAME]);
    out.push(KIND_HASHING);
    out.extend_from_slice(&seed.to_le_bytes());
    out.extend_from_slice(&bits.to_le_bytes());
    seal(&mut out, seed);
    out
}

/// Sets a framed record's number and its frame (length and checksum).
pub fn seal(framed: &mut [u8], number: u64) {
    framed[FRAME + 1..FRAME + PAYLOAD_HEAD].copy_from_slice(&number.to_le_bytes());
    let payload = &framed[FRAME..];
    let (len, crc) = (payload.len() as u32, crc32fast::hash(payload));
    framed[..4].copy_from_slice(&len.to_le_bytes());
    framed[4..8].copy_from_slice(&crc.to_le_bytes());
}

/// Parses a payload whose checksum matched; `Err` names what is wrong (a bug or a foreign file).
pub fn decode(payload: &[u8]) -> Result<Record, String> {
    let mut c = ByteReader::new(payload, "record ends early");
    let kind = c.u8()?;
    let number = c.u64()?;
    let record = match kind {
        KIND_SAMPLES => {
            let rows = c.u32()? as usize;
            let flags = c.u8()?;
            let weighted = flags & 1 != 0;
            let width = if flags & 2 != 0 { c.u32()? as usize } else { 0 };
            let mut block = SampleBlock::with_capacity(rows.min(1 << 20), 0);
            let mut served = Vec::with_capacity((rows * width).min(1 << 20));
            for _ in 0..rows {
                let label = c.f64()?;
                let weight = if weighted {
                    Some(c.f64()?).filter(|w| !w.is_nan())
                } else {
                    None
                };
                for _ in 0..width {
                    served.push(c.f64()?);
                }
                let (indices, values) = c.sparse_row()?;
                let sample =
                    Sample::new(indices, values, label, weight).map_err(|e| e.to_string())?;
                block.push(&sample);
            }
            block.set_served(width, served);
            Record::Samples { seq: number, block }
        }
        KIND_NAMES => {
            let count = c.u32()? as usize;
            let mut names = Vec::with_capacity(count.min(1 << 16));
            for _ in 0..count {
                let len = c.u32()? as usize;
                let bytes = c.take(len)?;
                names.push(String::from_utf8(bytes.to_vec()).map_err(|e| e.to_string())?);
            }
            Record::Names {
                start: number,
                names,
            }
        }
        KIND_HASHING => Record::Hashing {
            bits: c.u32()?,
            seed: number,
        },
        other => return Err(format!("unknown record kind {other}")),
    };
    if !c.at_end() {
        return Err("trailing bytes in a record".into());
    }
    Ok(record)
}

/// What reading a segment found after its last good record.
#[derive(Debug, Clone, PartialEq)]
pub enum End {
    /// The file ends exactly after the last record.
    Clean,
    /// A torn or corrupt record starts at this offset (the reason says which check failed); every
    /// record before it is good.
    Torn { offset: u64, reason: String },
}

/// Reads one segment file record by record, holding one record in memory at a time.
pub struct Reader {
    file: BufReader<File>,
    len: u64,
    /// Offset of the next record.
    at: u64,
    end: Option<End>,
}

impl Reader {
    /// Opens a segment; a file too short for its magic or with another magic is a torn segment at
    /// offset 0 (a crash right after creating it).
    pub fn open(path: &Path) -> std::io::Result<Reader> {
        let file = File::open(path)?;
        let len = file.metadata()?.len();
        let mut reader = Reader {
            file: BufReader::with_capacity(1 << 16, file),
            len,
            at: 0,
            end: None,
        };
        let mut magic = [0u8; 8];
        if len < 8 || reader.file.read_exact(&mut magic).is_err() || &magic != SEGMENT_MAGIC {
            reader.end = Some(End::Torn {
                offset: 0,
                reason: "no segment header".into(),
            });
        } else {
            reader.at = 8;
        }
        Ok(reader)
    }

    /// The next good record, or `None` at the end (then [`Reader::end`] says how it ended). I/O
    /// errors other than a short file are errors.
    pub fn next_record(&mut self) -> std::io::Result<Option<Record>> {
        if self.end.is_some() {
            return Ok(None);
        }
        let torn = |this: &mut Reader, reason: &str| {
            this.end = Some(End::Torn {
                offset: this.at,
                reason: reason.into(),
            });
            Ok(None)
        };
        let left = self.len - self.at;
        if left == 0 {
            self.end = Some(End::Clean);
            return Ok(None);
        }
        if left < FRAME as u64 {
            return torn(self, "a partial record frame");
        }
        let mut frame = [0u8; FRAME];
        self.file.read_exact(&mut frame)?;
        let len = u32::from_le_bytes(frame[..4].try_into().expect("4")) as u64;
        let crc = u32::from_le_bytes(frame[4..].try_into().expect("4"));
        if len > left - FRAME as u64 {
            return torn(self, "a record longer than the rest of the file");
        }
        let mut payload = vec![0u8; len as usize];
        self.file.read_exact(&mut payload)?;
        if crc32fast::hash(&payload) != crc {
            return torn(self, "checksum mismatch");
        }
        match decode(&payload) {
            Ok(record) => {
                self.at += FRAME as u64 + len;
                Ok(Some(record))
            }
            Err(reason) => torn(self, &reason),
        }
    }

    /// How the segment ended (after [`Reader::next_record`] returned `None`).
    pub fn end(&self) -> Option<&End> {
        self.end.as_ref()
    }
}
