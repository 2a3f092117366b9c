//! The named-feature dictionary ([`FeatureDictionary`]): name → feature index, append-only, bounded
//! by a count of names and a count of bytes of names, and the [`FeatureKind`] a daemon takes (numeric
//! indices or names, decided by its first training sample with features); and what makes a name
//! valid ([`check_name`]). A parse only reads it; a body's new names and its kind are granted at
//! admission (`claim.rs`). With hashed names (`ingest.feature_names = "hashed"`) the dictionary stays
//! empty and holds the [`HashedNames`] that index names and name the supports instead.
//!
//! **Memory.** Every name is stored once: all names back to back in one `String`, the end of each in a
//! `Vec<usize>`, and an open-addressing table of `u32` indices (linear probing, at most half full)
//! that hashes a name's bytes where they lie. A dictionary of `n` names of `b` bytes in all holds
//! about `b + 8n + 8..16n` bytes (the table is a power of two, 2 to 4 slots a name), against two
//! `String`s and a hash-map entry a name before (about `2b + 100n`).
//!
//! **Removal.** Names are never evicted (see [`FeatureDictionary`]), and a refused body never added
//! any (`claim.rs`). [`Names::truncate`] forgets the newest names (a claim keeps its new names in a
//! [`Names`] of its own, and forgets those of a parse that failed): linear probing allows that without
//! tombstones, since a name's probe path only crosses slots of names older than itself (the table is
//! rebuilt in index order when it grows), so emptying the newest names' slots breaks no other path.

use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};

use parking_lot::{RwLock, RwLockReadGuard, RwLockWriteGuard};

pub use claim::{Claim, GrantError, NameView};

mod claim;

use super::hashed::HashedNames;

/// Which features a daemon's samples carry. Numeric indices and names share one index space (a
/// name's index is the next free one, from 0), so a daemon takes one kind only: the first training
/// body with features decides, and a body of the other kind is then refused naming its line. Samples
/// without features fit either.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FeatureKind {
    /// Not decided yet: no training sample with features has been accepted.
    Open,
    /// Numeric indices (LIBSVM, `"indices"`/`"values"`).
    Indices,
    /// Named features (`"features": {"name": value}`).
    Names,
}

impl FeatureKind {
    /// The word the checkpoint and the messages use (`"indices"`, `"names"`; `"open"`).
    pub fn name(self) -> &'static str {
        match self {
            FeatureKind::Open => "open",
            FeatureKind::Indices => "indices",
            FeatureKind::Names => "names",
        }
    }

    /// From [`FeatureKind::name`].
    pub fn from_name(name: &str) -> Option<FeatureKind> {
        match name {
            "open" => Some(FeatureKind::Open),
            "indices" => Some(FeatureKind::Indices),
            "names" => Some(FeatureKind::Names),
            _ => None,
        }
    }

    fn from_u8(v: u8) -> FeatureKind {
        match v {
            1 => FeatureKind::Indices,
            2 => FeatureKind::Names,
            _ => FeatureKind::Open,
        }
    }

    fn to_u8(self) -> u8 {
        match self {
            FeatureKind::Open => 0,
            FeatureKind::Indices => 1,
            FeatureKind::Names => 2,
        }
    }
}

/// Name → feature index, bounded by `ingest.max_named_features` names and
/// `ingest.max_named_feature_bytes` bytes of names.
///
/// Policy when full: new names are refused (the request gets 400 and changes nothing); names are never
/// evicted. Why not evict: a name's index is what the learners' windows and published models hold, so
/// evicting a name would either leave a model's support with a nameless (or, once reused, wrongly
/// named) feature, or require dropping that feature from every learner's state. Refusing keeps every
/// learned name valid; the limits and the refusals are metrics (`thresher_feature_names`,
/// `thresher_feature_name_bytes`, `thresher_feature_names_refused_total`).
#[derive(Debug)]
pub struct FeatureDictionary {
    capacity: usize,
    byte_capacity: usize,
    /// Requests refused by the dictionary's limits (full, a name too long, too many new names).
    refused: AtomicU64,
    /// The [`FeatureKind`]; changed from `Open` only under the write lock of `inner`.
    kind: AtomicU8,
    /// Why a lock: HTTP handlers on several runtime threads resolve names concurrently; writers (new
    /// names) are rare and short, readers (the model endpoint) only copy names.
    inner: RwLock<Names>,
    /// Names hashed instead of registered (`ingest.feature_names = "hashed"`; [`super::hashed`]).
    hashed: Option<HashedNames>,
}

