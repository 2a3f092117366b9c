//! What a parsed training body asks of the dictionary ([`Claim`]), and its grant at admission
//! ([`FeatureDictionary::grant`]).
//!
//! A parse changes no state: it reads the dictionary, and records in a claim the kind of features
//! its body carries and the names the dictionary does not hold yet, which it numbers provisionally
//! from the dictionary's size when the claim began (`base`). Only when the body is admitted (under
//! the admission lock, with the queue seen to have room) is the claim granted: the kind is taken, the
//! new names get their indices, and only after the write-ahead log took the batch (with those names).
//! A body refused after its parse (a full queue or log, a failed log, a stop) leaves nothing.
//!
//! In the common case nobody registered names between a body's parse and its admission, so the
//! provisional indices are the real ones and the samples stay as parsed. Otherwise a pending name
//! another body registered meanwhile takes that index, the rest the next free ones, and the samples'
//! indices are rewritten ([`SampleBlock::remap_from`]). The limits are checked again there: a body
//! that no longer fits (or whose kind another body took meanwhile) is refused naming its line.

use crate::ingest::hashed::Hashing;
use parking_lot::RwLockReadGuard;

use super::{FeatureDictionary, FeatureKind, Names};
use crate::ingest::BatchError;
use crate::sample::SampleBlock;

/// A parsed body's (or a stdin batch's) demands on the dictionary, granted at admission.
#[derive(Debug)]
pub struct Claim {
    /// The feature kind the samples carry (`Open`: none with features, or a prediction body).
    kind: FeatureKind,
    /// The line of the first sample of that kind.
    kind_line: usize,
    /// The dictionary's size when the claim's first new name was noted: the new names are numbered
    /// from it. Names the dictionary got at `base` or later count as new here.
    base: usize,
    /// The new names in order of first sight (stored as the dictionary stores its own).
    names: Names,
    /// The line each new name was first seen on.
    lines: Vec<usize>,
    /// `ingest.max_dim`: no name may take an index at or above it.
    max_dim: usize,
}

impl Default for Claim {
    fn default() -> Claim {
        Claim {
            kind: FeatureKind::Open,
            kind_line: 0,
            base: 0,
            names: Names::new(),
            lines: Vec::new(),
            max_dim: usize::MAX,
        }
    }
}

/// Where a claim stood before a parse, to go back to when that parse fails ([`Claim::rewind`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Mark {
    kind: FeatureKind,
    kind_line: usize,
    names: usize,
}

impl Claim {
    /// The kind of features the claim's samples carry (`Open` if none).
    pub fn kind(&self) -> FeatureKind {
        self.kind
    }

    /// The names it would add, in order.
    pub fn new_names(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        (0..self.names.len()).map(|k| self.names.get(k).unwrap_or_default())
    }

    /// Whether granting it changes nothing whatever the dictionary holds.
    pub fn is_empty(&self) -> bool {
        self.kind == FeatureKind::Open && self.names.is_empty()
    }

    pub(crate) fn mark(&self) -> Mark {
        Mark {
            kind: self.kind,
            kind_line: self.kind_line,
            names: self.names.len(),
        }
    }

    /// Forgets what was noted since `mark` (a parse that failed).
    pub(crate) fn rewind(&mut self, mark: Mark) {
        self.names.truncate(mark.names);
        self.lines.truncate(mark.names);
        self.kind = mark.kind;
        self.kind_line = mark.kind_line;
    }

    /// Notes that the samples carry features of `kind` (from `line` on, if first).
    pub(crate) fn note_kind(&mut self, kind: FeatureKind, line: usize) {
        if self.kind == FeatureKind::Open {
            self.kind = kind;
            self.kind_line = line;
        }
    }

    /// Starts a parse's name resolution against `held`: a claim with no new names renumbers from
    /// the dictionary's size now, and `max_dim` bounds its indices.
    pub(crate) fn begin(&mut self, held: &Names, max_dim: usize) {
        if self.names.is_empty() {
            self.base = held.len();
        }
        self.max_dim = max_dim;
    }

    /// The index `name` has for this claim: the dictionary's, if it held the name before `base`;
    /// else the provisional one of a new name already noted.
    #[inline]
    pub(crate) fn lookup(&self, held: &Names, name: &str) -> Option<u32> {
        match held.index_of(name) {
            Some(j) if (j as usize) < self.base => Some(j),
            _ if self.names.is_empty() => None,
            _ => self
                .names
                .index_of(name)
                .map(|k| (self.base + k as usize) as u32),
        }
    }

    /// The provisional index the next new name would take.
    pub(crate) fn next_index(&self) -> usize {
        self.base + self.names.len()
    }

    /// How many names the dictionary would hold once granted, as far as a parse can tell.
    pub(crate) fn names_after(&self, held: &Names) -> usize {
        held.len().max(self.base) + self.names.len()
    }

    /// Bytes of names the dictionary would hold once granted, as far as a parse can tell.
    pub(crate) fn bytes_after(&self, held: &Names) -> usize {
        held.bytes() + self.names.bytes()
    }

    /// Notes `name` (not found by [`Claim::lookup`]) as new, first seen at `line`; its provisional
    /// index.
    pub(crate) fn add(&mut self, name: &str, line: usize) -> u32 {
        self.lines.push(line);
        self.base as u32 + self.names.push(name)
    }
}

/// The dictionary's names as they are once a claim is granted: those held, then the claim's new
/// ones. The write-ahead log reads the names it has not logged yet from it.
pub struct NameView<'a> {
    held: &'a Names,
    new: &'a [&'a str],
    /// Hashed names: the hash's bits and seed (and no names).
    hashing: Option<Hashing>,
}

