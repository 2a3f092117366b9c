//! The wire format of the global model's exchange ([`super::global`]): a node's part of a cut, and the
//! proposer's sum of a complete cut, each as chunks of `(u32 index, f64 value)` pairs (little-endian,
//! ascending) under the server's `max_payload`, with the cut, the chunk (`i/n`) and the scalar sums in
//! headers (the sums as `f64` bits, exactly). A sum's chunks also carry the cut's certificate (`primal
//! dual`, bits) and each listed node's sample count, so every node installs the proposer's bits. A
//! part or sum that is the same, bit for bit, as the sender's of an earlier cut the receiver holds
//! travels as a reference to that cut: one chunk, no pairs ([`encode_reference`]).
//! Decoding refuses anything malformed (missing header, bad numbers, a payload that is not whole pairs,
//! a non-finite value, indices not ascending), and a part's chunks must agree on their sums.

use async_nats::HeaderMap;
use bytes::Bytes;

use crate::learner::global::PartialSums;
use crate::solver::Certificate;

/// Chunks one part may have (at 1 MB each, 4 GB: far above any window).
pub const MAX_CHUNKS: usize = 4096;
/// Bytes of one `(index, value)` pair on the wire.
pub const PAIR_BYTES: usize = 12;
/// Room left in a chunk for the headers.
pub const HEADER_ROOM: usize = 4096;
/// Nodes a sum's sample list may name (as [`super::global::MAX_NODES`]).
const MAX_LISTED: usize = 64;

const CUT_HEADER: &str = "Thresher-Cut";
const CHUNK_HEADER: &str = "Thresher-Chunk";
/// The scalar sums of a part, `"samples loss conj mass"` (the sums as `f64` bits). Named apart
/// from [`OLD_SUMS_HEADER`], the header of the nodes that divided by the sample count and sent no
/// mass: a mixed cluster would certify another objective on each side, so each side refuses the
/// other's parts (counted as invalid, and logged by the caller).
const SUMS_HEADER: &str = "Thresher-Sums-2";
/// The sums header of the versions before the mass, `"samples loss conj"`: refused.
const OLD_SUMS_HEADER: &str = "Thresher-Sums";
/// A part's [`PartialSums::seen`] (decimal). Optional: a part without it (a node of an earlier
/// version) makes every change of the other nodes' part count as new data.
const SEEN_HEADER: &str = "Thresher-Seen";
/// A reference instead of a payload: the part (or sum) is the sender's part (or sum) of the cut named,
/// bit for bit, which the receiver holds ([`encode_reference`]).
const SAME_AS_HEADER: &str = "Thresher-Same-As";
/// A cut sum's certificate, `"primal dual"` as `f64` bits.
const CERTIFICATE_HEADER: &str = "Thresher-Certificate";
/// A cut sum's per-node sample counts, in the proposal's node order.
const NODE_SAMPLES_HEADER: &str = "Thresher-Node-Samples";

/// A part's chunks: `(headers, payload)` each, `pairs_per_chunk` pairs at most per payload.
pub fn encode_part(
    cut: u64,
    part: &PartialSums,
    pairs_per_chunk: usize,
) -> Vec<(HeaderMap, Bytes)> {
    let pairs_per_chunk = pairs_per_chunk.max(1);
    let chunks: Vec<&[(u32, f64)]> = if part.z.is_empty() {
        vec![&[]]
    } else {
        part.z.chunks(pairs_per_chunk).collect()
    };
    let sums = format!(
        "{} {:016x} {:016x} {:016x}",
        part.samples,
        part.loss_sum.to_bits(),
        part.conj_sum.to_bits(),
        part.mass.to_bits()
    );
    let n = chunks.len();
    chunks
        .into_iter()
        .enumerate()
        .map(|(i, pairs)| {
            let mut headers = HeaderMap::new();
            headers.insert(CUT_HEADER, cut.to_string().as_str());
            headers.insert(CHUNK_HEADER, format!("{i}/{n}").as_str());
            headers.insert(SUMS_HEADER, sums.as_str());
            if let Some(seen) = part.seen {
                headers.insert(SEEN_HEADER, seen.to_string().as_str());
            }
            let mut payload = Vec::with_capacity(pairs.len() * PAIR_BYTES);
            for &(j, v) in pairs {
                payload.extend_from_slice(&j.to_le_bytes());
                payload.extend_from_slice(&v.to_le_bytes());
            }
            (headers, Bytes::from(payload))
        })
        .collect()
}