impl Default for FeatureDictionary {
    fn default() -> FeatureDictionary {
        FeatureDictionary::new(0)
    }
}

/// The names, each stored once (see the module documentation).
#[derive(Debug)]
pub struct Names {
    /// Every name, back to back, in index order.
    text: String,
    /// The end of each name in `text`.
    ends: Vec<usize>,
    /// Open addressing: `EMPTY` or a name's index; `slots.len()` is a power of two (or 0).
    slots: Vec<u32>,
    hasher: RandomState,
}

const EMPTY: u32 = u32::MAX;

impl Names {
    fn new() -> Names {
        Names {
            text: String::new(),
            ends: Vec::new(),
            slots: Vec::new(),
            hasher: RandomState::new(),
        }
    }

    /// Names held.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Bytes of all names together.
    pub fn bytes(&self) -> usize {
        self.text.len()
    }

    /// The name of index `j`.
    pub fn get(&self, j: usize) -> Option<&str> {
        let end = *self.ends.get(j)?;
        let start = if j == 0 { 0 } else { self.ends[j - 1] };
        Some(&self.text[start..end])
    }

    /// The index of `name`.
    pub fn index_of(&self, name: &str) -> Option<u32> {
        if self.slots.is_empty() {
            return None;
        }
        let mask = self.slots.len() - 1;
        let mut at = self.hasher.hash_one(name) as usize & mask;
        loop {
            match self.slots[at] {
                EMPTY => return None,
                j if self.get(j as usize) == Some(name) => return Some(j),
                _ => at = (at + 1) & mask,
            }
        }
    }

    /// Adds `name` (not held yet) as the next index, which it returns.
    pub fn push(&mut self, name: &str) -> u32 {
        let j = self.ends.len() as u32;
        self.text.push_str(name);
        self.ends.push(self.text.len());
        if 2 * self.ends.len() > self.slots.len() {
            self.rebuild((2 * self.slots.len()).max(16));
        } else {
            self.place(j);
        }
        j
    }

    /// Forgets every name from index `len` on (the newest ones: see the module documentation).
    pub fn truncate(&mut self, len: usize) {
        while self.ends.len() > len {
            let j = self.ends.len() - 1;
            let mask = self.slots.len() - 1;
            let mut at = self.hasher.hash_one(self.get(j).unwrap_or_default()) as usize & mask;
            while self.slots[at] != j as u32 {
                at = (at + 1) & mask;
            }
            self.slots[at] = EMPTY;
            self.ends.pop();
            self.text.truncate(self.ends.last().copied().unwrap_or(0));
        }
    }

    fn place(&mut self, j: u32) {
        let mask = self.slots.len() - 1;
        let mut at = self
            .hasher
            .hash_one(self.get(j as usize).unwrap_or_default()) as usize
            & mask;
        while self.slots[at] != EMPTY {
            at = (at + 1) & mask;
        }
        self.slots[at] = j;
    }

    /// A table of `size` slots holding every name, placed in index order.
    fn rebuild(&mut self, size: usize) {
        self.slots = vec![EMPTY; size];
        for j in 0..self.ends.len() as u32 {
            self.place(j);
        }
    }

    /// Heap bytes held (the capacities of the three buffers).
    fn heap_bytes(&self) -> usize {
        self.text.capacity()
            + self.ends.capacity() * std::mem::size_of::<usize>()
            + self.slots.capacity() * std::mem::size_of::<u32>()
    }
}

impl FeatureDictionary {
    /// An empty dictionary of at most `capacity` names and no bound on their bytes
    /// ([`FeatureDictionary::with_limits`] sets both).
    pub fn new(capacity: usize) -> FeatureDictionary {
        FeatureDictionary::with_limits(capacity, usize::MAX)
    }

    /// An empty dictionary of at most `capacity` names of `byte_capacity` bytes in all.
    pub fn with_limits(capacity: usize, byte_capacity: usize) -> FeatureDictionary {
        FeatureDictionary {
            capacity,
            byte_capacity,
            refused: Default::default(),
            kind: AtomicU8::new(FeatureKind::Open.to_u8()),
            inner: RwLock::new(Names::new()),
            hashed: None,
        }
    }