impl NameView<'_> {
    /// The hashing of names, when names are hashed (the log starts each segment with it).
    pub fn hashing(&self) -> Option<Hashing> {
        self.hashing
    }

    /// Names in all.
    pub fn len(&self) -> usize {
        self.held.len() + self.new.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The names from index `from` on, in index order.
    pub fn names_from(&self, from: usize) -> Vec<String> {
        let held = (from..self.held.len()).filter_map(|j| self.held.get(j));
        let skip = from.saturating_sub(self.held.len());
        held.chain(self.new.iter().skip(skip).copied())
            .map(str::to_string)
            .collect()
    }
}

/// Why a claim was not granted.
#[derive(Debug)]
pub enum GrantError<E> {
    /// The body no longer fits the dictionary (its limits, or the kind another body took since its
    /// parse): refused naming the line.
    Refused(BatchError),
    /// The commit step failed (the write-ahead log): nothing was granted.
    Commit(E),
}

impl FeatureDictionary {
    /// Grants `claim` for `samples` (its parsed body, indices provisional as the claim numbered
    /// them), all or nothing: checks the kind and the limits, gives the new names their indices
    /// (rewriting `samples` if they differ from the provisional ones), then calls `commit` with the
    /// names as they will be, the samples and whether they were rewritten, and only if it succeeds
    /// takes the kind and adds the names. `commit` runs under the dictionary's lock when the claim
    /// changes anything (readers wait for it), so nobody sees the names before it succeeded.
    ///
    /// Callers serialise grants (the admission lock), so that the write-ahead log's order of names
    /// is the dictionary's.
    pub fn grant<T, E>(
        &self,
        claim: &Claim,
        samples: &mut SampleBlock,
        commit: impl FnOnce(&NameView<'_>, &SampleBlock, bool) -> Result<T, E>,
    ) -> Result<T, GrantError<E>> {
        let total = samples.len();
        if claim.names.is_empty() {
            // Nothing to add: the kind is the one taken, or none (it leaves `Open` only under the
            // write lock, so it cannot change while the read lock is held).
            let held = self.inner.read();
            if claim.kind == FeatureKind::Open || claim.kind == self.kind() {
                let view = NameView {
                    held: &held,
                    new: &[],
                    hashing: self.hashing(),
                };
                return commit(&view, samples, false).map_err(GrantError::Commit);
            }
        }
        let mut inner = self.inner.write();
        let taken = self.kind();
        if claim.kind != FeatureKind::Open && taken != FeatureKind::Open && taken != claim.kind {
            return Err(GrantError::Refused(refusal(
                claim.kind_line,
                super::kind_refusal(taken),
                total,
            )));
        }
        let (new, map) = self.place(claim, &inner, total)?;
        let remapped = map
            .iter()
            .enumerate()
            .any(|(k, &j)| j as usize != claim.base + k);
        if remapped {
            samples.remap_from(claim.base as u32, &map);
        }
        let view = NameView {
            held: &inner,
            new: &new,
            hashing: self.hashing(),
        };
        let out = commit(&view, samples, remapped).map_err(GrantError::Commit)?;
        for name in &new {
            inner.push(name);
        }
        if claim.kind != FeatureKind::Open && taken == FeatureKind::Open {
            self.kind
                .store(claim.kind.to_u8(), std::sync::atomic::Ordering::Release);
        }
        Ok(out)
    }

    /// The names `claim` adds to `held` and the index of each of its provisional ones, within the
    /// limits (else the refusal naming the line of the first name that does not fit).
    fn place<'c, E>(
        &self,
        claim: &'c Claim,
        held: &Names,
        total: usize,
    ) -> Result<(Vec<&'c str>, Vec<u32>), GrantError<E>> {
        let mut new: Vec<&str> = Vec::with_capacity(claim.names.len());
        let mut map = Vec::with_capacity(claim.names.len());
        let mut bytes = held.bytes();
        // Nobody added a name since the claim's base: every name is new, at its provisional index.
        let unchanged = held.len() == claim.base;
        for (k, &line) in claim.lines.iter().enumerate() {
            let name = claim.names.get(k).unwrap_or_default();
            let known = match unchanged {
                true => None,
                false => held.index_of(name),
            };
            let j = match known {
                Some(j) => j,
                None => {
                    let j = held.len() + new.len();
                    let full = if j >= self.capacity() || j >= claim.max_dim {
                        Some(super::full_by_count(self.capacity(), name))
                    } else if bytes + name.len() > self.byte_capacity() {
                        Some(super::full_by_bytes(self.byte_capacity(), name))
                    } else {
                        None
                    };
                    if let Some(message) = full {
                        self.count_refusal();
                        return Err(GrantError::Refused(refusal(line, message, total)));
                    }
                    bytes += name.len();
                    new.push(name);
                    j as u32
                }
            };
            map.push(j);
        }
        Ok((new, map))
    }

    /// Calls `f` with the names as they are (a commit without a claim, such as a test's log append).
    pub fn view<T>(&self, f: impl FnOnce(&NameView<'_>) -> T) -> T {
        let held: RwLockReadGuard<'_, Names> = self.inner.read();
        f(&NameView {
            held: &held,
            new: &[],
            hashing: self.hashing(),
        })
    }
}

fn refusal(line: usize, message: String, samples: usize) -> BatchError {
    BatchError {
        line: (line > 0).then_some(line),
        message,
        samples,
    }
}

#[cfg(test)]
mod tests;