/// A part that is, bit for bit, the one the sender sent for cut `same_as` (an idle node's): one chunk
/// with the part's sums and no pairs, naming that cut. The receiver files the part it holds of that cut
/// and checks the sums agree.
pub fn encode_reference(cut: u64, same_as: u64, part: &PartialSums) -> Vec<(HeaderMap, Bytes)> {
    let mut chunks = encode_part(cut, &without_pairs(part), 1);
    for (headers, _) in &mut chunks {
        headers.insert(SAME_AS_HEADER, same_as.to_string().as_str());
    }
    chunks
}

/// `part`'s sums without its pairs (not cloned: an idle node's part is ~10 MB at d = 2^20).
fn without_pairs(part: &PartialSums) -> PartialSums {
    PartialSums {
        samples: part.samples,
        mass: part.mass,
        loss_sum: part.loss_sum,
        conj_sum: part.conj_sum,
        seen: part.seen,
        z: Vec::new(),
    }
}

/// A sum that is, bit for bit, the one the proposer sent for cut `same_as`, with `extras` (the same
/// certificate): [`encode_reference`] of a sum.
pub fn encode_sum_reference(
    cut: u64,
    same_as: u64,
    total: &PartialSums,
    extras: &SumExtras,
) -> Vec<(HeaderMap, Bytes)> {
    let mut chunks = encode_sum(cut, &without_pairs(total), extras, 1);
    for (headers, _) in &mut chunks {
        headers.insert(SAME_AS_HEADER, same_as.to_string().as_str());
    }
    chunks
}

/// One chunk of a part, as received.
#[derive(Debug, Clone, PartialEq)]
pub struct Chunk {
    pub cut: u64,
    pub index: usize,
    pub count: usize,
    pub samples: usize,
    pub loss_sum: f64,
    pub conj_sum: f64,
    pub mass: f64,
    pub seen: Option<u64>,
    /// A reference to the sender's part (or sum) of this earlier cut instead of pairs
    /// ([`encode_reference`]).
    pub same_as: Option<u64>,
    pub pairs: Vec<(u32, f64)>,
}

impl Chunk {
    /// Whether this chunk's sums are those of `part` (a reference's check), bit for bit.
    pub fn sums_match(&self, part: &PartialSums) -> bool {
        self.samples == part.samples
            && self.loss_sum.to_bits() == part.loss_sum.to_bits()
            && self.conj_sum.to_bits() == part.conj_sum.to_bits()
            && self.mass.to_bits() == part.mass.to_bits()
            && self.seen == part.seen
    }
}

/// A part from a node of a version before the mass (the `Thresher-Sums` header, not `Thresher-Sums-2`).
pub fn from_older_version(headers: Option<&HeaderMap>) -> bool {
    headers.is_some_and(|h| h.get(SUMS_HEADER).is_none() && h.get(OLD_SUMS_HEADER).is_some())
}