    /// Rebuilds a dictionary from names in index order (checkpoint restore), with the kind the
    /// checkpoint recorded (`Names` whenever it holds a name).
    pub fn from_names(
        capacity: usize,
        byte_capacity: usize,
        names: Vec<String>,
        kind: FeatureKind,
    ) -> FeatureDictionary {
        let d = FeatureDictionary::with_limits(capacity, byte_capacity);
        {
            let mut inner = d.inner.write();
            for name in &names {
                if inner.index_of(name).is_none() {
                    inner.push(name);
                }
            }
        }
        let kind = if names.is_empty() {
            kind
        } else {
            FeatureKind::Names
        };
        d.kind.store(kind.to_u8(), Ordering::Release);
        d
    }

    /// `ingest.max_named_features`.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// `ingest.max_named_feature_bytes`.
    pub fn byte_capacity(&self) -> usize {
        self.byte_capacity
    }

    /// Requests refused so far by the dictionary's limits.
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    pub(super) fn count_refusal(&self) {
        self.refused.fetch_add(1, Ordering::Relaxed);
    }

    pub fn len(&self) -> usize {
        self.inner.read().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of all names together (at most `ingest.max_named_feature_bytes`).
    pub fn name_bytes(&self) -> usize {
        self.inner.read().bytes()
    }

    /// Heap bytes the dictionary holds (its buffers' capacities): what `docs/limits.md` bounds.
    pub fn heap_bytes(&self) -> usize {
        self.inner.read().heap_bytes()
    }

    /// All names in index order.
    pub fn names(&self) -> Vec<String> {
        self.names_from(0, usize::MAX)
    }

    /// Up to `most` names from index `from` on, in index order (a checkpoint writes the new ones).
    pub fn names_from(&self, from: usize, most: usize) -> Vec<String> {
        let inner = self.inner.read();
        (from..inner.len().min(from.saturating_add(most)))
            .filter_map(|j| inner.get(j).map(str::to_string))
            .collect()
    }

    /// Names of the given indices (`None` where an index has no name).
    pub fn names_of(&self, indices: &[u32]) -> Vec<Option<String>> {
        if let Some(hashed) = &self.hashed {
            return hashed.names_of(indices);
        }
        let inner = self.inner.read();
        indices
            .iter()
            .map(|&j| inner.get(j as usize).map(str::to_string))
            .collect()
    }

    /// The kind of features this dictionary's daemon takes.
    pub fn kind(&self) -> FeatureKind {
        FeatureKind::from_u8(self.kind.load(Ordering::Acquire))
    }

    /// The names, locked for reading (a parse resolves a body's names against them).
    pub(super) fn read(&self) -> RwLockReadGuard<'_, Names> {
        self.inner.read()
    }

    /// The names, locked for writing (the replay of logged names); with the lock held,
    /// [`Self::kind`] can only change through [`Self::set_names_kind`].
    pub(super) fn write(&self) -> RwLockWriteGuard<'_, Names> {
        self.inner.write()
    }

    /// Marks the kind `Names` (call with the [`Self::write`] lock held, after adding names).
    pub(super) fn set_names_kind(&self, _held: &RwLockWriteGuard<'_, Names>) {
        self.kind
            .store(FeatureKind::Names.to_u8(), Ordering::Release);
    }
}

impl FeatureDictionary {
    /// This dictionary with names hashed by `hashed` instead of registered (`None`: registered).
    pub fn with_hashing(mut self, hashed: Option<HashedNames>) -> FeatureDictionary {
        self.hashed = hashed;
        self
    }

    /// The hashing of names, when names are hashed (`ingest.feature_names = "hashed"`).
    pub fn hashed(&self) -> Option<&HashedNames> {
        self.hashed.as_ref()
    }

    /// The hash's bits and seed, when names are hashed.
    pub fn hashing(&self) -> Option<crate::ingest::hashed::Hashing> {
        self.hashed.as_ref().map(HashedNames::hashing)
    }
}

/// Why a body of the other kind than `taken` is refused.
pub(crate) fn kind_refusal(taken: FeatureKind) -> String {
    let (refused, taken_what) = match taken {
        FeatureKind::Names => ("numeric feature indices", "named features"),
        _ => ("named features", "numeric feature indices"),
    };
    format!(
        "{refused} are refused: this daemon takes {taken_what} (its first training sample with \
         features had them), and the two would share one index space"
    )
}

/// Why `name` is refused when the dictionary holds `capacity` names.
pub(crate) fn full_by_count(capacity: usize, name: &str) -> String {
    format!(
        "feature dictionary is full ({capacity} names, ingest.max_named_features); cannot add {name:?}"
    )
}

/// Why `name` is refused when the dictionary holds `byte_capacity` bytes of names.
pub(crate) fn full_by_bytes(byte_capacity: usize, name: &str) -> String {
    format!(
        "feature dictionary is full ({byte_capacity} bytes of names, ingest.max_named_feature_bytes); \
         cannot add {name:?}"
    )
}

/// A feature name must be non-empty, hold a visible character, and hold no control character (C0,
/// DEL, C1: NUL, newlines, escapes) and no invisible formatting character that makes a name read as
/// another (the bidi controls U+061C, U+200E-U+200F, U+202A-U+202E, U+2066-U+2069; line and paragraph
/// separators; zero-width spaces, word joiner and BOM). Why: names are shown in models, logs and
/// dashboards, where such characters reorder or hide text (CVE-2021-42574, "Trojan Source"). The
/// error says which character, never echoing it.
pub fn check_name(name: &str) -> Result<(), String> {
    let bad = |c: char| {
        c.is_control()
            || matches!(
                c,
                '\u{061C}'
                    | '\u{200B}'..='\u{200F}'
                    | '\u{2028}'..='\u{202E}'
                    | '\u{2060}'..='\u{2064}'
                    | '\u{2066}'..='\u{2069}'
                    | '\u{FEFF}'
            )
    };
    if let Some((at, c)) = name.char_indices().find(|&(_, c)| bad(c)) {
        return Err(format!(
            "feature name holds U+{:04X} at byte {at}: names must be printable, without control or \
             bidirectional-formatting characters",
            u32::from(c)
        ));
    }
    match name.trim().is_empty() {
        true if name.is_empty() => Err("feature name is empty".to_string()),
        true => Err("feature name is only whitespace".to_string()),
        false => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_found_pushed_and_rolled_back() {
        let mut n = Names::new();
        let words: Vec<String> = (0..1000).map(|i| format!("f{i}")).collect();
        for (i, w) in words.iter().enumerate() {
            assert_eq!(n.index_of(w), None);
            assert_eq!(n.push(w), i as u32);
        }
        for (i, w) in words.iter().enumerate() {
            assert_eq!(n.index_of(w), Some(i as u32));
            assert_eq!(n.get(i), Some(w.as_str()));
        }
        n.truncate(600);
        assert_eq!(n.len(), 600);
        assert_eq!(
            n.bytes(),
            words[..600].iter().map(String::len).sum::<usize>()
        );
        for (i, w) in words.iter().enumerate() {
            assert_eq!(n.index_of(w), (i < 600).then_some(i as u32), "{w}");
        }
        assert_eq!(n.push("f999"), 600);
        assert_eq!(n.index_of("f999"), Some(600));
        assert_eq!(n.index_of(""), None);
    }

    #[test]
    fn the_kind_is_claimed_once() {
        let claim_indices = |d: &FeatureDictionary| {
            let mut claim = Claim::default();
            claim.note_kind(FeatureKind::Indices, 1);
            let mut samples = crate::sample::SampleBlock::new();
            d.grant(&claim, &mut samples, |_, _, _| Ok::<(), ()>(()))
                .is_ok()
        };
        let d = FeatureDictionary::new(10);
        assert_eq!(d.kind(), FeatureKind::Open);
        assert!(claim_indices(&d));
        assert_eq!(d.kind(), FeatureKind::Indices);
        let d = FeatureDictionary::from_names(10, 100, vec!["a".into()], FeatureKind::Open);
        assert_eq!(d.kind(), FeatureKind::Names);
        assert!(!claim_indices(&d));
        let d = FeatureDictionary::from_names(10, 100, vec![], FeatureKind::Indices);
        assert_eq!(d.kind(), FeatureKind::Indices);
        for k in [FeatureKind::Open, FeatureKind::Indices, FeatureKind::Names] {
            assert_eq!(FeatureKind::from_name(k.name()), Some(k));
        }
    }

    #[test]
    fn names_must_be_printable() {
        for name in ["a b", "naïve", "日本", "x-1_2.3", "emoji \u{1F600}"] {
            assert_eq!(check_name(name), Ok(()), "{name}");
        }
        for name in [
            "",
            " ",
            "a\0",
            "a\u{202E}b",
            "\u{2066}",
            "a\nb",
            "\u{85}",
            "\u{FEFF}x",
        ] {
            assert!(check_name(name).is_err(), "{name:?}");
        }
    }
}