/// Reads a chunk; `None` if anything is malformed (module docs).
pub fn decode_chunk(headers: Option<&HeaderMap>, payload: &[u8]) -> Option<Chunk> {
    let headers = headers?;
    let cut: u64 = headers.get(CUT_HEADER)?.as_str().parse().ok()?;
    let (index, count) = headers.get(CHUNK_HEADER)?.as_str().split_once('/')?;
    let (index, count): (usize, usize) = (index.parse().ok()?, count.parse().ok()?);
    if count == 0 || count > MAX_CHUNKS || index >= count {
        return None;
    }
    let sums: Vec<&str> = headers.get(SUMS_HEADER)?.as_str().split(' ').collect();
    let [samples, loss, conj, mass] = sums.as_slice() else {
        return None;
    };
    let bits = |s: &str| u64::from_str_radix(s, 16).ok().map(f64::from_bits);
    let (samples, loss_sum, conj_sum) = (samples.parse().ok()?, bits(loss)?, bits(conj)?);
    let mass = bits(mass)?;
    let seen = match headers.get(SEEN_HEADER) {
        Some(seen) => Some(seen.as_str().parse().ok()?),
        None => None,
    };
    let same_as: Option<u64> = match headers.get(SAME_AS_HEADER) {
        Some(same) => Some(same.as_str().parse().ok()?),
        None => None,
    };
    // A reference names an earlier cut and is one chunk without pairs.
    if same_as.is_some_and(|same| same >= cut || count != 1 || !payload.is_empty()) {
        return None;
    }
    let whole = payload.len().is_multiple_of(PAIR_BYTES);
    if !(loss_sum.is_finite() && conj_sum.is_finite() && mass.is_finite() && mass >= 0.0 && whole) {
        return None;
    }
    let pairs: Vec<(u32, f64)> = payload
        .chunks_exact(PAIR_BYTES)
        .map(|p| {
            let j = u32::from_le_bytes(p[..4].try_into().expect("4 bytes"));
            let v = f64::from_le_bytes(p[4..].try_into().expect("8 bytes"));
            (j, v)
        })
        .collect();
    let ascending = pairs.windows(2).all(|p| p[0].0 < p[1].0);
    if !ascending || pairs.iter().any(|&(_, v)| !v.is_finite()) {
        return None;
    }
    Some(Chunk {
        cut,
        index,
        count,
        samples,
        loss_sum,
        conj_sum,
        mass,
        seen,
        same_as,
        pairs,
    })
}

/// The chunks of one node's part for one cut, as they arrive.
#[derive(Debug)]
pub(crate) struct Assembly {
    pub cut: u64,
    chunks: Vec<Option<Vec<(u32, f64)>>>,
    missing: usize,
    sums: (usize, f64, f64, f64),
    seen: Option<u64>,
}

impl Assembly {
    pub(crate) fn new(c: &Chunk) -> Assembly {
        Assembly {
            cut: c.cut,
            chunks: vec![None; c.count],
            missing: c.count,
            sums: (c.samples, c.loss_sum, c.conj_sum, c.mass),
            seen: c.seen,
        }
    }

    /// Adds a chunk; the whole part once the last one is in (`None` also for a chunk that does not
    /// fit this assembly, which the caller counts).
    pub(crate) fn add(&mut self, c: Chunk) -> Result<Option<PartialSums>, ()> {
        if c.count != self.chunks.len()
            || (c.samples, c.loss_sum, c.conj_sum, c.mass) != self.sums
            || c.seen != self.seen
        {
            return Err(());
        }
        let slot = &mut self.chunks[c.index];
        if slot.is_none() {
            self.missing -= 1;
        }
        *slot = Some(c.pairs);
        if self.missing > 0 {
            return Ok(None);
        }
        let z: Vec<(u32, f64)> = self
            .chunks
            .iter_mut()
            .flat_map(|c| c.take().unwrap_or_default())
            .collect();
        if !z.windows(2).all(|p| p[0].0 < p[1].0) {
            return Err(());
        }
        let (samples, loss_sum, conj_sum, mass) = self.sums;
        Ok(Some(PartialSums {
            samples,
            mass,
            loss_sum,
            conj_sum,
            z,
            seen: self.seen,
        }))
    }
}

/// What a cut's sum carries besides the summed part: the certificate the proposer computed and each
/// listed node's window size (the model's `cluster.samples`).
#[derive(Debug, Clone, PartialEq)]
pub struct SumExtras {
    pub primal: f64,
    pub dual: f64,
    pub node_samples: Vec<usize>,
}

impl SumExtras {
    /// The certificate of the cut, the same bits on every node.
    pub fn certificate(&self) -> Certificate {
        Certificate::new(self.primal, self.dual, self.node_samples.iter().sum())
    }
}

/// A complete cut's chunks: the sum of every listed node's part ([`encode_part`]'s format) with
/// `extras` in two more headers of every chunk.
pub fn encode_sum(
    cut: u64,
    total: &PartialSums,
    extras: &SumExtras,
    pairs_per_chunk: usize,
) -> Vec<(HeaderMap, Bytes)> {
    let certificate = format!(
        "{:016x} {:016x}",
        extras.primal.to_bits(),
        extras.dual.to_bits()
    );
    let samples = extras
        .node_samples
        .iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(" ");
    let mut chunks = encode_part(cut, total, pairs_per_chunk);
    for (headers, _) in &mut chunks {
        headers.insert(CERTIFICATE_HEADER, certificate.as_str());
        headers.insert(NODE_SAMPLES_HEADER, samples.as_str());
    }
    chunks
}

/// A sum chunk's extras; `None` if missing or malformed (non-finite, or more than 64 nodes).
pub fn decode_sum_extras(headers: Option<&HeaderMap>) -> Option<SumExtras> {
    let headers = headers?;
    let bits = |s: &str| u64::from_str_radix(s, 16).ok().map(f64::from_bits);
    let (primal, dual) = headers.get(CERTIFICATE_HEADER)?.as_str().split_once(' ')?;
    let (primal, dual) = (bits(primal)?, bits(dual)?);
    let node_samples: Vec<usize> = headers
        .get(NODE_SAMPLES_HEADER)?
        .as_str()
        .split(' ')
        .map(|n| n.parse().ok())
        .collect::<Option<_>>()?;
    if !(primal.is_finite() && dual.is_finite())
        || node_samples.is_empty()
        || node_samples.len() > MAX_LISTED
    {
        return None;
    }
    Some(SumExtras {
        primal,
        dual,
        node_samples,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(pairs: usize) -> PartialSums {
        PartialSums {
            samples: 7,
            mass: 7.5,
            loss_sum: 0.1 + 0.2,
            conj_sum: -1.0 / 3.0,
            z: (0..pairs as u32).map(|j| (3 * j, j as f64 / 7.0)).collect(),
            seen: Some(1 << 40),
        }
    }

    fn reassemble(chunks: Vec<(HeaderMap, Bytes)>) -> Option<PartialSums> {
        let mut assembly: Option<Assembly> = None;
        let mut done = None;
        for (h, p) in chunks.into_iter().rev() {
            let c = decode_chunk(Some(&h), &p).expect("a valid chunk");
            let a = assembly.get_or_insert_with(|| Assembly::new(&c));
            if let Some(part) = a.add(c).expect("fits") {
                done = Some(part);
            }
        }
        done
    }

    #[test]
    fn a_part_round_trips_through_its_chunks_bit_for_bit() {
        for (pairs, per_chunk) in [(0, 4), (1, 4), (10, 4), (12, 4), (1000, 1000)] {
            let p = part(pairs);
            let chunks = encode_part(42, &p, per_chunk);
            assert_eq!(chunks.len(), pairs.div_ceil(per_chunk).max(1));
            assert_eq!(reassemble(chunks), Some(p));
        }
    }

    #[test]
    fn a_part_without_its_seen_count_says_it_does_not_know() {
        let mut p = part(3);
        p.seen = None;
        let chunks = encode_part(7, &p, 10);
        assert!(chunks.iter().all(|(h, _)| h.get(SEEN_HEADER).is_none()));
        assert_eq!(reassemble(chunks), Some(p));
    }

    /// A reference is one chunk with the part's (or sum's) sums and no pairs, naming an earlier cut;
    /// one that names this cut or a later one, or carries pairs, is refused.
    #[test]
    fn a_reference_names_an_earlier_cut_and_carries_the_sums_alone() {
        let p = part(10);
        let chunks = encode_reference(42, 41, &p);
        assert_eq!(chunks.len(), 1);
        let (h, payload) = &chunks[0];
        let c = decode_chunk(Some(h), payload).expect("a valid reference");
        assert_eq!((c.cut, c.same_as, c.pairs.len()), (42, Some(41), 0));
        assert!(c.sums_match(&p));
        let mut other = p.clone();
        other.seen = Some(1);
        assert!(!c.sums_match(&other));
        assert!(decode_chunk(Some(&encode_reference(42, 42, &p)[0].0), &[]).is_none());
        assert!(decode_chunk(Some(h), &payload_of(&p)).is_none());
        let extras = SumExtras {
            primal: 0.5,
            dual: 0.25,
            node_samples: vec![3, 4],
        };
        let (h, payload) = encode_sum_reference(9, 8, &p, &extras).remove(0);
        let c = decode_chunk(Some(&h), &payload).expect("a valid sum reference");
        assert_eq!(
            (c.same_as, decode_sum_extras(Some(&h))),
            (Some(8), Some(extras))
        );
    }

    fn payload_of(p: &PartialSums) -> Vec<u8> {
        encode_part(1, p, 1000).remove(0).1.to_vec()
    }

    #[test]
    fn malformed_chunks_are_refused() {
        let (h, p) = encode_part(1, &part(3), 10).remove(0);
        assert!(decode_chunk(None, &p).is_none());
        assert!(decode_chunk(Some(&h), &p[..p.len() - 1]).is_none());
        let mut nan = p.to_vec();
        nan[4..12].copy_from_slice(&f64::NAN.to_le_bytes());
        assert!(decode_chunk(Some(&h), &nan).is_none());
        let mut descending = p.to_vec();
        descending[..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(decode_chunk(Some(&h), &descending).is_none());
        let mut bad = h.clone();
        bad.insert(CHUNK_HEADER, "3/2");
        assert!(decode_chunk(Some(&bad), &p).is_none());
        let mut bad = h.clone();
        bad.insert(SUMS_HEADER, "1 2");
        assert!(decode_chunk(Some(&bad), &p).is_none());
        let mut bad = h.clone();
        bad.insert(SEEN_HEADER, "-1");
        assert!(decode_chunk(Some(&bad), &p).is_none());
        // A part of the format before the mass (three sums, the old header) is refused and known.
        let mut old = HeaderMap::new();
        for name in [CUT_HEADER, CHUNK_HEADER] {
            old.insert(name, h.get(name).unwrap().as_str());
        }
        old.insert(OLD_SUMS_HEADER, "7 3fd3333333333334 bfd5555555555555");
        assert!(decode_chunk(Some(&old), &p).is_none());
        assert!(from_older_version(Some(&old)));
        assert!(!from_older_version(Some(&h)));
        let mut three = h;
        three.insert(SUMS_HEADER, "7 3fd3333333333334 bfd5555555555555");
        assert!(decode_chunk(Some(&three), &p).is_none());
    }

    #[test]
    fn a_sum_carries_its_certificate_and_node_samples_on_every_chunk() {
        let extras = SumExtras {
            primal: 0.1 + 0.2,
            dual: -1.0 / 3.0,
            node_samples: vec![3, 0, 4],
        };
        let chunks = encode_sum(9, &part(10), &extras, 4);
        assert_eq!(chunks.len(), 3);
        for (h, _) in &chunks {
            assert_eq!(decode_sum_extras(Some(h)), Some(extras.clone()));
        }
        assert_eq!(reassemble(chunks), Some(part(10)));
        assert_eq!(extras.certificate().samples, 7);
        let (h, _) = encode_part(9, &part(1), 4).remove(0);
        assert_eq!(decode_sum_extras(Some(&h)), None);
        for (name, value) in [
            (CERTIFICATE_HEADER, "7ff8000000000000 0"),
            (CERTIFICATE_HEADER, "1"),
            (NODE_SAMPLES_HEADER, ""),
            (NODE_SAMPLES_HEADER, "1 x"),
        ] {
            let (mut h, _) = encode_sum(9, &part(1), &extras, 4).remove(0);
            h.insert(name, value);
            assert_eq!(decode_sum_extras(Some(&h)), None, "{name}: {value}");
        }
    }
}
